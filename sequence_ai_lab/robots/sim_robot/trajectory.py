"""A joint_trajectory_controller-like player for the simulated arm: no ROS, so tests drive it.

It takes what `trajectory_msgs/JointTrajectory` carries (joint names, a start stamp, points with
`time_from_start`, positions and optional velocities) and answers, for any time, the desired
joint positions and velocities: linear between positions-only points, cubic Hermite when both
ends of a segment have velocities, the last point held at the end. Times are absolute seconds
in one clock (sim_robot uses its ROS clock, as the node stamps its trajectories).

A new trajectory either splices onto the running one at its start time (`Replacement.SPLICE`:
ROS 1's joint_trajectory_controller, and ros2_controllers' `allow_trajectory_replacement`) or
restarts from the measured state (`Replacement.RESTART`: Humble's controller, which forgets the
old trajectory). docs/sim.md lists where this differs from the real controller.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from enum import Enum

import numpy as np

# What joint_trajectory_controller takes as a zero velocity when it checks a trajectory's end.
_FLOAT_EPSILON = float(np.finfo(np.float32).eps)


class Replacement(str, Enum):
    """What a new trajectory does to the one running."""

    SPLICE = "splice"
    RESTART = "restart"


class TrajectoryRejected(ValueError):
    """A trajectory the controller refuses; the running one goes on unchanged."""


@dataclass(frozen=True)
class TrajectoryPoint:
    """One `JointTrajectoryPoint`, values in the order of the trajectory's joint names."""

    time_from_start_s: float
    positions: Sequence[float]
    velocities: Sequence[float] = ()
    accelerations: Sequence[float] = ()
    effort: Sequence[float] = ()


@dataclass(frozen=True)
class Trajectory:
    """One `JointTrajectory`: `start_s` is `header.stamp` in seconds, 0 meaning "now"."""

    joint_names: Sequence[str]
    start_s: float
    points: Sequence[TrajectoryPoint]


@dataclass(frozen=True)
class Setpoint:
    """The desired state at one time, in the controller's joint order."""

    positions: np.ndarray
    velocities: np.ndarray


@dataclass(frozen=True)
class _Segment:
    """From (t0, q0, v0) to (t1, q1, v1): cubic Hermite, or linear when `cubic` is false."""

    t0: float
    t1: float
    q0: np.ndarray
    q1: np.ndarray
    v0: np.ndarray
    v1: np.ndarray
    cubic: bool

    def at(self, t: float) -> Setpoint:
        span = self.t1 - self.t0
        tau = min(max(t - self.t0, 0.0), span)
        if not self.cubic:
            slope = (self.q1 - self.q0) / span
            return Setpoint(self.q0 + slope * tau, slope)
        # Hermite in power form: q0 + v0 t + c2 t^2 + c3 t^3 meets q1, v1 at t = span.
        dq = self.q1 - self.q0
        c2 = (3.0 * dq - (2.0 * self.v0 + self.v1) * span) / span**2
        c3 = (-2.0 * dq + (self.v0 + self.v1) * span) / span**3
        position = self.q0 + tau * (self.v0 + tau * (c2 + tau * c3))
        velocity = self.v0 + tau * (2.0 * c2 + 3.0 * tau * c3)
        return Setpoint(position, velocity)


@dataclass(frozen=True)
class _Knot:
    time_s: float
    positions: np.ndarray
    velocities: np.ndarray | None  # None: positions only


