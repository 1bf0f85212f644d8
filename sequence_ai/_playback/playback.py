"""What one installed chunk will play: a command every control period from its due row, at the
playback speed, to its last row, ending in a rest ramp to rest.

Positions are in the chunk's rows: row *i* is planned for *i* rows of playback after the
chunk's observation. At speed *s* each command advances the position by *s*; at 1 the commands
are the chunk's own rows. The last ``ramp_rows`` of the path are stretched so the advance per
period falls linearly to zero: the commanded velocity ramps down and the arm comes to rest on
the last row instead of stopping dead. A newer chunk usually replaces the commands before the
ramp is reached; when none has arrived, the ramp is what the arm does.

Rows that are targets (absolute spaces, ``controller="joint_position"``) are interpolated
between neighbours (angle dims by the shortest arc); other rows (deltas, velocities) are held
and scaled by the advance, which is their commanded velocity at that speed, down to zero.
Declared gripper dims are never interpolated or scaled.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Optional

from .angles import mix

__all__ = ["RAMP_S", "RAMP_SHARE", "Command", "InstalledRows", "commands_for", "ramp_rows_for"]

Row = list[float]

# How much motion the rest ramp stretches: the last 0.2 s of a chunk's path (3 rows at 15 Hz),
# played over twice that time as the velocity falls to zero; never more than a quarter of the
# chunk, so most of a chunk plays on time.
RAMP_S = 0.2
RAMP_SHARE = 0.25
_EPS = 1e-9


@dataclass(frozen=True)
class Command:
    """One command of a chunk: the row handed to ``act`` and where in the chunk it is."""

    row: Row
    # Chunk row position (fractional inside the ramp or at speeds below 1).
    position: float
    # Rows the plan advances until the next command: the speed, less inside the ramp, 0 at rest.
    advance: float
    # Planned more than the open-loop horizon after the chunk's due row.
    beyond_horizon: bool


@dataclass(frozen=True)
class InstalledRows:
    """What ``on_rows`` receives: the rows the loop will play from now on, if no newer chunk
    arrives, and when.

    ``rows[k]`` is handed to ``act`` at ``first_due + k * period_s`` (monotonic clock):
    converted, trimmed to the due row, seam-smoothed, resampled at ``speed``, including the
    rows beyond the open-loop horizon and the rest ramp. ``sequence`` counts the calls of
    one run from 1; ``chunk`` is the number of the installed chunk (1 = the run's first), the
    same for a later call that re-times the same chunk's remaining rows.
    """

    rows: list[Row]
    first_due: float
    period_s: float
    speed: float
    sequence: int
    chunk: int
    # Chunk row position of rows[0] (its due row); indices in ``rows`` of the first row beyond
    # the open-loop horizon and of the first row of the rest ramp (len(rows) if none).
    start: float
    horizon_index: int
    ramp_index: int


def ramp_rows_for(period_s: float, chunk_rows: int) -> int:
    """Rows of path the rest ramp stretches for this period and chunk length (at least 1)."""
    return max(1, min(round(RAMP_S / period_s), int(chunk_rows * RAMP_SHARE)))


def _positions(
    start: float, last: float, speed: float, ramp_rows: int, limit: Optional[int]
) -> list[float]:
    """Command positions from ``start`` to rest at ``last``; with ``limit``, to rest within
    ``limit`` commands instead when the path is longer."""
    cruise = [start]
    while cruise[-1] + speed <= last - ramp_rows + _EPS:
        cruise.append(cruise[-1] + speed)
    distance = last - cruise[-1]
    steps = max(1, round(2.0 * distance / speed)) if distance > _EPS else 0
    if limit is not None and len(cruise) + steps > limit:
        if limit <= 0:
            return []
        # Come to rest by the limit: cruise, then a ramp as long as a full one would be.
        steps = min(limit - 1, max(1, round(2.0 * ramp_rows / speed)))
        cruise = [start + k * speed for k in range(limit - steps)]
        distance = min(last - cruise[-1], speed * steps / 2.0)
    base = cruise[-1]
    ramp = [base + distance * (1.0 - (1.0 - j / steps) ** 2) for j in range(1, steps + 1)]
    return cruise + ramp


def _row_at(
    rows: Sequence[Row], position: float, advance: float, absolute: bool, skip: set[int],
    angles: set[int],
) -> Row:
    low = min(len(rows) - 1, int(math.floor(position + _EPS)))
    row = rows[low]
    if absolute:
        high = min(len(rows) - 1, low + 1)
        w = min(1.0, max(0.0, position - low))
        if w <= _EPS or high == low:
            return list(row)
        other = rows[high]
        return [
            value if d in skip else mix(value, other[d], w, d in angles)
            for d, value in enumerate(row)
        ]
    if abs(advance - 1.0) <= _EPS:
        return list(row)
    return [value if d in skip else value * advance for d, value in enumerate(row)]


def commands_for(
    rows: Sequence[Row],
    start: float,
    *,
    speed: float,
    horizon: int,
    absolute: bool,
    gripper_dims: Sequence[int],
    ramp_rows: int,
    rest_within: Optional[int] = None,
    at_most: Optional[int] = None,
    angle_dims: Sequence[int] = (),
) -> list[Command]:
    """The commands of ``rows`` from chunk position ``start`` (the due row) at ``speed``.

    ``rest_within``: come to rest within that many commands (the run's deadline).
    ``at_most``: stop listing after that many (what ``max_actions`` still allows; no ramp).
    ``angle_dims``: target angles, interpolated by the shortest arc.
    """
    if not rows:
        return []
    last = float(len(rows) - 1)
    start = min(max(0.0, start), last)
    positions = _positions(start, last, speed, ramp_rows, rest_within)
    advances = [b - a for a, b in zip(positions, positions[1:])] + [0.0]
    if at_most is not None:
        positions = positions[: max(0, at_most)]
    skip, angles = set(gripper_dims), set(angle_dims)
    horizon_end = start + horizon
    return [
        Command(
            row=_row_at(rows, position, advance, absolute, skip, angles),
            position=position,
            advance=advance,
            beyond_horizon=position >= horizon_end - _EPS,
        )
        for position, advance in zip(positions, advances)
    ]
