"""`~/current_frames`: the JPEGs of the last observation the node sent the model, for a planner
that wants to look without subscribing to full-size camera topics.

The frames are the ones a request's thread already encoded for the model (kept by reference
when the observation is sent); the service only unwraps their base64 on the executor, never
re-encodes an image.
"""

from __future__ import annotations

import base64
import math
import threading
import time
from collections.abc import Callable

from builtin_interfaces.msg import Time
from rclpy.node import Node
from sensor_msgs.msg import CompressedImage

import sequence_ai
from sequence_ai_interfaces.srv import CurrentFrames

__all__ = ["SentImages", "serve_sent_images"]

SERVICE = "~/current_frames"


class SentImages:
    """The images of the last observation sent; any thread. `_lock` is a leaf."""

    def __init__(self) -> None:
        # Lock order: a leaf (nothing is taken under it).
        self._lock = threading.Lock()
        # Under _lock: the images as sent, their capture time (wall clock, ns) and when that
        # was on the monotonic clock.
        self._images: tuple[sequence_ai.ImageFrame, ...] = ()
        self._captured_ns = 0
        self._captured_s = math.nan

    def sent(self, observation: sequence_ai.Observation, captured_ns: int) -> None:
        """A request's thread built `observation` from images captured at `captured_ns`."""
        age_s = max(0.0, (time.time_ns() - captured_ns) / 1e9)
        with self._lock:
            self._images = tuple(observation.images)
            self._captured_ns = captured_ns
            self._captured_s = time.monotonic() - age_s

    def fill(self, response: CurrentFrames.Response) -> CurrentFrames.Response:
        with self._lock:
            images, captured_ns, captured_s = self._images, self._captured_ns, self._captured_s
        if not images:
            response.age_s = math.nan
            response.message = (
                "no observation sent yet: frames are encoded only for a goal's requests"
            )
            return response
        stamp = Time(sec=captured_ns // 1_000_000_000, nanosec=captured_ns % 1_000_000_000)
        for sent in images:
            image = CompressedImage(format="jpeg", data=base64.b64decode(sent.data))
            image.header.frame_id = sent.view
            image.header.stamp = stamp
            response.frames.append(image)
        response.age_s = time.monotonic() - captured_s
        return response


def serve_sent_images(node: Node, images: Callable[[], SentImages | None]) -> None:
    """Serve `~/current_frames` from `images()` (None while the node is not configured)."""

    def answer(
        _request: CurrentFrames.Request, response: CurrentFrames.Response
    ) -> CurrentFrames.Response:
        last = images()
        if last is None:
            response.age_s = math.nan
            response.message = "the node is not configured: it has no observation"
            return response
        return last.fill(response)

    node.create_service(CurrentFrames, SERVICE, answer)
