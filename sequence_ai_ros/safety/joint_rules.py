"""The last check on every step before it reaches a motor: finite, within limits, small steps."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass


@dataclass(frozen=True)
class SafetyLimits:
    """Per-joint position limits (rad) and the largest allowed change per step."""

    joint_names: tuple[str, ...]
    lower: tuple[float, ...]
    upper: tuple[float, ...]
    max_step: float
    # Largest |velocity| a velocity command may carry (rad/s), whatever the period.
    max_velocity: float = math.inf

    def __post_init__(self) -> None:
        n = len(self.joint_names)
        if len(self.lower) != n or len(self.upper) != n:
            raise ValueError(
                f"joint_lower_limits has {len(self.lower)} values and joint_upper_limits "
                f"{len(self.upper)}; expected one per joint_names entry ({n})"
            )
        for name, lo, hi in zip(self.joint_names, self.lower, self.upper):
            if not (math.isfinite(lo) and math.isfinite(hi) and lo < hi):
                raise ValueError(
                    f"limits of joint {name} are [{lo}, {hi}]; expected finite lower < upper"
                )
        if not (math.isfinite(self.max_step) and self.max_step > 0):
            raise ValueError(f"max_step is {self.max_step}; expected a finite value > 0")


def check_position_target(
    target: Sequence[float], previous: Sequence[float], limits: SafetyLimits
) -> str | None:
    """Why a joint position target must not be published, or None when it is safe.

    `previous` is the target published one step earlier (or the measured joints for the first
    step), so a jump between chunks is caught as well as one inside a chunk.
    """
    if problem := _check_width(target, limits):
        return problem
    for i, name in enumerate(limits.joint_names):
        value = target[i]
        if not math.isfinite(value):
            return f"joint {name} target is {value}; expected a finite position"
        if value < limits.lower[i] or value > limits.upper[i]:
            return (
                f"joint {name} target {value:.4f} rad is outside its limits "
                f"{_limits_text(limits, i)}"
            )
        change = abs(value - previous[i])
        if change > limits.max_step:
            return (
                f"joint {name} target changes by {change:.4f} rad in one step; "
                f"max_step is {limits.max_step:.4f}"
            )
    return None


def check_velocity_command(
    velocities: Sequence[float],
    measured: Sequence[float],
    period_s: float,
    limits: SafetyLimits,
) -> str | None:
    """Why a joint velocity command must not be published, or None when it is safe.

    A velocity held for one control period moves the joint by v·period: that move must stay
    within max_step and must not carry the joint past a limit.
    """
    if problem := _check_width(velocities, limits):
        return problem
    for i, name in enumerate(limits.joint_names):
        v = velocities[i]
        if not math.isfinite(v):
            return f"joint {name} velocity is {v}; expected a finite value"
        if abs(v) > limits.max_velocity:
            return (
                f"joint {name} velocity {v:.4f} rad/s is beyond max_joint_velocity "
                f"{limits.max_velocity:.4f} rad/s"
            )
        move = v * period_s
        if abs(move) > limits.max_step:
            return (
                f"joint {name} velocity {v:.4f} rad/s moves {abs(move):.4f} rad in one step "
                f"of {period_s:.4f} s; max_step is {limits.max_step:.4f}"
            )
        reached = measured[i] + move
        if reached < limits.lower[i] or reached > limits.upper[i]:
            return (
                f"joint {name} velocity {v:.4f} rad/s would reach {reached:.4f} rad, outside its "
                f"limits {_limits_text(limits, i)}"
            )
    return None


def check_gripper(value: float) -> str | None:
    """Gripper commands are a closure fraction: 0 open … 1 closed."""
    if not math.isfinite(value):
        return f"gripper command is {value}; expected a finite value"
    if value < 0.0 or value > 1.0:
        return f"gripper command {value:.4f} is outside [0, 1]"
    return None


def check_grippers(values: Sequence[float]) -> str | None:
    """Every gripper value of a row (those after the arm joints), each named by its index."""
    for i, value in enumerate(values):
        reason = check_gripper(value)
        if reason is not None:
            return reason if len(values) == 1 else f"gripper {i}: {reason}"
    return None


def _check_width(values: Sequence[float], limits: SafetyLimits) -> str | None:
    if len(values) < len(limits.joint_names):
        return (
            f"step has {len(values)} joint values; expected {len(limits.joint_names)} "
            f"({', '.join(limits.joint_names)})"
        )
    return None


def _limits_text(limits: SafetyLimits, i: int) -> str:
    return f"[{limits.lower[i]:.4f}, {limits.upper[i]:.4f}]"
