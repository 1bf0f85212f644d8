"""The node's inputs: the newest joint state (kept by its callback) and the cameras' newest
frames (taken on demand, see camera_feed.py), with their ages, and the snapshot a request is built
from."""

from __future__ import annotations

import math
import os
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

import numpy as np
from sensor_msgs.msg import CompressedImage, Image, JointState

from sequence_ai_ros.core.freshness import StaleObservation, check_camera_age
from sequence_ai_ros.core.readings import JointSnapshot
from sequence_ai_ros.inputs.camera_feed import TakenImage
from sequence_ai_ros.inputs.image_conversion import MAX_FRAME_PIXELS, ImageConversionError, to_array

# A camera age read (the gate's check, diagnostics) takes a frame only when the one in hand is
# older than this — or, once a goal has said its limit (`watch_images`), within _RETAKE_MARGIN_S
# of that limit: requests take frames several times a second, so the driving thread rarely has
# to. The margin keeps a live camera from reading older than the limit between the read and the
# check (a frame period and a control period fit in it).
_FRESH_S = 0.1
_RETAKE_MARGIN_S = 0.1


# The Fast DDS profile variables; the project's large-frames profile is this file.
_DDS_PROFILE_ENVS = ("FASTRTPS_DEFAULT_PROFILES_FILE", "FASTDDS_DEFAULT_PROFILES_FILE")
_LARGE_FRAMES_PROFILE = "fastdds_large_frames.xml"


def late_image_advice(environ: Mapping[str, str]) -> str:
    """What to do about late camera frames, given the transport profile in use."""
    profiles = [environ[name] for name in _DDS_PROFILE_ENVS if environ.get(name)]
    if any(os.path.basename(p) == _LARGE_FRAMES_PROFILE for p in profiles):
        return (
            "the large-frames transport profile is already in use: lower the camera load "
            "(rate, size, views) or give this node and the camera driver more CPU"
        )
    if profiles:
        return (
            f"check that the Fast DDS profile in use ({profiles[0]}) carries large frames "
            "(config/fastdds_large_frames.xml does), or lower the camera load"
        )
    return (
        "give the camera driver and this node the large-frames transport profile "
        "(docs/node.md) or lower the camera load"
    )


@dataclass
class _JointStateSeen:
    """What the joint_states messages brought so far (under the cache's `_lock`)."""

    # joint name → (position, receive time); only the joints the model uses.
    positions: dict[str, tuple[float, float]] = field(default_factory=dict)
    received: float | None = None
    stamp: float = 0.0
    names: tuple[str, ...] = ()
    # Why the last message was unusable ("" when it was usable).
    problem: str = ""


class PoseInput(Protocol):
    """The measured end-effector pose of an ee model (`pose_source.PoseSource`)."""

    @property
    def name(self) -> str: ...

    def age(self) -> float | None: ...

    def vector(self, max_age_s: float) -> list[float]: ...


class ImageSource(Protocol):
    """Where camera images are taken from (`camera_feed.CameraFeed`)."""

    def take(self, view: str) -> TakenImage | None:
        """The newest frame of `view` received since the last take, or None."""
        ...


@dataclass(frozen=True)
class Cached:
    """One received message with its receive time (monotonic s) and header stamp (s)."""

    msg: Any
    received_s: float
    stamp_s: float


def _stamp_seconds(msg: Any) -> float:
    stamp = msg.header.stamp
    return stamp.sec + stamp.nanosec * 1e-9


@dataclass
class _ImageClock:
    """What the takes of one view tell about its camera: for the late-frame warning."""

    published_s: float = math.nan
    sequence: int | None = None
    # The camera's frame period: exact from publisher sequence numbers (Jazzy+), else the
    # smallest gap between frames taken one after the other (never less than the period).
    period_s: float = math.nan


