"""The ``/v1/act`` requests in progress at once, per key and in total. Each admitted request
holds its body until it is answered; past either bound a request is refused (429 with
Retry-After) before any of its frames is looked at, so a burst cannot grow the gateway's memory
without bound."""

from __future__ import annotations

import contextlib
import threading
from typing import Dict, Iterator

# A key's requests in progress: the replay tool's --in-flight bound (a robot's client keeps at
# most 8 in flight), so no client of ours meets it.
MAX_PER_KEY = 16
# All keys together: each request holds at most a 2 MB body and its compressed frames.
MAX_TOTAL = 32
# A request in progress is answered within about a second at the measured latency.
RETRY_AFTER_S = 1


class AdmissionRefused(Exception):
    """Past a bound; ``detail`` names it."""

    def __init__(self, detail: str) -> None:
        super().__init__(detail)
        self.detail = detail
        self.retry_after_s = RETRY_AFTER_S


class Admission:
    """Counts requests in progress per key; safe from any thread."""

    def __init__(self, per_key: int = MAX_PER_KEY, total: int = MAX_TOTAL) -> None:
        for name, value in (("per_key", per_key), ("total", total)):
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(f"{name}={value!r}: expected an integer >= 1")
        self.per_key = per_key
        self.total = total
        self._lock = threading.Lock()
        self._by_key: Dict[str, int] = {}
        self._in_progress = 0

    @contextlib.contextmanager
    def admit(self, key: str) -> Iterator[None]:
        """Count one request of ``key`` while the block runs; AdmissionRefused past a bound."""
        with self._lock:
            if self._in_progress >= self.total:
                raise AdmissionRefused(
                    f"the gateway has {self._in_progress} act requests in progress, its limit "
                    f"is {self.total}; retry in {RETRY_AFTER_S} s"
                )
            held = self._by_key.get(key, 0)
            if held >= self.per_key:
                raise AdmissionRefused(
                    f"this key has {held} act requests in progress, its limit is "
                    f"{self.per_key}; retry in {RETRY_AFTER_S} s"
                )
            self._by_key[key] = held + 1
            self._in_progress += 1
        try:
            yield
        finally:
            with self._lock:
                self._in_progress -= 1
                left = self._by_key[key] - 1
                if left:
                    self._by_key[key] = left
                else:
                    del self._by_key[key]

