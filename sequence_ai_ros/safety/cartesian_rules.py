"""The gate's rules in Cartesian space (issue 21): end-effector twists and pose targets checked
against the measured end-effector pose, as `joint_rules.py` checks joint commands against the
joints.

Pure Python: finite values, a workspace box in `command_frame`, a maximum linear and angular
speed per command. A refused command is never rescaled to pass: the goal stops and holds.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from sequence_ai_ros.core.pose_math import Pose

# MoveIt Servo's command types for a TwistStamped: `unitless` takes each component in [-1, 1]
# (Servo scales it by its own linear/rotational scales); `speed_units` takes m/s and rad/s.
UNITLESS = "unitless"
SPEED_UNITS = "speed_units"
SERVO_COMMAND_TYPES = (UNITLESS, SPEED_UNITS)


@dataclass(frozen=True)
class CartesianLimits:
    """The box the end effector must stay in and its speed bounds."""

    workspace_min: tuple[float, float, float]
    workspace_max: tuple[float, float, float]
    # m/s and rad/s: a command implying more, over one control period, is refused.
    max_linear_speed: float
    max_angular_speed: float

    def problems(self) -> list[str]:
        """Why these limits are unusable, each naming its parameter."""
        problems = []
        for name, values in (("workspace_min", self.workspace_min),
                             ("workspace_max", self.workspace_max)):
            if len(values) != 3 or not all(math.isfinite(v) for v in values):
                problems.append(f"{name} is {list(values)}; expected 3 finite metres (x, y, z)")
        if not problems and not all(lo < hi for lo, hi in zip(self.workspace_min,
                                                              self.workspace_max)):
            problems.append(
                f"workspace_min {list(self.workspace_min)} / workspace_max "
                f"{list(self.workspace_max)}: expected min < max on every axis"
            )
        for name in ("max_linear_speed", "max_angular_speed"):
            value = getattr(self, name)
            if not (math.isfinite(value) and value > 0.0):
                problems.append(f"{name} is {value}; expected a finite speed > 0")
        return problems


def _finite(values: Sequence[float], what: str) -> str | None:
    bad = [i for i, v in enumerate(values) if not math.isfinite(v)]
    if bad:
        return f"{what} has a non-finite value at {bad[0]} ({values[bad[0]]}); expected finite"
    return None


def _outside(position: Sequence[float], limits: CartesianLimits) -> str | None:
    for axis, value, lo, hi in zip("xyz", position, limits.workspace_min, limits.workspace_max):
        if not lo <= value <= hi:
            return (
                f"end effector {axis} would be {value:.4f} m, outside the workspace "
                f"[{lo:.4f}, {hi:.4f}] (workspace_min/workspace_max)"
            )
    return None


def twist_speeds(
    row: Sequence[float], command_type: str, linear_scale: float, angular_scale: float
) -> tuple[str | None, list[float], list[float]]:
    """(why not, linear m/s, angular rad/s) an ee_delta row (xyz, rpy) commands.

    unitless: the row is what Servo gets; each component must be in [-1, 1] and Servo's own
    scales (`linear_scale` m/s, `angular_scale` rad/s per unit) give the speed it means.
    speed_units: the row times the scales is the twist sent."""
    values = [float(v) for v in row[:6]]
    if len(values) < 6:
        width = f"ee_delta row has {len(values)} values; expected 6 (x, y, z, roll, pitch, yaw)"
        return width, [], []
    reason = _finite(values, "ee_delta row")
    if reason is None and command_type == UNITLESS:
        out = [i for i, v in enumerate(values) if abs(v) > 1.0]
        if out:
            reason = (
                f"ee_delta row value {values[out[0]]:.4f} at {out[0]} is outside [-1, 1], "
                "what MoveIt Servo's unitless command takes"
            )
    linear = [v * linear_scale for v in values[:3]]
    angular = [v * angular_scale for v in values[3:6]]
    return reason, linear, angular


def check_twist(
    linear: Sequence[float],
    angular: Sequence[float],
    measured: Pose,
    period_s: float,
    limits: CartesianLimits,
) -> str | None:
    """Why a twist (m/s, rad/s in command_frame) must not be sent now, or None: too fast, or
    one period of it takes the end effector out of the workspace."""
    reason = _finite([*linear, *angular], "twist")
    if reason is not None:
        return reason
    speed = math.sqrt(sum(v * v for v in linear))
    if speed > limits.max_linear_speed:
        return (
            f"twist linear speed {speed:.4f} m/s is over max_linear_speed "
            f"{limits.max_linear_speed:.4f}"
        )
    turn = math.sqrt(sum(w * w for w in angular))
    if turn > limits.max_angular_speed:
        return (
            f"twist angular speed {turn:.4f} rad/s is over max_angular_speed "
            f"{limits.max_angular_speed:.4f}"
        )
    reached = [p + v * period_s for p, v in zip(measured.position, linear)]
    return _outside(reached, limits)


def check_pose_target(
    target: Pose, reference: Pose, period_s: float, limits: CartesianLimits
) -> str | None:
    """Why a pose target must not be sent now, or None: not finite, not a unit quaternion, out
    of the workspace, or farther from `reference` (the last target, or the measured pose) than
    the speed limits allow in one period."""
    reason = _finite([*target.position, *target.orientation], "pose target")
    if reason is not None:
        return reason
    norm = math.sqrt(sum(q * q for q in target.orientation))
    if abs(norm - 1.0) > 1e-3:
        return f"pose target orientation has norm {norm:.4f}; expected a unit quaternion"
    reason = _outside(target.position, limits)
    if reason is not None:
        return reason
    step = math.dist(target.position, reference.position)
    if step > limits.max_linear_speed * period_s:
        return (
            f"pose target is {step:.4f} m from the last pose; max_linear_speed "
            f"{limits.max_linear_speed:.4f} m/s allows {limits.max_linear_speed * period_s:.4f} "
            "m per period"
        )
    turn = rotation_angle(reference.orientation, target.orientation)
    if turn > limits.max_angular_speed * period_s:
        return (
            f"pose target turns {turn:.4f} rad from the last pose; max_angular_speed "
            f"{limits.max_angular_speed:.4f} rad/s allows "
            f"{limits.max_angular_speed * period_s:.4f} rad per period"
        )
    return None


def rotation_angle(a: Sequence[float], b: Sequence[float]) -> float:
    """The angle (rad) of the rotation taking unit quaternion `a` to `b`."""
    dot = abs(sum(x * y for x, y in zip(a, b)))
    return 2.0 * math.acos(min(1.0, dot))
