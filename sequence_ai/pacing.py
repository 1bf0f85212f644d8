"""``Pacer``: absolute-deadline pacing of the steps handed to ``act``."""

from __future__ import annotations

import time
from typing import Callable, Optional

__all__ = ["Pacer"]


class Pacer:
    """Absolute-deadline pacing: the step after one due at ``t`` is due at ``t + period``.

    Time spent in observe/validate/act or a prefetch never stretches the period, because the
    next deadline is computed from the previous deadline, not from "now". Driving thread only.
    """

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        self._due: Optional[float] = None

    def stamp(self, period: float) -> None:
        """Call just before a step is handed to act."""
        now = self._clock()
        # Late by more than a period (an underrun, a slow callback): re-anchor on now rather
        # than bursting the missed steps out back to back.
        if self._due is None or now - self._due > period:
            self._due = now

    def next_due(self, period: float) -> float:
        """Deadline of the next step; call after the step was handed to act."""
        if self._due is None:
            self._due = self._clock()
        self._due += period
        return self._due
