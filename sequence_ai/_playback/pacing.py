"""``Pacer``: absolute-deadline pacing of the steps handed to ``act``."""

from __future__ import annotations

import time
from typing import Callable, Optional

__all__ = ["Pacer"]


class Pacer:
    """Absolute-deadline pacing: the step after one due at ``t`` is due at ``t + period``.

    Time spent in validate/act or starting a request never stretches the period, because the
    next deadline is computed from the previous deadline, not from "now". Driving thread only.
    """

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        # Due time of the step stamped last, then (after next_due) of the step to come.
        self._due: Optional[float] = None

    @property
    def due(self) -> float:
        """Due time of the step stamped last (the clock's now before any)."""
        return self._clock() if self._due is None else self._due

    def upcoming(self, period: float) -> float:
        """Due time the next step would get if it were stamped now."""
        now = self._clock()
        if self._due is None or now - self._due > period:
            return now
        return self._due

    def stamp(self, period: float) -> None:
        """Call just before a step is handed to act."""
        # Late by more than a period (an underrun, a slow callback): re-anchor on now rather
        # than bursting the missed steps out back to back.
        self._due = self.upcoming(period)

    def next_due(self, period: float) -> float:
        """Deadline of the next step; call after the step was handed to act."""
        if self._due is None:
            self._due = self._clock()
        self._due += period
        return self._due
