"""The arm gate's strategy in Cartesian space (issue 21): how an ee_delta or ee_absolute row
becomes the command sent, checked by cartesian_rules.py's rules against a fresh measured pose,
and what a hold is. `ArmGate` calls it under its lock for every step, first step and hold, so
Cartesian commands go through the one gate flow (cameras, dry run, refusal -> stop and hold).

ee_delta rows are `[vx, vy, vz, wx, wy, wz, g...]` (MoveIt Servo twists); the command sent is
the row as is (`unitless`) or times `linear_scale` / `rotational_scale` (`speed_units`); a hold
is a zero twist. ee_absolute rows are `[x, y, z, roll, pitch, yaw, g...]`; the command sent is
that pose; a hold is the measured pose (else the last target). Rows and the measured pose are
in base_frame; commands, the workspace and the last target in command_frame
(command_frame.py): everything is checked there, after the transform.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

from sequence_ai_ros.core import pose_math
from sequence_ai_ros.core.command_kinds import EE_DELTA, EE_SPACES
from sequence_ai_ros.core.freshness import StaleObservation
from sequence_ai_ros.core.pose_math import Pose
from sequence_ai_ros.core.readings import MeasuredPose, PoseSource
from sequence_ai_ros.geometry.command_frame import CommandFrame, FixedFrame
from sequence_ai_ros.safety import cartesian_rules, joint_rules
from sequence_ai_ros.safety.cartesian_rules import CartesianLimits

# The arm part of an ee row: three linear and three angular values.
WIDTH = 6
# No transform: command_frame is base_frame.
_SAME_FRAME = pose_math.Transform()


class CartesianConfig(Protocol):
    """The parameters the Cartesian rules are read from (`NodeConfig`); read-only, so a frozen
    dataclass satisfies it."""

    @property
    def workspace_min(self) -> tuple[float, ...]: ...
    @property
    def workspace_max(self) -> tuple[float, ...]: ...
    @property
    def max_linear_speed(self) -> float: ...
    @property
    def max_angular_speed(self) -> float: ...
    @property
    def max_pose_age_s(self) -> float: ...
    @property
    def servo_command_type(self) -> str: ...
    @property
    def linear_scale(self) -> float: ...
    @property
    def rotational_scale(self) -> float: ...


@dataclass(frozen=True)
class CartesianRules:
    """One goal's Cartesian limits and Servo scaling, from its parameter snapshot."""

    limits: CartesianLimits
    max_pose_age_s: float
    command_type: str
    linear_scale: float
    rotational_scale: float

    @classmethod
    def from_config(cls, config: CartesianConfig) -> CartesianRules:
        return cls(
            CartesianLimits(
                _xyz(config.workspace_min),
                _xyz(config.workspace_max),
                config.max_linear_speed,
                config.max_angular_speed,
            ),
            config.max_pose_age_s,
            config.servo_command_type,
            config.linear_scale,
            config.rotational_scale,
        )


