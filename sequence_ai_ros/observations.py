"""Latest-message cache for cameras and joint states, and the snapshot a request is built from."""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from sensor_msgs.msg import CompressedImage, Image, JointState

from sequence_ai_ros.image_conversion import ImageConversionError, to_array


class StaleObservation(RuntimeError):
    """An input is missing, too old or invalid: the goal stops rather than send it."""


@dataclass(frozen=True)
class Cached:
    """One received message with its receive time (monotonic s) and header stamp (s)."""

    msg: Any
    received_s: float
    stamp_s: float


@dataclass(frozen=True)
class JointSnapshot:
    """Joint positions in the model's order, the gripper value, and their age."""

    positions: list[float]
    gripper: float | None
    age_s: float


def _stamp_seconds(msg: Any) -> float:
    stamp = msg.header.stamp
    return stamp.sec + stamp.nanosec * 1e-9


class ObservationCache:
    """Keeps only the newest message per topic; converts only when a request needs it.

    Subscription callbacks call `store_*` (cheap: a reference swap under a lock); the goal loop
    calls `images()` / `joints()` which check age and convert.
    """

    def __init__(
        self,
        views: Sequence[str],
        joint_names: Sequence[str],
        gripper_joint: str,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._views = tuple(views)
        self._joint_names = tuple(joint_names)
        self._gripper_joint = gripper_joint
        self._clock = clock
        self._lock = threading.Lock()
        self._images: dict[str, Cached] = {}
        self._joint_state: Cached | None = None

    def store_image(self, view: str, msg: Image | CompressedImage) -> None:
        entry = Cached(msg, self._clock(), _stamp_seconds(msg))
        with self._lock:
            self._images[view] = entry

    def store_joint_state(self, msg: JointState) -> None:
        entry = Cached(msg, self._clock(), _stamp_seconds(msg))
        with self._lock:
            self._joint_state = entry

    def ages(self) -> dict[str, float | None]:
        """Age (s) of the newest message per view and of joint state; None = never received."""
        now = self._clock()
        with self._lock:
            images = dict(self._images)
            joints = self._joint_state
        result: dict[str, float | None] = {
            view: (now - images[view].received_s) if view in images else None
            for view in self._views
        }
        result["joint_states"] = (now - joints.received_s) if joints else None
        return result

    def images(self, max_age_s: float) -> dict[str, np.ndarray]:
        """The newest frame of every view as an array; raises StaleObservation if one is unusable."""
        now = self._clock()
        with self._lock:
            entries = {view: self._images.get(view) for view in self._views}
        frames = {}
        for view, entry in entries.items():
            if entry is None:
                raise StaleObservation(f"camera {view}: no image received yet")
            age = now - entry.received_s
            if age > max_age_s:
                raise StaleObservation(
                    f"camera {view}: newest image is {age:.3f} s old; max_image_age_s is "
                    f"{max_age_s:.3f}"
                )
            try:
                frames[view] = to_array(entry.msg)
            except ImageConversionError as exc:
                raise StaleObservation(f"camera {view}: {exc}") from exc
        return frames

    def joints(self, max_age_s: float) -> JointSnapshot:
        """Joint positions reordered by joint_names, plus the gripper; raises if unusable."""
        now = self._clock()
        with self._lock:
            entry = self._joint_state
        if entry is None:
            raise StaleObservation("joint_states: no message received yet")
        age = now - entry.received_s
        if age > max_age_s:
            raise StaleObservation(
                f"joint_states: newest message is {age:.3f} s old; max_state_age_s is "
                f"{max_age_s:.3f}"
            )
        return self._reorder(entry.msg, age)

    def last_joints(self) -> JointSnapshot | None:
        """The newest joint state regardless of age (for a hold), or None if unusable."""
        with self._lock:
            entry = self._joint_state
        if entry is None:
            return None
        try:
            return self._reorder(entry.msg, self._clock() - entry.received_s)
        except StaleObservation:
            return None

    def _reorder(self, msg: JointState, age: float) -> JointSnapshot:
        names = list(msg.name)
        if len(msg.position) != len(names):
            raise StaleObservation(
                f"joint_states has {len(names)} names but {len(msg.position)} positions"
            )
        index = {name: i for i, name in enumerate(names)}
        missing = [n for n in self._joint_names if n not in index]
        if self._gripper_joint and self._gripper_joint not in index:
            missing.append(self._gripper_joint)
        if missing:
            raise StaleObservation(
                f"joint_states lacks {', '.join(missing)}; it has {', '.join(names) or 'no names'}"
            )
        positions = [float(msg.position[index[n]]) for n in self._joint_names]
        gripper = float(msg.position[index[self._gripper_joint]]) if self._gripper_joint else None
        bad = [n for n, v in zip(self._joint_names, positions) if not math.isfinite(v)]
        if gripper is not None and not math.isfinite(gripper):
            bad.append(self._gripper_joint)
        if bad:
            raise StaleObservation(f"joint_states has a non-finite position for {', '.join(bad)}")
        return JointSnapshot(positions, gripper, age)
