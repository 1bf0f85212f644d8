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
    # The joint whose value is oldest: the one to look at when the snapshot is stale.
    oldest: str = ""


def _stamp_seconds(msg: Any) -> float:
    stamp = msg.header.stamp
    return stamp.sec + stamp.nanosec * 1e-9


class ObservationCache:
    """Keeps only the newest data per topic; converts images only when a request needs them.

    Subscription callbacks call `store_*` (cheap: a reference swap or a few floats under a
    lock); the goal loop calls `images()` / `joints()`, which check age and convert.
    Joint positions are kept per joint name, because many arms publish the gripper and the arm
    in separate JointState messages on the same topic.
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
        self._wanted = set(joint_names) | ({gripper_joint} if gripper_joint else set())
        self._clock = clock
        # Guards every field below; listeners are called after it is released.
        self._lock = threading.Lock()
        self._listeners: list[Callable[[], None]] = []
        self._images: dict[str, Cached] = {}
        # joint name → (position, receive time); only the joints the model uses.
        self._joints: dict[str, tuple[float, float]] = {}
        self._joint_state_received: float | None = None
        self._joint_state_stamp = 0.0
        self._joint_names_seen: tuple[str, ...] = ()
        self._joint_problem = ""

    def store_image(self, view: str, msg: Image | CompressedImage) -> None:
        entry = Cached(msg, self._clock(), _stamp_seconds(msg))
        with self._lock:
            first = view not in self._images
            self._images[view] = entry
            listeners = list(self._listeners) if first else []
        for listener in listeners:
            listener()

    def add_listener(self, listener: Callable[[], None]) -> None:
        """Call `listener` (on the sensor thread) whenever an input delivers its first value."""
        with self._lock:
            self._listeners.append(listener)

    def remove_listener(self, listener: Callable[[], None]) -> None:
        with self._lock:
            self._listeners.remove(listener)

    def missing(self) -> list[str]:
        """The inputs that have never delivered: cameras, joint_states, joints it lacks."""
        with self._lock:
            views = [f"camera {v}" for v in self._views if v not in self._images]
            received = self._joint_state_received is not None
            absent = [n for n in sorted(self._wanted) if n not in self._joints]
        if not received:
            return [*views, "joint_states"]
        return views + ([f"joint_states {', '.join(absent)}"] if absent else [])

    def store_joint_state(self, msg: JointState) -> None:
        received = self._clock()
        names = tuple(msg.name)
        if len(msg.position) != len(names):
            problem = f"joint_states has {len(names)} names but {len(msg.position)} positions"
            with self._lock:
                self._joint_problem = problem
            return
        updates = {
            name: (float(value), received)
            for name, value in zip(names, msg.position)
            if name in self._wanted
        }
        with self._lock:
            first = self._joint_state_received is None or not self._wanted <= set(self._joints)
            self._joints.update(updates)
            self._joint_state_received = received
            self._joint_state_stamp = _stamp_seconds(msg)
            self._joint_names_seen = names
            self._joint_problem = ""
            listeners = list(self._listeners) if first else []
        for listener in listeners:
            listener()

    def ages(self) -> dict[str, float | None]:
        """Age (s) of the newest message per view and of joint state; None = never received."""
        now = self._clock()
        with self._lock:
            images = dict(self._images)
            joints = self._joint_state_received
        result: dict[str, float | None] = {
            view: (now - images[view].received_s) if view in images else None
            for view in self._views
        }
        result["joint_states"] = (now - joints) if joints is not None else None
        return result

    def stamp_skew_s(self) -> float | None:
        """Spread of the header stamps of the newest camera frames and joint state.

        None until every input has arrived with a stamp (an unstamped source says nothing).
        """
        with self._lock:
            stamps = [self._images[v].stamp_s for v in self._views if v in self._images]
            stamps.append(self._joint_state_stamp)
        if len(stamps) != len(self._views) + 1 or not all(stamps):
            return None
        return max(stamps) - min(stamps)

    def images(self, max_age_s: float) -> dict[str, np.ndarray]:
        """The newest frame of every view as an array; StaleObservation if one is unusable."""
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
        """Joint positions in joint_names order, plus the gripper; raises if unusable."""
        snapshot = self._snapshot()
        if snapshot.age_s > max_age_s:
            raise StaleObservation(
                f"joint_states: newest positions are {snapshot.age_s:.3f} s old "
                f"({snapshot.oldest} is the oldest); max_state_age_s is {max_age_s:.3f}"
            )
        return snapshot

    def _snapshot(self) -> JointSnapshot:
        now = self._clock()
        with self._lock:
            values = dict(self._joints)
            seen = self._joint_names_seen
            problem = self._joint_problem
            received = self._joint_state_received
        if problem:
            raise StaleObservation(problem)
        if received is None:
            raise StaleObservation("joint_states: no message received yet")
        required = list(self._joint_names) + ([self._gripper_joint] if self._gripper_joint else [])
        missing = [n for n in required if n not in values]
        if missing:
            raise StaleObservation(
                f"joint_states lacks {', '.join(missing)}; it has {', '.join(seen) or 'no names'}"
            )
        bad = [n for n in required if not math.isfinite(values[n][0])]
        if bad:
            raise StaleObservation(f"joint_states has a non-finite position for {', '.join(bad)}")
        # The observation is as old as its oldest joint.
        oldest = min(required, key=lambda n: values[n][1])
        age = now - values[oldest][1]
        positions = [values[n][0] for n in self._joint_names]
        gripper = values[self._gripper_joint][0] if self._gripper_joint else None
        return JointSnapshot(positions, gripper, age, oldest)