class ObservationCache:
    """The newest joint state and camera frames, their ages, and conversion on demand.

    The joint_states callback calls `store_joint_state` (a few floats under `_lock`). Camera
    frames are not pushed: `images()` takes the newest of every view from `feed` (the request's
    thread), `ages()` and `missing()` take one only when the frame in hand is old. Takes are
    serialised by `_take_lock` (held only by the thread taking; it owns `_clocks`); `_lock`
    guards every other field below and is never held while taking or converting, so the
    joint_states callback never waits behind a camera. Joint positions are kept per joint name,
    because many arms publish the gripper and the arm in separate JointState messages.
    """

    def __init__(
        self,
        views: Sequence[str],
        joint_names: Sequence[str],
        gripper_joints: Sequence[str],
        clock: Callable[[], float] = time.monotonic,
        feed: ImageSource | None = None,
        warn: Callable[[str], object] | None = None,
        pose: PoseInput | None = None,
    ) -> None:
        self._views = tuple(views)
        self._joint_names = tuple(joint_names)
        self._gripper_joints = tuple(gripper_joints)
        self._wanted = set(joint_names) | set(gripper_joints)
        self._clock = clock
        self._feed = feed
        self._warn = warn
        # An ee model's end-effector pose (pose_source.py); None for a joint-space model.
        self._pose = pose
        # Lock order 3: the camera lock (4), this cache's _lock (5) and, from a first
        # frame's listener, the goal runner's condition (6) are taken under it.
        self._take_lock = threading.Lock()
        self._clocks = {view: _ImageClock() for view in self._views}
        self._late_warned = False
        # Guards every field below; listeners are called after it is released.
        # Lock order 5: nothing is taken under it (listeners run after its release).
        self._lock = threading.Lock()
        self._retake_after_s = _FRESH_S
        self._listeners: list[Callable[[], None]] = []
        self._images: dict[str, Cached] = {}
        self._joint_state = _JointStateSeen()

    def store_image(
        self, view: str, msg: Image | CompressedImage, received_s: float | None = None
    ) -> None:
        """Keep `msg` as the newest frame of `view` (received now unless `received_s`)."""
        received = self._clock() if received_s is None else received_s
        entry = Cached(msg, received, _stamp_seconds(msg))
        with self._lock:
            first = view not in self._images
            self._images[view] = entry
            listeners = list(self._listeners) if first else []
        for listener in listeners:
            listener()

    def take_images(self, views: Sequence[str] | None = None, older_than_s: float = 0.0) -> None:
        """Take the newest frame of each of `views` (default: all); with `older_than_s`, only of
        the views whose frame in hand is older than that (or missing)."""
        if self._feed is None:
            return
        wanted = list(self._views if views is None else views)
        if older_than_s > 0:
            # Decided before the take lock: the gate's check, on the driving thread, must not
            # wait behind a request taking 2.7 MB frames when the frames in hand will do.
            wanted = self._older_than(wanted, older_than_s)
            if not wanted:
                return
        with self._take_lock:
            if older_than_s > 0:
                # Again: a take that held the lock meanwhile may have brought them.
                wanted = self._older_than(wanted, older_than_s)
            for view in wanted:
                taken = self._feed.take(view)
                if taken is not None:
                    self._note_timing(view, self._clocks[view], taken)
                    self.store_image(view, taken.msg, taken.received_s)

    def _older_than(self, views: Sequence[str], age_s: float) -> list[str]:
        """The views whose frame in hand is older than `age_s`, or missing."""
        now = self._clock()
        with self._lock:
            return [
                view for view in views
                if view not in self._images or now - self._images[view].received_s > age_s
            ]

    def watch_images(self, max_age_s: float) -> None:
        """The age limit the gate checks from now on: an age read takes a new frame once the
        one in hand is within _RETAKE_MARGIN_S of it (at least half of it), so a live camera
        never reads older than the limit."""
        with self._lock:
            self._retake_after_s = max(max_age_s / 2, max_age_s - _RETAKE_MARGIN_S)

    def _note_timing(self, view: str, state: _ImageClock, taken: TakenImage) -> None:
        """Update the view's frame period; warn once when a frame is taken later than two
        periods after it was published (a transport that delivers frames late or loses them)."""
        published, sequence = taken.published_s, taken.sequence
        gap = published - state.published_s
        if math.isfinite(gap) and gap > 0:
            if sequence is not None and state.sequence is not None and sequence > state.sequence:
                state.period_s = gap / (sequence - state.sequence)
            elif not state.period_s <= gap:
                state.period_s = gap
        state.published_s, state.sequence = published, sequence
        age = time.time() - published
        if self._late_warned or self._warn is None or not age > 2 * state.period_s:
            return
        self._late_warned = True
        self._warn(
            f"camera {view}: a frame taken {age * 1000:.0f} ms after it was published, more "
            f"than two frame periods ({state.period_s * 1000:.0f} ms): frames arrive late or "
            f"are lost; {late_image_advice(os.environ)} (warned once)"
        )

    def add_listener(self, listener: Callable[[], None]) -> None:
        """Call `listener` (on the sensor thread) whenever an input delivers its first value."""
        with self._lock:
            self._listeners.append(listener)

    def remove_listener(self, listener: Callable[[], None]) -> None:
        with self._lock:
            self._listeners.remove(listener)

    def missing(self) -> list[str]:
        """The inputs that have never delivered: cameras, joint_states, joints it lacks."""
        self.take_images(older_than_s=math.inf)
        with self._lock:
            views = [f"camera {v}" for v in self._views if v not in self._images]
            received = self._joint_state.received is not None
            absent = [n for n in sorted(self._wanted) if n not in self._joint_state.positions]
        if self._pose is not None and self._pose.age() is None:
            views.append(f"end-effector pose ({self._pose.name})")
        if not self._wanted:
            # An ee model without gripper state needs no joint_states at all.
            return views
        if not received:
            return [*views, "joint_states"]
        return views + ([f"joint_states {', '.join(absent)}"] if absent else [])

    def store_joint_state(self, msg: JointState) -> None:
        received = self._clock()
        names = tuple(msg.name)
        if len(msg.position) != len(names):
            problem = f"joint_states has {len(names)} names but {len(msg.position)} positions"
            with self._lock:
                self._joint_state.problem = problem
            return
        updates = {
            name: (float(value), received)
            for name, value in zip(names, msg.position)
            if name in self._wanted
        }
        with self._lock:
            seen = self._joint_state
            first = seen.received is None or not self._wanted <= set(seen.positions)
            seen.positions.update(updates)
            seen.received, seen.stamp, seen.names = received, _stamp_seconds(msg), names
            seen.problem = ""
            listeners = list(self._listeners) if first else []
        for listener in listeners:
            listener()

    def ages(self) -> dict[str, float | None]:
        """Age (s) of the newest message per view and of joint state; None = never received.

        A camera's frame in hand near the watched limit (`watch_images`) is replaced by its
        newest first."""
        with self._lock:
            retake_after_s = self._retake_after_s
        self.take_images(older_than_s=retake_after_s)
        now = self._clock()
        with self._lock:
            images = dict(self._images)
            joints = self._joint_state.received
        result: dict[str, float | None] = {
            view: (now - images[view].received_s) if view in images else None
            for view in self._views
        }
        result["joint_states"] = (now - joints) if joints is not None else None
        if self._pose is not None:
            result["ee_pose"] = self._pose.age()
        return result

    def end_effector_pose(self, max_age_s: float) -> list[float] | None:
        """The measured end-effector pose [x, y, z, roll, pitch, yaw] no older than
        `max_age_s` (StaleObservation otherwise); None for a joint-space model."""
        return None if self._pose is None else self._pose.vector(max_age_s)

    def stamp_skew_s(self) -> float | None:
        """Spread of the header stamps of the newest camera frames and joint state.

        None until every input has arrived with a stamp (an unstamped source says nothing).
        """
        with self._lock:
            stamps = [self._images[v].stamp_s for v in self._views if v in self._images]
            stamps.append(self._joint_state.stamp)
        if len(stamps) != len(self._views) + 1 or not all(stamps):
            return None
        return max(stamps) - min(stamps)

    def newest_images(self) -> dict[str, Image | CompressedImage]:
        """The newest camera message of each view, as received (taken first); for the episode
        recorder's `record_cameras_hz`."""
        self.take_images()
        with self._lock:
            return {view: entry.msg for view, entry in self._images.items()}

    def images(
        self, max_age_s: float, max_pixels: int = MAX_FRAME_PIXELS
    ) -> dict[str, np.ndarray]:
        """The newest frame of every view as an array; StaleObservation if one is unusable
        (older than `max_age_s`, undecodable, or a compressed frame of more than `max_pixels`).

        Takes every view's newest frame first: called on the thread that builds a request."""
        self.take_images()
        now = self._clock()
        with self._lock:
            entries = {view: self._images.get(view) for view in self._views}
        arrays = {}
        for view, entry in entries.items():
            check_camera_age(view, None if entry is None else now - entry.received_s, max_age_s)
            assert entry is not None
            try:
                arrays[view] = to_array(entry.msg, max_pixels)
            except ImageConversionError as exc:
                raise StaleObservation(f"camera {view}: {exc}") from exc
        return arrays

    def joints(self, max_age_s: float) -> JointSnapshot:
        """Joint positions in joint_names order, plus the grippers; raises if unusable."""
        snapshot = self._snapshot()
        if snapshot.age_s > max_age_s:
            raise StaleObservation(
                f"joint_states: newest positions are {snapshot.age_s:.3f} s old "
                f"({snapshot.oldest} is the oldest); max_state_age_s is {max_age_s:.3f}"
            )
        return snapshot

    def _snapshot(self) -> JointSnapshot:
        if not self._wanted:
            # No joint and no gripper in the state (an ee_delta model): nothing to be stale.
            return JointSnapshot([], None, 0.0)
        now = self._clock()
        with self._lock:
            values = dict(self._joint_state.positions)
            seen = self._joint_state.names
            problem = self._joint_state.problem
            received = self._joint_state.received
        if problem:
            raise StaleObservation(problem)
        if received is None:
            raise StaleObservation("joint_states: no message received yet")
        required = [*self._joint_names, *self._gripper_joints]
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
        gripper = [values[n][0] for n in self._gripper_joints] if self._gripper_joints else None
        return JointSnapshot(positions, gripper, age, oldest)
