"""``Fetch``: one request on its own thread — the observation, then ``POST /v1/act`` — while
the calling thread waits on its handle."""

from __future__ import annotations

import threading
import time
from typing import Callable, Optional

from ..types import Prediction
from .calls import CallHandle

__all__ = ["THREAD_NAME", "Fetch"]

THREAD_NAME = "sequence_ai-fetch"


class Fetch:
    """One request on a daemon thread. ``start()`` once; read the result after ``is_done()``.

    The fetch thread writes ``_result``/``_error``/``finished`` and then sets ``_done``; every
    other thread reads them only after ``_done`` is set. ``warm`` belongs to the calling thread.
    """

    def __init__(
        self,
        request: Callable[[], Prediction],
        call: CallHandle,
        on_exit: Callable[[threading.Thread], None],
        *,
        warm: bool,
    ) -> None:
        self._request = request
        self._call = call
        self._on_exit = on_exit
        # Only a request sent while the model is known to be loaded may feed the latency EMA.
        self.warm = warm
        self.started = 0.0
        self.finished = 0.0
        self._result: Optional[Prediction] = None
        self._error: Optional[BaseException] = None
        self._done = threading.Event()
        self.thread = threading.Thread(target=self._work, name=THREAD_NAME, daemon=True)

    def start(self) -> Fetch:
        self.started = time.monotonic()
        self.thread.start()
        return self

    def _work(self) -> None:
        try:
            self._result = self._request()
        except BaseException as exc:  # handed to the calling thread, re-raised there
            self._error = exc
        finally:
            self.finished = time.monotonic()
            self._done.set()
            self._call.notify()
            self._on_exit(self.thread)

    def is_done(self) -> bool:
        return self._done.is_set()

    @property
    def latency_s(self) -> float:
        return self.finished - self.started

    def prediction(self) -> Prediction:
        """The answer, or the fetch thread's exception re-raised on the calling thread."""
        if self._error is not None:
            raise self._error
        assert self._result is not None
        return self._result
