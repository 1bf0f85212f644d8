"""The seam between two chunks: measuring its jump, and ramping target rows across it, within
the limits the robot side gives (``SeamLimits``).

Angle dims (``actions.angle_columns``) are compared and ramped by the shortest arc."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Optional

from .angles import difference

__all__ = ["SeamLimits", "fade_length", "seam_jump", "shift_seam"]

_TOLERANCE = 1e-12


@dataclass(frozen=True)
class SeamLimits:
    """What a seam's fade keeps target rows within, per row dimension from the first
    (grippers and dimensions past the end are not limited): ``step``, the largest change per
    command; ``lower`` and ``upper``, the values a fade may not push a row past (a row the
    model put past one is left as it is, for the robot's own check)."""

    step: Sequence[float]
    lower: Sequence[float] = ()
    upper: Sequence[float] = ()

    def __post_init__(self) -> None:
        step = _numbers("step", self.step, positive=True)
        if not step:
            raise ValueError("SeamLimits.step is empty; expected one limit per dimension")
        lower = _numbers("lower", self.lower, positive=False)
        upper = _numbers("upper", self.upper, positive=False)
        if len(lower) != len(upper) or any(lo >= hi for lo, hi in zip(lower, upper)):
            raise ValueError(
                f"SeamLimits.lower is {lower} and upper {upper}; expected as many of each, "
                "every lower below its upper"
            )
        object.__setattr__(self, "step", step)
        object.__setattr__(self, "lower", lower)
        object.__setattr__(self, "upper", upper)


def _numbers(name: str, values: object, *, positive: bool) -> tuple[float, ...]:
    if isinstance(values, (str, bytes)) or not isinstance(values, Sequence):
        raise TypeError(f"SeamLimits.{name} is {values!r}; expected a list of numbers")
    checked = []
    for i, item in enumerate(values):
        if isinstance(item, bool) or not isinstance(item, (int, float)) or not (
            math.isfinite(item) and (item > 0 or not positive)
        ):
            expected = "a finite number > 0" if positive else "a finite number"
            raise ValueError(f"SeamLimits.{name}[{i}] is {item!r}; expected {expected}")
        checked.append(float(item))
    return tuple(checked)


def seam_jump(
    row: Sequence[float], last: Sequence[float], skip_dims: Sequence[int] = (),
    angle_dims: Sequence[int] = (),
) -> Optional[float]:
    """Largest per-dimension change across a chunk boundary, ``skip_dims`` (grippers: open or
    closed, never a jump of the arm) left out; None when widths differ or nothing is left."""
    if len(row) != len(last):
        return None
    skip, angles = set(skip_dims), set(angle_dims)
    changes = [
        abs(difference(a, b, d in angles)) for d, (a, b) in enumerate(zip(row, last))
        if d not in skip
    ]
    return max(changes) if changes else None


def shift_seam(
    rows: list[list[float]], anchor: Sequence[float], n: int, skip_dims: Sequence[int],
    angle_dims: Sequence[int] = (), limits: Optional[SeamLimits] = None,
) -> None:
    """Shift the rows onto ``anchor`` and let the offset fade over the first ``n`` rows, in
    place (weights of the rows' own offset 1/(n+1) .. n/(n+1)): each step is the rows' own
    plus at most 1/(n+1) of the jump, so the plan keeps its own speed (``skip_dims``
    untouched; ``angle_dims`` shifted by the shortest arc, left unwrapped). A shifted value
    stops at ``limits.lower`` / ``upper``, which only ever shortens a step."""
    if not rows or len(rows[0]) != len(anchor):
        return
    skip, angles = set(skip_dims), set(angle_dims)
    offset = [
        0.0 if d in skip else difference(anchor[d], value, d in angles)
        for d, value in enumerate(rows[0])
    ]
    lower = () if limits is None else limits.lower
    upper = () if limits is None else limits.upper
    for i in range(min(n, len(rows))):
        if len(rows[i]) != len(anchor):
            return
        keep = 1.0 - (i + 1) / (n + 1)
        shifted = [value + keep * offset[d] for d, value in enumerate(rows[i])]
        for d in range(min(len(lower), len(shifted))):
            if d not in skip and d not in angles:
                own = rows[i][d]
                shifted[d] = min(max(shifted[d], min(lower[d], own)), max(upper[d], own))
        rows[i] = shifted


def fade_length(
    rows: Sequence[Sequence[float]], anchor: Sequence[float], previous: Sequence[float], n: int,
    step_limit: Sequence[float], skip_dims: Sequence[int] = (), angle_dims: Sequence[int] = (),
) -> Optional[int]:
    """The fewest commands, ``n`` or more, that ``shift_seam`` can fade the offset over with
    no step from ``previous`` (the last command sent) through the faded rows beyond
    ``step_limit`` (``SeamLimits.step``); None when none can (the rows' own steps, or the one
    from ``previous`` to ``anchor``, exceed the limit)."""
    if not rows or n <= 0 or len(rows[0]) != len(anchor) or len(previous) != len(anchor):
        return None
    skip, angles = set(skip_dims), set(angle_dims)
    dims = [d for d in range(min(len(anchor), len(step_limit))) if d not in skip]
    offset = {d: difference(anchor[d], rows[0][d], d in angles) for d in dims}
    # Fading over k commands moves every step up to the (k+1)-th by -offset/(k+1): each step
    # bounds that share to [own - limit, own + limit]; those bounds narrow as k grows.
    low = {d: -float("inf") for d in dims}
    high = {d: float("inf") for d in dims}
    most = n + 10 * len(rows)
    for k in range(most + 1):
        if k < len(rows):
            if len(rows[k]) != len(anchor):
                return None
            for d in dims:
                own = (
                    difference(anchor[d], previous[d], d in angles) if k == 0
                    else difference(rows[k][d], rows[k - 1][d], d in angles)
                )
                low[d] = max(low[d], own - step_limit[d])
                high[d] = min(high[d], own + step_limit[d])
        if k >= n and all(
            low[d] - _TOLERANCE <= offset[d] / (k + 1) <= high[d] + _TOLERANCE for d in dims
        ):
            return k
    return None