class TrajectoryController:
    """Plays joint trajectories for a fixed set of joints.

    Not thread-safe: its owner serialises `receive`, `sample` and `stop` (sim_robot calls them
    under its arm lock, from the subscription callback and the joint loop).
    """

    def __init__(
        self,
        joints: Sequence[str],
        *,
        replacement: Replacement = Replacement.SPLICE,
        allow_nonzero_velocity_at_trajectory_end: bool = True,
    ) -> None:
        if len(set(joints)) != len(joints) or not joints:
            raise ValueError(f"joints: got {list(joints)}, expected distinct names")
        self.joints = tuple(joints)
        self.replacement = Replacement(replacement)
        self.allow_nonzero_velocity_at_trajectory_end = allow_nonzero_velocity_at_trajectory_end
        # The trajectory being played: segments in time order, then a hold at `_end`.
        self._segments: list[_Segment] = []
        self._end: np.ndarray | None = None

    @property
    def active(self) -> bool:
        """True once a trajectory was accepted, until `stop`; it holds the last point at its end."""
        return self._end is not None

    def stop(self) -> None:
        """Another controller commands the arm: forget the trajectory."""
        self._segments, self._end = [], None

    def receive(
        self,
        trajectory: Trajectory,
        now_s: float,
        measured_positions: np.ndarray,
        measured_velocities: np.ndarray,
    ) -> int:
        """Take a new trajectory at `now_s`; the number of its points still to come.

        Raises TrajectoryRejected (naming the field) for what joint_trajectory_controller
        refuses, and for values the simulation cannot play; the running trajectory is kept then.
        """
        knots, start = self._validate(trajectory, now_s)
        future = [k for k in knots if k.time_s >= now_s]
        if not future:
            raise TrajectoryRejected(
                f"header.stamp: the trajectory starts at {start:.3f} and ends at "
                f"{knots[-1].time_s:.3f}, before now ({now_s:.3f})"
            )
        # Copies: the caller's arrays are its arm's state, which moves on.
        measured = np.array(measured_positions, dtype=float)
        if self.replacement is Replacement.RESTART:
            self._restart(knots, now_s, measured, np.array(measured_velocities, dtype=float))
        else:
            self._splice(future, max(start, now_s), now_s, measured)
        return len(future)

    def sample(self, now_s: float) -> Setpoint | None:
        """The desired state at `now_s`; None when no trajectory was received (or after stop)."""
        if self._end is None:
            return None
        # Segments that ended are gone for good: the controller only moves forward in time.
        while self._segments and self._segments[0].t1 <= now_s:
            self._segments.pop(0)
        if self._segments:
            return self._segments[0].at(now_s)
        return Setpoint(self._end.copy(), np.zeros(len(self.joints)))

    # ----- replacement -----

    def _splice(
        self, future: list[_Knot], handoff_s: float, now_s: float, measured: np.ndarray
    ) -> None:
        # Until the handoff the running trajectory (or, when idle, a hold where the arm is) keeps
        # playing; from there one segment joins it to the first point still to come.
        if self._end is None:
            self._segments, self._end = [], measured
        kept = self._until(handoff_s, now_s)
        anchor = kept[-1].at(handoff_s) if kept else self._state_at(handoff_s)
        first = future[0]
        bridge = (
            [_Knot(handoff_s, anchor.positions, anchor.velocities)]
            if first.time_s > handoff_s
            else []
        )
        self._install(kept, bridge + future)

    def _restart(
        self, knots: list[_Knot], now_s: float, measured: np.ndarray, velocity: np.ndarray
    ) -> None:
        # Humble: the old trajectory is forgotten; the segment from the state measured now to
        # the first point is played only while that point is still ahead.
        anchor = [_Knot(now_s, measured, velocity)] if knots[0].time_s > now_s else []
        self._install([], anchor + knots)

    def _install(self, kept: list[_Segment], knots: list[_Knot]) -> None:
        segments = list(kept)
        zero = np.zeros(len(self.joints))
        for a, b in zip(knots, knots[1:]):
            cubic = a.velocities is not None and b.velocities is not None
            v0 = a.velocities if a.velocities is not None else zero
            v1 = b.velocities if b.velocities is not None else zero
            segments.append(_Segment(a.time_s, b.time_s, a.positions, b.positions, v0, v1, cubic))
        self._segments = segments
        self._end = knots[-1].positions

    def _state_at(self, t: float) -> Setpoint:
        for segment in self._segments:
            if segment.t0 <= t < segment.t1:
                return segment.at(t)
        assert self._end is not None
        return Setpoint(self._end, np.zeros(len(self.joints)))

    def _until(self, t: float, now_s: float) -> list[_Segment]:
        """The running trajectory up to t: later segments dropped, the one across t cut there,
        and a hold of its last point from its end (or now) to t if it ends before t."""
        assert self._end is not None
        kept: list[_Segment] = []
        for segment in self._segments:
            if segment.t1 <= t:
                kept.append(segment)
            elif segment.t0 < t:
                cut = segment.at(t)
                kept.append(
                    _Segment(segment.t0, t, segment.q0, cut.positions, segment.v0,
                             cut.velocities, segment.cubic)
                )
        end = kept[-1].t1 if kept else now_s
        if end < t:
            zero = np.zeros(len(self.joints))
            kept.append(_Segment(end, t, self._end, self._end, zero, zero, cubic=False))
        return kept

    # ----- checks -----

    def _validate(self, trajectory: Trajectory, now_s: float) -> tuple[list[_Knot], float]:
        names = list(trajectory.joint_names)
        unknown = [n for n in names if n not in self.joints]
        if unknown:
            raise TrajectoryRejected(
                f"joint_names: {unknown[0]!r} is not a joint of this controller "
                f"(expected {', '.join(self.joints)})"
            )
        if len(set(names)) != len(names):
            raise TrajectoryRejected(f"joint_names: got {names}, expected each joint once")
        if len(names) != len(self.joints):
            missing = [n for n in self.joints if n not in names]
            raise TrajectoryRejected(
                f"joint_names: missing {', '.join(missing)}; expected all {len(self.joints)} "
                "joints (partial goals are refused, like allow_partial_joints_goal: false)"
            )
        if not trajectory.points:
            raise TrajectoryRejected("points: the trajectory is empty, expected at least one point")
        start = trajectory.start_s if trajectory.start_s != 0.0 else now_s
        if not math.isfinite(start):
            raise TrajectoryRejected(f"header.stamp: got {start}, expected a finite time")
        order = [names.index(joint) for joint in self.joints]
        knots: list[_Knot] = []
        previous = -math.inf
        for i, point in enumerate(trajectory.points):
            t = point.time_from_start_s
            if not (math.isfinite(t) and t >= 0.0 and t > previous):
                raise TrajectoryRejected(
                    f"points[{i}].time_from_start: got {t} s, expected finite, >= 0 and strictly "
                    f"after the previous point's ({previous} s)"
                )
            previous = t
            if point.accelerations:
                raise TrajectoryRejected(
                    f"points[{i}].accelerations: got {len(point.accelerations)} values; the "
                    "simulated controller plays positions (linear) or positions + velocities "
                    "(cubic), expected none"
                )
            if point.effort:
                raise TrajectoryRejected(
                    f"points[{i}].effort: got {len(point.effort)} values, expected none "
                    "(joint_trajectory_controller refuses effort too)"
                )
            positions = self._values(point.positions, f"points[{i}].positions", order)
            velocities = (
                self._values(point.velocities, f"points[{i}].velocities", order)
                if len(point.velocities)
                else None
            )
            knots.append(_Knot(start + t, positions, velocities))
        last = knots[-1].velocities
        if (
            not self.allow_nonzero_velocity_at_trajectory_end
            and last is not None
            and np.any(np.abs(last) > _FLOAT_EPSILON)
        ):
            raise TrajectoryRejected(
                f"points[{len(knots) - 1}].velocities: got {last.tolist()}, expected zeros at the "
                "end (allow_nonzero_velocity_at_trajectory_end is false)"
            )
        return knots, start

    def _values(self, values: Sequence[float], field: str, order: list[int]) -> np.ndarray:
        array = np.asarray(values, dtype=float)
        if array.shape != (len(self.joints),) or not np.all(np.isfinite(array)):
            raise TrajectoryRejected(
                f"{field}: got {array.tolist()}, expected {len(self.joints)} finite values "
                "(one per joint_names entry)"
            )
        return array[order]
