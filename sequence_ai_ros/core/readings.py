"""What an input reads, as plain values: a joint snapshot and a measured end-effector pose, and
the interfaces of the pose sources and the tf2 lookup. ROS-free, so the gate and the Cartesian
space take them without the subscriptions that fill them (observation_cache.py,
pose_source.py)."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

from sequence_ai_ros.core import pose_math
from sequence_ai_ros.core.freshness import StaleObservation
from sequence_ai_ros.core.pose_math import Pose

if TYPE_CHECKING:
    from geometry_msgs.msg import TransformStamped
    from rclpy.time import Time


@dataclass(frozen=True)
class JointSnapshot:
    """Joint positions in the model's order, the gripper values (None: no gripper), their age."""

    positions: list[float]
    gripper: list[float] | None
    age_s: float
    # The joint whose value is oldest: the one to look at when the snapshot is stale.
    oldest: str = ""


@dataclass(frozen=True)
class MeasuredPose:
    """The end effector in base_frame: the pose vector [x, y, z, roll, pitch, yaw], the same
    pose with its quaternion, and its age (s)."""

    vector: list[float]
    pose: Pose
    age_s: float


def measured(
    position: tuple[float, float, float],
    orientation: tuple[float, float, float, float],
    age_s: float,
    what: str,
) -> MeasuredPose:
    """A MeasuredPose from message fields; StaleObservation when they are unusable."""
    values = [*position, *orientation]
    if not all(math.isfinite(v) for v in values):
        raise StaleObservation(f"{what} has a non-finite value: {values}")
    try:
        unit = pose_math.normalized(orientation)
    except ValueError as exc:
        raise StaleObservation(f"{what}: {exc}") from exc
    return MeasuredPose(pose_math.pose_to_vector(position, unit), Pose(position, unit), age_s)


def too_old(what: str, age_s: float, max_age_s: float) -> StaleObservation:
    return StaleObservation(
        f"{what}: newest pose is {age_s:.3f} s old; max_pose_age_s is {max_age_s:.3f}"
    )


class PoseSource(Protocol):
    """Where the measured end-effector pose comes from."""

    @property
    def name(self) -> str:
        """`tf2` or `topic` (diagnostics)."""
        ...

    def pose(self, max_age_s: float) -> MeasuredPose:
        """The pose no older than `max_age_s`, or StaleObservation."""
        ...

    def age(self) -> float | None:
        """Seconds since the newest pose (None: none yet)."""
        ...

    def vector(self, max_age_s: float) -> list[float]:
        """The pose vector [x, y, z, roll, pitch, yaw] of `pose(max_age_s)`."""
        ...

    def destroy(self) -> None: ...


class TransformLookup(Protocol):
    """What the pose source asks of a `tf2_ros.Buffer`."""

    def lookup_transform(
        self, target_frame: str, source_frame: str, time: Time
    ) -> TransformStamped: ...
