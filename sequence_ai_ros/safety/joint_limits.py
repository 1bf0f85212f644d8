"""Per-joint limits in ros2_control's `joint_limits` layout: parse, validate, check.

A robot's limits are kept as `joint_limits.<joint>.{has_position_limits, min_position,
max_position, has_velocity_limits, max_velocity, has_acceleration_limits, max_acceleration}`,
either as node parameters (the params file) or in a `joint_limits_file` that ros2_control and
MoveIt read too. The arm gate checks every command's implied velocity and acceleration against
them (docs/safety.md, "Joint limits"); `max_step` stays a coarse bound beside them.
"""

from __future__ import annotations

import math
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import yaml

PREFIX = "joint_limits"
# The fields read, with their types; others of the layout (jerk, effort) are accepted and unused.
FLAGS = ("has_position_limits", "has_velocity_limits", "has_acceleration_limits")
VALUES = ("min_position", "max_position", "max_velocity", "max_acceleration")
FIELDS = FLAGS + VALUES
# Which value each flag switches on.
_GUARDED = {
    "has_position_limits": ("min_position", "max_position"),
    "has_velocity_limits": ("max_velocity",),
    "has_acceleration_limits": ("max_acceleration",),
}


class JointLimitsError(ValueError):
    """A joint_limits entry or file is malformed; the message names the field and value."""


@dataclass(frozen=True)
class JointLimit:
    """One joint's limits; a limit that is off is None."""

    joint: str
    min_position: float | None = None
    max_position: float | None = None
    max_velocity: float | None = None
    max_acceleration: float | None = None

    def problems(self) -> list[str]:
        """Why these limits are not sane (min < max, positive finite speeds), or []."""
        found = []
        lo, hi = self.min_position, self.max_position
        if lo is not None and hi is not None and not lo < hi:
            found.append(
                f"joint_limits.{self.joint}: min_position {lo} is not below max_position {hi}"
            )
        for name in ("max_velocity", "max_acceleration"):
            value = getattr(self, name)
            if value is not None and not (math.isfinite(value) and value > 0):
                found.append(
                    f"joint_limits.{self.joint}.{name} is {value}; expected a finite value > 0 "
                    f"(or has_{name[4:]}_limits false)"
                )
        return found


def parameter_name(joint: str, field: str) -> str:
    return f"{PREFIX}.{joint}.{field}"


def parameter_default(field: str) -> bool | float:
    return False if field in FLAGS else 0.0


def check_field(name: str, value: object) -> str | None:
    """Why `value` is refused for the parameter or file entry `name` (…`.<field>`), or None."""
    field = name.rsplit(".", 1)[-1]
    if field in FLAGS:
        if not isinstance(value, bool):
            return f"{name}={value!r} is refused; expected a bool (true or false)"
        return None
    if field in VALUES:
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            return f"{name}={value!r} is refused; expected a number"
        if not math.isfinite(value):
            return f"{name}={value!r} is refused; expected a finite number"
    return None


def from_entry(joint: str, entry: Mapping[str, object]) -> JointLimit:
    """One joint's limits from its layout entry (raises JointLimitsError)."""
    for field, value in entry.items():
        reason = check_field(parameter_name(joint, str(field)), value)
        if reason:
            raise JointLimitsError(reason)
    values: dict[str, float | None] = dict.fromkeys(VALUES)
    for flag, guarded in _GUARDED.items():
        if not entry.get(flag, False):
            continue
        for name in guarded:
            if name not in entry:
                raise JointLimitsError(
                    f"{parameter_name(joint, flag)} is true but "
                    f"{parameter_name(joint, name)} is missing"
                )
            values[name] = _number(entry[name])
    return JointLimit(joint, **values)


def _number(value: object) -> float:
    # check_field let only ints and floats through.
    return float(value) if isinstance(value, (int, float)) else math.nan


def load_file(path: str) -> dict[str, dict[str, object]]:
    """The `joint_limits` mapping of a YAML file: at its top (MoveIt's joint_limits.yaml) or
    under any node's `ros__parameters` (a ros2_control params file)."""
    try:
        with open(os.path.expanduser(path), encoding="utf-8") as handle:
            document = yaml.safe_load(handle)
    except OSError as exc:
        raise JointLimitsError(
            f"joint_limits_file {path!r} cannot be read: {exc.strerror}"
        ) from exc
    except yaml.YAMLError as exc:
        raise JointLimitsError(f"joint_limits_file {path!r} is not valid YAML: {exc}") from exc
    found = _find_table(document)
    if found is None:
        raise JointLimitsError(
            f"joint_limits_file {path!r} has no joint_limits mapping; expected "
            "joint_limits: {<joint>: {has_velocity_limits: true, max_velocity: …}}"
        )
    return found


