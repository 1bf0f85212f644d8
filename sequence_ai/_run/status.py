"""``RunStatus`` and how it is reported: ``on_status`` and the one-line stderr progress."""

from __future__ import annotations

import sys
from enum import Enum
from typing import Callable, Optional, Union

from ..events import RowPlayed, RunEnded, RunEvent, RunStarted, UnderrunBegan

__all__ = ["PROGRESS_MODES", "Progress", "RunStatus", "StatusReporter"]

# progress= of run(): "auto" shows the line only when stderr is a terminal.
Progress = Union[bool, str]
PROGRESS_MODES: tuple[Progress, ...] = ("auto", True, False)


class RunStatus(str, Enum):
    """What a run is doing, as ``on_status`` receives it. String-valued, so comparisons with
    ``"running"`` keep working."""

    STARTING = "starting"
    RUNNING = "running"
    WAITING = "waiting"
    DONE = "done"

    def __str__(self) -> str:
        return self.value


LABELS = {
    RunStatus.STARTING: "starting...",
    RunStatus.RUNNING: "running",
    RunStatus.WAITING: "waiting...",
    RunStatus.DONE: "done",
}


class StatusReporter:
    """Reports each change of status once: an observer of the run's events, all of which it
    reads are published on the driving thread."""

    def __init__(
        self, on_status: Optional[Callable[[RunStatus], object]], progress: Progress
    ) -> None:
        self._on_status = on_status
        if progress == "auto":
            try:
                progress = bool(sys.stderr.isatty())
            except (AttributeError, ValueError):
                progress = False
        self._progress = bool(progress)
        self.state: Optional[RunStatus] = None

    def report(self, state: RunStatus) -> None:
        if state is self.state:
            return
        self.state = state
        if self._progress:
            end = "\n" if state is RunStatus.DONE else ""
            sys.stderr.write(f"\r  sequence_ai {LABELS[state]:<12}{end}")
            sys.stderr.flush()
        if self._on_status is not None:
            self._on_status(state)

    def on_event(self, event: RunEvent) -> None:
        """The status the run's events imply: starting, running, waiting (an underrun), done."""
        state = _STATES.get(type(event))
        if state is not None:
            self.report(state)


_STATES: dict[type[RunEvent], RunStatus] = {
    RunStarted: RunStatus.STARTING,
    RowPlayed: RunStatus.RUNNING,
    UnderrunBegan: RunStatus.WAITING,
    RunEnded: RunStatus.DONE,
}
