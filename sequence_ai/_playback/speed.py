"""``playback_speed``: a fixed factor, or ``"auto"`` — the largest factor the latency sustains.

At speed *s* the plan advances *s* rows per control period, so row *i* of a chunk is due
*i / s* periods after its observation and a chunk of *R* rows lasts *R / s* periods. With *N*
requests in flight a fresh chunk is captured every latency/N, so playback stays on time while

    latency_high + latency / N  <=  (R - 1) · period / s

``auto`` picks the largest *s* in [``MIN_SPEED``, 1] that satisfies it at each install.
"""

from __future__ import annotations

import math
from typing import Optional, Union

__all__ = [
    "AUTO",
    "MAX_SPEED_CHANGE",
    "MIN_SPEED",
    "PlaybackSpeed",
    "auto_speed",
    "check_playback_speed",
    "next_speed",
]

AUTO = "auto"
# Slower than half speed the arm crawls; a hold is then the honest answer.
MIN_SPEED = 0.5
# Largest change of the speed from one installed chunk to the next: a step in the commanded
# velocity at the seam is at most this share of a row's motion.
MAX_SPEED_CHANGE = 0.25

PlaybackSpeed = Union[float, str]


def check_playback_speed(name: str, value: object) -> PlaybackSpeed:
    """``"auto"`` or a number in [MIN_SPEED, 1]; anything else is a ValueError naming it."""
    if value == AUTO:
        return AUTO
    ok = (
        isinstance(value, (int, float))
        and not isinstance(value, bool)
        and math.isfinite(value)
        and MIN_SPEED <= value <= 1.0
    )
    if not ok:
        raise ValueError(
            f"{name} is {value!r}; expected a number in [{MIN_SPEED:g}, 1] or {AUTO!r}"
        )
    return float(value)  # type: ignore[arg-type]  # checked numeric above


def auto_speed(
    *,
    chunk_rows: int,
    period_s: float,
    latency_s: Optional[float],
    latency_high_s: Optional[float],
    in_flight: int,
) -> float:
    """The largest speed in [MIN_SPEED, 1] at which chunks keep arriving before the playing one
    runs out; 1 before any latency was measured."""
    if latency_s is None or latency_high_s is None or chunk_rows < 2:
        return 1.0
    need_s = latency_high_s + latency_s / max(1, in_flight)
    if need_s <= 0:
        return 1.0
    sustained = (chunk_rows - 1) * period_s / need_s
    return min(1.0, max(MIN_SPEED, sustained))


def next_speed(setting: PlaybackSpeed, previous: float, target: float) -> float:
    """The speed of the next installed chunk: the fixed setting, or ``target`` approached by at
    most ``MAX_SPEED_CHANGE`` per chunk."""
    if setting != AUTO:
        return float(setting)
    step = max(-MAX_SPEED_CHANGE, min(MAX_SPEED_CHANGE, target - previous))
    return min(1.0, max(MIN_SPEED, previous + step))
