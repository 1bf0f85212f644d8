"""``CallHandle``: the interrupt of one call, and the one place a call's thread waits."""

from __future__ import annotations

import threading
import time
from enum import Enum
from typing import Callable, Optional

from ..outcome import Ending

__all__ = ["CallEnded", "CallHandle", "Wake"]


class Wake(Enum):
    """Why a wait on a call returned."""

    READY = "ready"
    INTERRUPTED = "interrupted"
    DEADLINE = "deadline"


class CallEnded(Exception):
    """Private to the client: unwinds a call for a non-error ending; always caught inside."""

    def __init__(self, ending: Ending) -> None:
        super().__init__(ending.value)
        self.ending = ending

    @classmethod
    def after(cls, wake: Wake) -> CallEnded:
        """The ending a wait that did not become ready leads to."""
        return cls(Ending.INTERRUPTED if wake is Wake.INTERRUPTED else Ending.TIMEOUT)


def _never() -> bool:
    return False


class CallHandle:
    """Stops exactly the calls it is passed to (``call=handle``), from any thread.

    ``interrupt()`` ends the call within one control period; an interrupt that arrives before
    the call starts ends it at once when it does. Once interrupted a handle stays interrupted,
    so use a fresh one for each call (or each goal). ``Policy.interrupt()`` interrupts the
    handles of every open call.
    """

    def __init__(self) -> None:
        # _interrupted is written and read under _cond; _cond is notified when the handle is
        # interrupted and when a request started for its call finishes.
        # Lock order 10: only a request's done flag is read under it.
        self._cond = threading.Condition(threading.Lock())
        self._interrupted = False

    def __repr__(self) -> str:
        return f"CallHandle({'interrupted' if self.interrupted else 'open'})"

    @property
    def interrupted(self) -> bool:
        with self._cond:
            return self._interrupted

    def interrupt(self) -> None:
        """Stop the call(s) using this handle; any thread, any time, idempotent."""
        with self._cond:
            self._interrupted = True
            self._cond.notify_all()

    def notify(self) -> None:
        """Wake the call's waiting thread to re-check its condition (a request finished)."""
        with self._cond:
            self._cond.notify_all()

    def wait_for(self, ready: Callable[[], bool], deadline: Optional[float]) -> Wake:
        """Block until ``ready()``, an interrupt or the monotonic ``deadline``.

        ``ready`` is evaluated under the handle's lock, and whatever makes it true calls
        ``notify()`` afterwards, so no wake-up is lost between the check and the wait.
        """
        with self._cond:
            while True:
                if self._interrupted:
                    return Wake.INTERRUPTED
                if ready():
                    return Wake.READY
                if deadline is None:
                    self._cond.wait()
                    continue
                left = deadline - time.monotonic()
                if left <= 0:
                    return Wake.DEADLINE
                self._cond.wait(left)

    def sleep_until(self, deadline: float) -> Wake:
        """Interruptible sleep: ``DEADLINE`` when it passed, ``INTERRUPTED`` otherwise."""
        return self.wait_for(_never, deadline)
