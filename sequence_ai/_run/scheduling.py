"""``RequestScheduler``: when a run sends its next request, and how many it has in flight.

Requests are staggered at latency / N while others are in flight (N = ``max_in_flight``), and
with none in flight one starts once the open-loop horizon left falls to the lead time. Whatever
the latency, requests are at least horizon / N rows of motion apart: a fast service is asked N
times per open-loop horizon, not as often as it answers. See docs/control-loop.md ("Prefetch").
"""

from __future__ import annotations

import math
import threading
from dataclasses import dataclass
from typing import Optional

from .._requests.fetch import Fetch

__all__ = ["LEAD_FACTOR", "Capture", "Request", "RequestScheduler"]

# Lead = LEAD_FACTOR · EMA(refill latency) + one period; the factor absorbs latency jitter.
LEAD_FACTOR = 1.25


@dataclass
class Capture:
    """When and where in the playback one request's observation was taken.

    Its fetch thread writes it under the run's lock before sending; the driving thread reads
    it under that lock while the request is in flight, freely once the fetch is done.
    """

    # Observation order within the run; -1 until the fetch thread has started observing.
    sequence: int = -1
    position: float = 0.0
    time: float = 0.0
    # The instruction its request carries (the latch's, taken with its sequence number).
    instruction: Optional[str] = None


@dataclass
class Request:
    fetch: Fetch
    capture: Capture


class RequestScheduler:
    """The requests in flight and the timing of the next one. Driving thread only; a
    capture in flight is read under ``capture_lock`` (the run's lock its fetch thread writes
    under)."""

    def __init__(self, max_in_flight: int, prefetch: bool, capture_lock: threading.Lock) -> None:
        self.max_in_flight = max_in_flight
        self.prefetch = prefetch
        self._capture_lock = capture_lock
        self.requests: list[Request] = []
        self.last_fire = -math.inf
        # Playback position (rows) of the last request, and the rows of motion due before the
        # next one (the playing chunk's open-loop horizon / N; 0 until a chunk is installed).
        self.fired_at = 0.0
        self.spacing_rows = 0.0
        # Round trip of the run's first request: staggers requests until a warm sample exists.
        self.first_latency_s: Optional[float] = None

    @property
    def in_flight(self) -> int:
        return len(self.requests)

    @property
    def has_room(self) -> bool:
        return len(self.requests) < self.max_in_flight

    def started(self, request: Request, at: float, position: float) -> None:
        self.requests.append(request)
        self.last_fire = at
        self.fired_at = position

    def first_answered(self, started: float, latency_s: float) -> None:
        """The run's first request (sent by the warm-up, outside the scheduler) answered."""
        self.last_fire = started
        self.first_latency_s = latency_s

    def installed(self, horizon_rows: float) -> None:
        """A chunk with an open-loop horizon of ``horizon_rows`` is playing."""
        self.spacing_rows = horizon_rows / self.max_in_flight

    def moved_enough(self, position: float) -> bool:
        """Whether horizon / N rows have been played since the last request: the most a run
        asks for, whatever the latency (a fast service would otherwise be asked at its own
        pace, and most answers discarded)."""
        return position - self.fired_at >= self.spacing_rows

    def any_done(self) -> bool:
        return any(request.fetch.is_done() for request in self.requests)

    def take_done(self) -> list[Request]:
        """Remove and return the finished requests, in observation order."""
        done = [request for request in self.requests if request.fetch.is_done()]
        if done:
            self.requests = [request for request in self.requests if request not in done]
        return sorted(done, key=lambda request: request.capture.sequence)

    def abandon(self) -> None:
        """The run ended: requests still in flight are dropped unread (the session has closed
        their connections)."""
        self.requests = []

    def newer_in_flight(self, playing_sequence: int) -> bool:
        """A request in flight whose observation is newer than the chunk playing."""
        with self._capture_lock:
            # Not yet observing: its observation will be newer than anything playing.
            return any(r.capture.sequence < 0 or r.capture.sequence > playing_sequence
                       for r in self.requests)

    def next_stagger(self, latency_s: Optional[float], position: float) -> Optional[float]:
        """When the next staggered request is due (None: none will be before the next command
        is played, which moves ``position``)."""
        latency = latency_s or self.first_latency_s
        if not self.prefetch or latency is None or self.max_in_flight < 2:
            return None
        if not self.requests or len(self.requests) >= self.max_in_flight:
            return None
        if not self.moved_enough(position):
            return None
        return self.last_fire + latency / self.max_in_flight

    def top_up_due(
        self,
        *,
        now: float,
        latency_s: Optional[float],
        position: float,
        horizon_left: float,
        period_s: float,
        stop_by: Optional[float],
    ) -> bool:
        """Whether to start a request now, at playback ``position``, with ``horizon_left``
        commands before the playing chunk leaves its open-loop horizon; ``stop_by`` is the
        last time an answer can land and still be played (None: no deadline)."""
        if not self.prefetch or not self.has_room:
            return False
        if stop_by is not None and latency_s is not None and now + latency_s >= stop_by:
            return False
        # Without a warm sample the safe side stands: the request starts early.
        if latency_s is not None and not self.moved_enough(position):
            return False
        if self.requests:
            due = self.next_stagger(latency_s, position)
            return due is not None and now >= due
        # No warm sample yet: fire now (one step of this chunk has been played).
        lead = math.inf if latency_s is None else LEAD_FACTOR * latency_s + period_s
        return horizon_left * period_s <= lead
