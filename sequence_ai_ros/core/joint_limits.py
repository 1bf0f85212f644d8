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
import stat
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
    lo, hi = entry.get("min_position"), entry.get("max_position")
    # Refused whatever has_position_limits says: such a file is wrong, and MoveIt reads it too.
    if lo is not None and hi is not None and _number(lo) > _number(hi):
        raise JointLimitsError(
            f"{parameter_name(joint, 'min_position')}={lo!r} is above "
            f"{parameter_name(joint, 'max_position')}={hi!r}; expected min_position < "
            "max_position"
        )
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


# A joint_limits file is a few kB (MoveIt's joint_limits.yaml, a ros2_control params file);
# anything larger is refused unread, so no edit can make a read or a parse long.
MAX_FILE_BYTES = 256 * 1024
# Deeper than any limits layout (params file > node > ros__parameters > joint_limits > joint >
# field): a deeply nested document is refused before YAML's recursive composer meets it.
MAX_DEPTH = 16


@dataclass(frozen=True)
class FileIdentity:
    """What tells a changed file from the one read: device, inode, size, modification time."""

    device: int
    inode: int
    size: int
    mtime_ns: int

    @classmethod
    def of(cls, info: os.stat_result) -> FileIdentity:
        return cls(info.st_dev, info.st_ino, info.st_size, info.st_mtime_ns)


def file_identity(path: str) -> FileIdentity:
    """The file's identity (a stat, which never blocks on a FIFO or a device); raises
    JointLimitsError when it cannot be read or is no regular file of at most MAX_FILE_BYTES."""
    try:
        info = os.stat(os.path.expanduser(path))
    except OSError as exc:
        raise JointLimitsError(
            f"joint_limits_file {path!r} cannot be read: {exc.strerror}"
        ) from exc
    _check_kind(path, info)
    return FileIdentity.of(info)


def _check_kind(path: str, info: os.stat_result) -> None:
    if not stat.S_ISREG(info.st_mode):
        kind = next(
            (name for test, name in _KINDS if test(info.st_mode)), "not a regular file"
        )
        raise JointLimitsError(
            f"joint_limits_file {path!r} is {kind}; expected a regular YAML file"
        )
    if info.st_size > MAX_FILE_BYTES:
        raise JointLimitsError(
            f"joint_limits_file {path!r} has {info.st_size} bytes; expected at most "
            f"{MAX_FILE_BYTES} (a joint_limits.yaml is a few kB)"
        )


_KINDS = (
    (stat.S_ISFIFO, "a FIFO"),
    (stat.S_ISDIR, "a directory"),
    (stat.S_ISCHR, "a character device"),
    (stat.S_ISBLK, "a block device"),
    (stat.S_ISSOCK, "a socket"),
)


def read_file(path: str) -> tuple[dict[str, dict[str, object]], FileIdentity]:
    """The `joint_limits` mapping of a YAML file — at its top (MoveIt's joint_limits.yaml) or
    under any node's `ros__parameters` (a ros2_control params file) — and the identity of what
    was read. Bounded: a regular file (checked before and after opening, which never waits), at
    most MAX_FILE_BYTES, no anchors or aliases, at most MAX_DEPTH levels; anything else raises
    JointLimitsError, never another exception."""
    file_identity(path)
    try:
        # Non-blocking: a FIFO swapped in after the stat is opened without a writer, and
        # refused by the fstat below.
        fd = os.open(os.path.expanduser(path), os.O_RDONLY | os.O_NONBLOCK)
        with os.fdopen(fd, "rb") as handle:
            info = os.fstat(handle.fileno())
            _check_kind(path, info)
            data = handle.read(MAX_FILE_BYTES + 1)
    except OSError as exc:
        raise JointLimitsError(
            f"joint_limits_file {path!r} cannot be read: {exc.strerror}"
        ) from exc
    if len(data) > MAX_FILE_BYTES:
        raise JointLimitsError(
            f"joint_limits_file {path!r} grew past {MAX_FILE_BYTES} bytes while read; expected "
            "a few kB"
        )
    found = _find_table(_parse(path, data))
    if found is None:
        raise JointLimitsError(
            f"joint_limits_file {path!r} has no joint_limits mapping; expected "
            "joint_limits: {<joint>: {has_velocity_limits: true, max_velocity: …}}"
        )
    # Every joint's entry checked, whichever joints the node drives: such a file is wrong.
    for joint, entry in found.items():
        try:
            problems = from_entry(joint, entry).problems()
        except JointLimitsError as exc:
            problems = [str(exc)]
        if problems:
            raise JointLimitsError(f"joint_limits_file {path!r}: {'; '.join(problems)}")
    return found, FileIdentity.of(info)


def load_file(path: str) -> dict[str, dict[str, object]]:
    """`read_file`'s mapping alone."""
    return read_file(path)[0]


class _BoundedLoader(yaml.SafeLoader):
    """PyYAML's safe loader, refusing anchors and aliases (a self-referencing or
    exponentially expanding document) and nesting deeper than MAX_DEPTH."""

    def __init__(self, stream: str) -> None:
        super().__init__(stream)
        self._depth = 0

    def compose_node(self, parent: yaml.Node | None, index: int) -> yaml.Node | None:
        # PyYAML's stubs leave the parser's peek_event untyped.
        event: yaml.Event = self.peek_event()  # type: ignore[no-untyped-call]
        line = event.start_mark.line + 1 if event.start_mark is not None else 0
        if isinstance(event, yaml.AliasEvent) or getattr(event, "anchor", None) is not None:
            raise _Refused(f"uses a YAML anchor or alias (line {line}); expected plain values")
        if self._depth >= MAX_DEPTH:
            raise _Refused(f"nests deeper than {MAX_DEPTH} levels (line {line})")
        self._depth += 1
        try:
            return super().compose_node(parent, index)
        finally:
            self._depth -= 1


class _Refused(Exception):
    """The bounded loader's refusal (the reason)."""


def _parse(path: str, data: bytes) -> object:
    try:
        loader = _BoundedLoader(data.decode("utf-8"))
        try:
            return loader.get_single_data()
        finally:
            loader.dispose()
    except _Refused as exc:
        raise JointLimitsError(f"joint_limits_file {path!r} {exc}") from None
    except UnicodeDecodeError as exc:
        raise JointLimitsError(
            f"joint_limits_file {path!r} is not UTF-8 text (byte {exc.start})"
        ) from None
    except yaml.YAMLError as exc:
        raise JointLimitsError(f"joint_limits_file {path!r} is not valid YAML: {exc}") from None
    except (ValueError, RecursionError, MemoryError) as exc:
        # A value YAML's constructors refuse (an integer of 5000 digits), or a bound missed.
        raise JointLimitsError(
            f"joint_limits_file {path!r} cannot be parsed: {type(exc).__name__}: {exc}"
        ) from None


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
