"""The seam between two chunks: measuring its jump, and ramping target rows across it.

Angle dims (``actions.angle_columns``) are compared and ramped by the shortest arc."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Optional

from .angles import difference

__all__ = ["seam_jump", "shift_seam"]


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
    angle_dims: Sequence[int] = (),
) -> None:
    """Shift the rows onto ``anchor`` and let the offset fade over the first ``n`` rows, in
    place (weights of the rows' own offset 1/(n+1) .. n/(n+1)): each step is the rows' own
    plus at most 1/(n+1) of the jump, so the plan keeps its own speed (``skip_dims``
    untouched; ``angle_dims`` shifted by the shortest arc, left unwrapped)."""
    if not rows or len(rows[0]) != len(anchor):
        return
    skip, angles = set(skip_dims), set(angle_dims)
    offset = [
        0.0 if d in skip else difference(anchor[d], value, d in angles)
        for d, value in enumerate(rows[0])
    ]
    for i in range(min(n, len(rows))):
        if len(rows[i]) != len(anchor):
            return
        keep = 1.0 - (i + 1) / (n + 1)
        rows[i] = [value + keep * offset[d] for d, value in enumerate(rows[i])]