def _find_table(document: object) -> dict[str, dict[str, object]] | None:
    if not isinstance(document, dict):
        return None
    table = document.get(PREFIX)
    if isinstance(table, dict) and all(isinstance(v, dict) for v in table.values()):
        return {str(k): v for k, v in table.items()}
    for value in document.values():
        if isinstance(value, dict):
            nested = _find_table(value.get("ros__parameters", value))
            if nested is not None:
                return nested
    return None


def resolve(
    joint_names: Sequence[str],
    parameters: Mapping[str, Mapping[str, object]],
    file_table: Mapping[str, Mapping[str, object]],
) -> tuple[JointLimit, ...]:
    """Each joint's limits: the file's entry, with every group whose flag the node's parameters
    set true taken from the parameters instead."""
    limits = []
    for joint in joint_names:
        entry = dict(file_table.get(joint, {}))
        given = parameters.get(joint, {})
        for flag, guarded in _GUARDED.items():
            if given.get(flag) is True:
                entry[flag] = True
                entry.update({name: given[name] for name in guarded if name in given})
        limits.append(from_entry(joint, entry))
    return tuple(limits)


@dataclass(frozen=True)
class RateLimits:
    """The speeds the gate holds every command to, per joint in `joint_names` order (inf: no
    limit)."""

    joint_names: tuple[str, ...]
    max_velocity: tuple[float, ...]
    max_acceleration: tuple[float, ...]

    @classmethod
    def of(cls, limits: Sequence[JointLimit]) -> RateLimits:
        return cls(
            tuple(limit.joint for limit in limits),
            tuple(_or_inf(limit.max_velocity) for limit in limits),
            tuple(_or_inf(limit.max_acceleration) for limit in limits),
        )

    @classmethod
    def none(cls, joint_names: Sequence[str]) -> RateLimits:
        n = len(joint_names)
        return cls(tuple(joint_names), (math.inf,) * n, (math.inf,) * n)

    @property
    def active(self) -> bool:
        return any(math.isfinite(v) for v in self.max_velocity + self.max_acceleration)


def _or_inf(value: float | None) -> float:
    return math.inf if value is None else value


def check_velocity(velocity: Sequence[float], limits: RateLimits, what: str) -> str | None:
    """Why a joint velocity (rad/s) exceeds a joint's max_velocity, or None."""
    for name, v, vmax in zip(limits.joint_names, velocity, limits.max_velocity):
        if abs(v) > vmax:
            return (
                f"joint {name} {what} {abs(v):.4f} rad/s, beyond its max_velocity {vmax:.4f}"
            )
    return None


def check_acceleration(
    velocity: Sequence[float], before: Sequence[float], dt_s: float, limits: RateLimits
) -> str | None:
    """Why the change from velocity `before` to `velocity` within `dt_s` exceeds a joint's
    max_acceleration, or None."""
    for name, v, b, amax in zip(limits.joint_names, velocity, before, limits.max_acceleration):
        accel = abs(v - b) / dt_s
        if accel > amax:
            return (
                f"joint {name} accelerates at {accel:.4f} rad/s² (velocity {b:.4f} → {v:.4f} "
                f"rad/s in {dt_s:.4f} s); its max_acceleration is {amax:.4f}"
            )
    return None


def implied_velocity(
    target: Sequence[float], previous: Sequence[float], dt_s: float
) -> list[float]:
    """The velocity that moves each joint from `previous` to `target` in `dt_s`."""
    return [(float(t) - float(p)) / dt_s for t, p in zip(target, previous)]


def check_move(
    target: Sequence[float],
    previous: Sequence[float],
    before: Sequence[float] | None,
    dt_s: float,
    limits: RateLimits,
) -> tuple[str | None, list[float]]:
    """(why not, the implied velocity) of a position move from `previous` to `target` in
    `dt_s`; `before` is the velocity commanded until then (None: unknown, not checked)."""
    velocity = implied_velocity(target, previous, dt_s)
    reason = check_velocity(velocity, limits, "moves at")
    if reason is None and before is not None:
        reason = check_acceleration(velocity, before, dt_s, limits)
    return reason, velocity
