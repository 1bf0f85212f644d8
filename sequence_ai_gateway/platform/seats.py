"""Sessions and their leases: which robot holds a seat on which worker, with which secret.

A lease grants a direct secret for one worker for ``ttl_s``; its ``epoch`` rolls whenever the
secret or the worker changes, so a robot holding a stale epoch meets 401 and connects again.
"""

from __future__ import annotations

import secrets
import threading
import time
from dataclasses import dataclass
from typing import Dict, Optional, Tuple

LEASE_TTL_S = 300
KEEPALIVE_EVERY_S = 20.0
SEAT_TTL_S = 90.0


@dataclass
class Seat:
    session: str
    deployment: str
    worker: int  # the generation of the worker the secret is good for
    secret: str
    epoch: int
    expires_at: float  # wall clock (time.time())
    kept_until: float


class Seats:
    """Every session's seat; safe from any thread."""

    def __init__(self, ttl_s: int = LEASE_TTL_S) -> None:
        self.ttl_s = ttl_s
        self._lock = threading.Lock()
        self._seats: Dict[Tuple[str, str], Seat] = {}
        self._epoch = 0

    def _next_epoch(self) -> int:
        self._epoch += 1
        return self._epoch

    def connect(self, deployment: str, session: str, worker: int) -> Seat:
        """The session's seat, renewed: the same secret and epoch while its lease runs on the same
        worker, else a new secret under a new epoch."""
        now = time.time()
        with self._lock:
            seat = self._seats.get((deployment, session))
            if seat is None or seat.worker != worker or seat.expires_at <= now:
                seat = Seat(session, deployment, worker, f"dsec_{secrets.token_urlsafe(24)}",
                            self._next_epoch(), now, now)
                self._seats[(deployment, session)] = seat
            seat.expires_at = now + self.ttl_s
            seat.kept_until = now + SEAT_TTL_S
            return seat

    def holder(self, secret: str, worker: int) -> Optional[Seat]:
        """The seat whose live lease on ``worker`` this secret is, else None."""
        now = time.time()
        with self._lock:
            for seat in self._seats.values():
                if (secrets.compare_digest(seat.secret, secret) and seat.worker == worker
                        and seat.expires_at > now):
                    return seat
        return None

    def keep(self, deployment: str, session: str) -> bool:
        now = time.time()
        with self._lock:
            seat = self._seats.get((deployment, session))
            if seat is None or seat.kept_until <= now:
                return False
            seat.kept_until = now + SEAT_TTL_S
            return True

    def release(self, deployment: str, session: str) -> bool:
        with self._lock:
            return self._seats.pop((deployment, session), None) is not None

    def rotate(self) -> None:
        with self._lock:
            for seat in self._seats.values():
                seat.secret = f"dsec_{secrets.token_urlsafe(24)}"
                seat.epoch = self._next_epoch()

    def expire(self) -> None:
        now = time.time()
        with self._lock:
            for seat in self._seats.values():
                seat.expires_at = now

    def clear(self) -> None:
        with self._lock:
            self._seats.clear()
