"""Camera frames taken on demand: subscriptions on a node that no executor spins.

A 1280×720 rgb8 frame is 2.7 MB; turning every frame of two 30 Hz cameras into a Python message
costs most of a core, though a request needs a frame a few times a second. So the camera
subscriptions live on a second node of the process that no executor spins, keep only the newest
frame (KEEP_LAST 1), and whoever needs a frame takes it with the subscription handle's
`take_message` — what rclpy's executors call themselves, with the same signature on Humble and
Jazzy. A frame nobody takes costs nothing in Python.
"""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass

from rclpy.context import Context
from rclpy.node import Node
from rclpy.qos import HistoryPolicy, QoSProfile, qos_profile_sensor_data
from rclpy.subscription import Subscription
from sensor_msgs.msg import CompressedImage, Image

# Best effort like every camera driver; only the newest frame is ever wanted.
CAMERA_QOS = QoSProfile(
    history=HistoryPolicy.KEEP_LAST,
    depth=1,
    reliability=qos_profile_sensor_data.reliability,
    durability=qos_profile_sensor_data.durability,
)
CAMERA_NODE_SUFFIX = "_cameras"


@dataclass(frozen=True)
class TakenImage:
    """One camera message as taken, with when it was received and published.

    `received_s` is monotonic (this process's clock); `published_s` is the publisher's write time
    on the system clock (NaN when the middleware does not report it); `sequence` the publisher's
    sequence number where the middleware reports it (Jazzy and later), else None.
    """

    msg: Image | CompressedImage
    received_s: float
    published_s: float
    sequence: int | None


class CameraFeed:
    """The camera subscriptions of one configuration, on a node of their own that is never spun.

    `take(view)` is safe from any thread: the subscription's handle is held while taking, and
    `destroy()` waits for a take in progress (`_lock`). Nothing here runs unless someone takes.
    """

    def __init__(
        self,
        context: Context,
        node_name: str,
        namespace: str,
        topics: dict[str, tuple[str, type[Image] | type[CompressedImage]]],
    ) -> None:
        """`topics`: view → (fully resolved topic name, message type)."""
        # No global arguments: topics arrive resolved and remapped by the main node, and the
        # process's `__node:=` remap must not give this node the main node's name.
        self._node = Node(
            node_name + CAMERA_NODE_SUFFIX,
            namespace=namespace,
            context=context,
            use_global_arguments=False,
            start_parameter_services=False,
        )
        # Lock order 4: nothing is taken under it.
        self._lock = threading.Lock()
        self._subscriptions: dict[str, Subscription] = {}
        for view, (topic, msg_type) in topics.items():
            # The callback never runs: no executor spins this node.
            self._subscriptions[view] = self._node.create_subscription(
                msg_type, topic, _never_called, CAMERA_QOS
            )

    @property
    def views(self) -> Sequence[str]:
        return tuple(self._subscriptions)

    def take(self, view: str) -> TakenImage | None:
        """The newest frame of `view` received since the last take, or None."""
        with self._lock:
            subscription = self._subscriptions.get(view)
            if subscription is None:
                return None
            with subscription.handle:
                taken = subscription.handle.take_message(subscription.msg_type, False)
        if taken is None:
            return None
        msg, info = taken
        return TakenImage(
            msg,
            _received_monotonic(info.get("received_timestamp", 0)),
            info.get("source_timestamp", 0) * 1e-9 or math.nan,
            info.get("publication_sequence_number"),
        )

    def destroy(self) -> None:
        with self._lock:
            self._subscriptions = {}
            self._node.destroy_node()


def _received_monotonic(received_ns: int) -> float:
    """A middleware receive time (system clock, ns; 0 = not reported) on the monotonic clock."""
    now = time.monotonic()
    if not received_ns:
        return now
    return now - max(0.0, time.time() - received_ns * 1e-9)


def _never_called(_msg: object) -> None:
    raise AssertionError("camera subscriptions are taken from, never spun")
