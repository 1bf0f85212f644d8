"""Angle columns by the shortest arc: a roll of 3.13 and one of -3.13 are 0.023 rad apart, not
6.26. Rows that blend, shift, interpolate or measure across them use these; a result is never
wrapped back into (-pi, pi] (it continues the value it starts from), since the robot side reads
the angles as a rotation."""

from __future__ import annotations

import math

__all__ = ["difference", "mix"]

_TAU = 2.0 * math.pi


def difference(a: float, b: float, angle: bool) -> float:
    """``a - b``; for an angle, the shortest arc from ``b`` to ``a``, in (-pi, pi]."""
    d = a - b
    if not angle:
        return d
    d = math.remainder(d, _TAU)
    return math.pi if d == -math.pi else d


def mix(a: float, b: float, w: float, angle: bool) -> float:
    """``a`` moved a share ``w`` of the way to ``b`` (an angle: along the shorter arc)."""
    if not angle:
        return (1.0 - w) * a + w * b
    return a + w * difference(b, a, True)
