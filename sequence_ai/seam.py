"""The seam between two chunks: measuring its jump, and ramping target rows across it."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Optional

__all__ = ["blend_seam", "seam_jump"]


def seam_jump(row: Sequence[float], last: Sequence[float]) -> Optional[float]:
    """Largest per-dimension change across a chunk boundary; None when widths differ."""
    if len(row) != len(last) or not row:
        return None
    return max(abs(a - b) for a, b in zip(row, last))


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
