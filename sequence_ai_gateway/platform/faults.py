"""Faults the platform can be told to show (loopback control API, tests, benchmarks).

warming  the deployment starts: connects answer 503 ``warming`` with the ETA until it is up
busy     the next ``count`` acts answer 429 ``busy`` with Retry-After
stall    the next ``count`` acts take ``seconds`` more on the worker (a slow act)
drain    the serving worker drains: its acts answer 503 (``draining``); connect names a new one
die      the serving worker dies during the next act: its connections drop, a new one starts
rotate   every seat's direct secret is replaced (epoch + 1): the old one gets 401
expire   every lease ends now: the worker refuses it (401) until the robot connects again
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass
from typing import Dict, Optional

KINDS = ("warming", "busy", "stall", "drain", "die", "rotate", "expire")
DEFAULT_RETRY_AFTER_S = 1.0


@dataclass
class Armed:
    count: int
    seconds: float  # busy: its Retry-After; stall: how long the act is held


class PlatformFaults:
    """The armed act faults; safe from any thread."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._busy: Dict[str, Armed] = {}
        self._stall: Dict[str, Armed] = {}
        self._die: Dict[str, int] = {}
        self._warm_at: Dict[str, float] = {}

    def arm_busy(self, deployment: str, count: int, retry_after_s: float) -> None:
        with self._lock:
            self._busy[deployment] = Armed(count, retry_after_s)

    def arm_stall(self, deployment: str, count: int, seconds: float) -> None:
        with self._lock:
            self._stall[deployment] = Armed(count, seconds)

    def arm_die(self, deployment: str, count: int) -> None:
        with self._lock:
            self._die[deployment] = count

    def warm_after(self, deployment: str, seconds: float) -> None:
        with self._lock:
            self._warm_at[deployment] = time.monotonic() + seconds

    def warming_s(self, deployment: str) -> Optional[float]:
        """Seconds until the deployment is up, None when it is."""
        with self._lock:
            left = self._warm_at.get(deployment, 0.0) - time.monotonic()
            if left <= 0:
                self._warm_at.pop(deployment, None)
                return None
            return left

    def take_busy(self, deployment: str) -> Optional[float]:
        """The Retry-After of a busy answer due now, else None."""
        return self._take(self._busy, deployment)

    def take_stall(self, deployment: str) -> Optional[float]:
        """How long to hold the act due now, else None."""
        return self._take(self._stall, deployment)

    def _take(self, armed: Dict[str, Armed], deployment: str) -> Optional[float]:
        with self._lock:
            fault = armed.get(deployment)
            if fault is None:
                return None
            fault.count -= 1
            if fault.count <= 0:
                del armed[deployment]
            return fault.seconds

    def take_die(self, deployment: str) -> bool:
        with self._lock:
            left = self._die.get(deployment, 0)
            if left <= 0:
                return False
            if left == 1:
                del self._die[deployment]
            else:
                self._die[deployment] = left - 1
            return True

    def clear(self) -> None:
        with self._lock:
            self._busy.clear()
            self._stall.clear()
            self._die.clear()
            self._warm_at.clear()