class CartesianSpace:
    """The Cartesian rules the gate calls (under its lock): `verdict` for a row, `still` for a
    hold, `idle_problem` for a hold republished between goals."""

    width = WIDTH

    def __init__(
        self, space: str, poses: PoseSource, period_s: float,
        frame: CommandFrame | None = None,
    ) -> None:
        if space not in EE_SPACES:
            raise ValueError(f"action space {space!r}; expected one of {', '.join(EE_SPACES)}")
        self.space = space
        self._poses = poses
        self._period_s = period_s
        self._frame: CommandFrame = frame if frame is not None else FixedFrame()

    @property
    def poses(self) -> PoseSource:
        return self._poses

    def measured(self, rules: CartesianRules) -> MeasuredPose:
        """The fresh measured pose (base_frame), or StaleObservation."""
        return self._poses.pose(rules.max_pose_age_s)

    def _measured_here(self, rules: CartesianRules, to: pose_math.Transform) -> Pose:
        """The fresh measured pose in command_frame, or StaleObservation."""
        return _moved(to, self.measured(rules).pose)

    def verdict(
        self, rules: CartesianRules, row: Sequence[float], previous: Sequence[float] | None,
        gripper: bool,
    ) -> tuple[str | None, list[float]]:
        """(why not, the command to send) for a policy row; `previous` is the last pose target
        while the motion is continuous (ee_absolute), else None. Raises StaleObservation."""
        to = self._frame.transform()
        pose = self._measured_here(rules, to)
        if len(row) < WIDTH:
            return (
                f"{self.space} row has {len(row)} values; expected {WIDTH} "
                "(x, y, z, roll, pitch, yaw) and the gripper"
            ), []
        if self.space == EE_DELTA:
            reason, command = self._twist(rules, row, pose, to)
        else:
            reference = _pose_of(previous) if previous is not None else pose
            reason, command = _target(rules, row, reference, self._period_s, to)
        if reason is None and gripper and len(row) > WIDTH:
            reason = joint_rules.check_grippers(row[WIDTH:])
        return reason, command

    def _twist(
        self, rules: CartesianRules, row: Sequence[float], pose: Pose, to: pose_math.Transform
    ) -> tuple[str | None, list[float]]:
        reason, linear, angular = cartesian_rules.twist_speeds(
            row, rules.command_type, rules.linear_scale, rules.rotational_scale
        )
        same = to == _SAME_FRAME
        if not same:
            linear, angular = list(to.vector(linear)), list(to.vector(angular))
        if reason is None:
            reason = cartesian_rules.check_twist(
                linear, angular, pose, self._period_s, rules.limits
            )
        if rules.command_type != cartesian_rules.UNITLESS:
            return reason, [*linear, *angular]
        # Servo scales a unitless twist itself: the row goes as is, turned into command_frame,
        # where it must still be within [-1, 1] (a turn can lengthen one component).
        if same:
            return reason, [float(v) for v in row[:WIDTH]]
        turned = [*to.vector(row[:3]), *to.vector(row[3:WIDTH])]
        if reason is None:
            reason = _unitless_problem(turned)
        return reason, turned

    def still(
        self, rules: CartesianRules, previous: Sequence[float] | None
    ) -> tuple[list[float] | None, str | None]:
        """ee_absolute: (the hold's pose target, None), or (None, why there is none). The
        measured pose, else the last target, checked like a step from the last target (while
        continuous) or the measured pose."""
        stale = ""
        try:
            measured: Pose | None = self._measured_here(rules, self._frame.transform())
        except StaleObservation as exc:
            measured, stale = None, str(exc)
        reference = _pose_of(previous) if previous is not None else measured
        if reference is None:
            return None, f"no fresh end-effector pose to hold at: {stale}"
        problems = []
        for candidate in (measured, reference):
            if candidate is None:
                continue
            vector = pose_math.pose_to_vector(candidate.position, candidate.orientation)
            problem = cartesian_rules.check_pose_target(
                candidate, reference, self._period_s, rules.limits
            )
            if problem is None:
                return vector, None
            problems.append(problem)
        return None, "; ".join(problems)

    def idle_problem(self, rules: CartesianRules, target: Sequence[float]) -> str | None:
        """Why the last pose hold must not be sent again now: like a first step, from a fresh
        measured pose."""
        try:
            pose = self._measured_here(rules, self._frame.transform())
        except StaleObservation as exc:
            return f"no fresh end-effector pose to check it against: {exc}"
        return cartesian_rules.check_pose_target(
            _pose_of(target), pose, self._period_s, rules.limits
        )


def _xyz(values: Sequence[float]) -> tuple[float, float, float]:
    """Three metres; a list of another length is padded with NaN, which the limits refuse."""
    x, y, z = (list(values) + [math.nan] * 3)[:3]
    return (float(x), float(y), float(z))


def _pose_of(vector: Sequence[float]) -> Pose:
    position, orientation = pose_math.pose_vector_to_pose(vector[:WIDTH])
    return Pose(position, orientation)


def _moved(to: pose_math.Transform, pose: Pose) -> Pose:
    """`pose` (base_frame) in command_frame."""
    if to == _SAME_FRAME:
        return pose
    vector = to.pose_vector(pose_math.pose_to_vector(pose.position, pose.orientation))
    return _pose_of(vector)


def _unitless_problem(twist: Sequence[float]) -> str | None:
    for i, value in enumerate(twist):
        if abs(value) > 1.0:
            return (
                f"ee_delta row turned into command_frame has {value:.4f} at {i}; a unitless "
                "twist takes each value in [-1, 1] (a refused row is never rescaled)"
            )
    return None


def _target(
    rules: CartesianRules, row: Sequence[float], reference: Pose, period_s: float,
    to: pose_math.Transform,
) -> tuple[str | None, list[float]]:
    vector = [float(v) for v in row[:WIDTH]]
    bad = [i for i, v in enumerate(vector) if not math.isfinite(v)]
    if bad:
        return (
            f"ee_absolute row has a non-finite value at {bad[0]} ({vector[bad[0]]}); "
            "expected finite"
        ), vector
    if to != _SAME_FRAME:
        vector = to.pose_vector(vector)
    return cartesian_rules.check_pose_target(
        _pose_of(vector), reference, period_s, rules.limits
    ), vector
