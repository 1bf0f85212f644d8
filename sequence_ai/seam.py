"""The seam between two chunks: measuring its jump, and ramping target rows across it."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Optional

__all__ = ["blend_seam", "seam_jump", "shift_seam"]


def seam_jump(
    row: Sequence[float], last: Sequence[float], skip_dims: Sequence[int] = ()
) -> Optional[float]:
    """Largest per-dimension change across a chunk boundary, ``skip_dims`` (grippers: open or
    closed, never a jump of the arm) left out; None when widths differ or nothing is left."""
    if len(row) != len(last):
        return None
    skip = set(skip_dims)
    changes = [abs(a - b) for d, (a, b) in enumerate(zip(row, last)) if d not in skip]
    return max(changes) if changes else None


def blend_seam(
    rows: list[list[float]], last: Sequence[float], n: int, skip_dims: Sequence[int]
) -> None:
    """Ramp the first ``n`` rows out of ``last`` in place, leaving ``skip_dims`` untouched."""
    skip = set(skip_dims)
    for i in range(min(n, len(rows))):
        row = rows[i]
        if len(row) != len(last):
            return
        w = (i + 1) / (n + 1)
        rows[i] = [
            value if d in skip else (1.0 - w) * last[d] + w * value for d, value in enumerate(row)
        ]


def shift_seam(
    rows: list[list[float]], last: Sequence[float], n: int, skip_dims: Sequence[int]
) -> None:
    """Shift the rows onto ``last`` and let the offset fade over the first ``n`` rows, in
    place: each step is the rows' own plus at most 1/(n+1) of the jump (a hand-over's plan,
    which keeps its own speed; ``skip_dims`` untouched)."""
    if not rows or len(rows[0]) != len(last):
        return
    skip = set(skip_dims)
    offset = [0.0 if d in skip else last[d] - value for d, value in enumerate(rows[0])]
    for i in range(min(n, len(rows))):
        keep = 1.0 - (i + 1) / (n + 1)
        rows[i] = [value + keep * offset[d] for d, value in enumerate(rows[i])]
