"""Whole-exchange deadlines: a request's socket is shut down when its deadline passes or its
run abandons it, whatever phase it is in (connecting, headers, interim responses, body).

httpx bounds each socket operation, not the exchange: its read timeout restarts with every
byte, so headers sent a byte at a time or endless ``102 Processing`` responses never trip it.
"""

from __future__ import annotations

import math
import socket
import threading
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from typing import Callable, Optional

__all__ = ["DeadlineWatch", "Exchange", "THREAD_NAME"]

THREAD_NAME = "sequence_ai-deadline"
# Longest single wait of the watch thread (a deadline is always finite; this keeps it so).
MAX_WAIT_S = 3600.0
# An exchange ended before its connection existed (connecting, waiting for the pool) is tried
# again this often until its socket is shut down or the request finishes.
RETRY_S = 0.02

# Finds the socket of the connection serving the request with these extensions, if any.
SocketFinder = Callable[[Mapping[str, object]], Optional[socket.socket]]


class Exchange:
    """One request's claim to end early. ``abort()`` from any thread ends it within a socket
    read; the request then raises. Fields are guarded by ``_lock``; ``deadline`` by the
    watch's condition."""

    def __init__(self) -> None:
        # Lock order: a leaf (the socket is shut and the watch woken after its release).
        self._lock = threading.Lock()
        self._ended: Optional[str] = None
        self._extensions: Optional[Mapping[str, object]] = None
        self._finder: Optional[SocketFinder] = None
        self._wake: Optional[Callable[[Exchange], None]] = None
        self.deadline = math.inf

    @property
    def ended(self) -> Optional[str]:
        """Why it was ended early ("deadline", "abandoned"), or None."""
        with self._lock:
            return self._ended

    def abort(self) -> None:
        """Its run is over: close its connection now (no-op once the request finished)."""
        if not self.end("abandoned"):
            with self._lock:
                wake = self._wake
            if wake is not None:
                wake(self)

    def end(self, why: str) -> bool:
        """Mark it ended (the first reason stays) and shut its socket down; False while it has
        no socket yet (the watch then tries again)."""
        with self._lock:
            if self._ended is None:
                self._ended = why
            finder, extensions = self._finder, self._extensions
        if finder is None or extensions is None:
            return False
        sock = finder(extensions)
        if sock is None:
            return False
        try:
            sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        return True

    def _attach(
        self, extensions: Mapping[str, object], finder: SocketFinder,
        wake: Callable[[Exchange], None],
    ) -> bool:
        """Start watching; False when it was already aborted (the request must not start)."""
        with self._lock:
            self._extensions, self._finder, self._wake = extensions, finder, wake
            return self._ended is None

    def _detach(self) -> None:
        with self._lock:
            self._extensions = self._finder = self._wake = None


class DeadlineWatch:
    """One thread per Transport, alive only while it has exchanges to watch, that ends each at
    its deadline. ``_open``, ``_thread`` and the exchanges' ``deadline`` are guarded by
    ``_cond``."""

    def __init__(self, finder: SocketFinder) -> None:
        self._finder = finder
        # Lock order: a leaf (exchanges are ended after its release).
        self._cond = threading.Condition(threading.Lock())
        self._open: set[Exchange] = set()
        self._thread: Optional[threading.Thread] = None

    @contextmanager
    def watching(
        self, exchange: Exchange, deadline: float, extensions: Mapping[str, object]
    ) -> Iterator[bool]:
        """Watch ``exchange`` until ``deadline`` for the block's duration; yields False when
        the exchange was aborted before it began."""
        live = exchange._attach(extensions, self._finder, self._retry_soon)
        with self._cond:
            exchange.deadline = deadline
            self._open.add(exchange)
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name=THREAD_NAME, daemon=True)
                self._thread.start()
            self._cond.notify_all()
        try:
            yield live
        finally:
            exchange._detach()
            with self._cond:
                self._open.discard(exchange)
                self._cond.notify_all()

    def _retry_soon(self, exchange: Exchange) -> None:
        with self._cond:
            if exchange in self._open:
                exchange.deadline = time.monotonic()
                self._cond.notify_all()

    def _run(self) -> None:
        while True:
            with self._cond:
                if not self._open:
                    self._thread = None
                    return
                now = time.monotonic()
                due = [e for e in self._open if e.deadline <= now]
                if not due:
                    self._cond.wait(min(min(e.deadline for e in self._open) - now, MAX_WAIT_S))
                    continue
                for exchange in due:
                    exchange.deadline = now + RETRY_S
            for exchange in due:
                if exchange.end("deadline"):
                    with self._cond:
                        # Shut down: the request raises now; nothing more to watch.
                        self._open.discard(exchange)
