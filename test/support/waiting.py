"""The one wait of the test suites: a condition polled against a deadline, never a bare sleep."""

from __future__ import annotations

import threading
import time
from typing import Callable, Optional, TypeVar, Union

T = TypeVar("T")

DEADLINE_S = 30.0
# Between two looks at the condition when nothing wakes the wait earlier.
POLL_S = 0.01


def wait_for(
    condition: Callable[[], T],
    what: str = "the condition",
    *,
    timeout_s: float = DEADLINE_S,
    wake: Optional[Union[threading.Event, threading.Condition]] = None,
) -> T:
    """Return the first truthy value of ``condition()``; fail naming ``what`` after ``timeout_s``.

    ``wake``, set or notified when the condition may have changed, ends each pause early; the
    poll still runs, so a notification missed between two looks costs one poll period.
    """
    deadline = time.monotonic() + timeout_s
    while True:
        value = condition()
        if value:
            return value
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            raise AssertionError(f"timed out after {timeout_s:g} s waiting for {what}")
        pause = min(remaining, POLL_S)
        if isinstance(wake, threading.Condition):
            with wake:
                wake.wait(pause)
        elif wake is not None and not wake.is_set():
            wake.wait(pause)
        else:
            time.sleep(pause)
