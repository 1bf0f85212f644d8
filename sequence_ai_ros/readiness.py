"""The readiness watch: from activate until the model is loaded, ``GET /v1/act/ready`` in the
background, progress to diagnostics. Each check is bounded, and stopping ends a check in
flight by closing its connection, so neither a thread nor a socket outlives a deactivate and
the executor that stops it never waits on the network."""

from __future__ import annotations

import threading
from collections.abc import Callable

import sequence_ai
from sequence_ai.deadline import Exchange
from sequence_ai_ros.diagnostics import HealthRecord

THREAD_NAME = "sequence_ai-readiness"
# Between checks while the model loads.
POLL_S = 1.0
# A check that has no answer by then counts as failing (a WARN in /diagnostics).
CHECK_TIMEOUT_S = 5.0
# Stopping aborts the check in flight; the thread then ends within a socket read.
JOIN_S = 1.0


class ReadinessWatch:
    """Owned by the lifecycle callbacks (``start``/``stop``). The watch thread reads only its
    ``policy`` argument (``Policy.ready()`` is safe beside a running goal), writes only
    ``health`` (own lock), and waits on ``_stop``; ``_exchange`` is guarded by ``_lock``."""

    def __init__(self, health: HealthRecord, warn: Callable[[str], object]) -> None:
        self._health = health
        self._warn = warn
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._exchange: Exchange | None = None
        self._thread: threading.Thread | None = None

    def start(self, policy: sequence_ai.Policy | None) -> None:
        self.stop()
        self._stop = threading.Event()
        self._thread = threading.Thread(
            target=self._watch, args=(policy, self._stop), name=THREAD_NAME, daemon=True
        )
        self._thread.start()

    def stop(self) -> None:
        """End the watch and any check in flight; returns within ``JOIN_S``."""
        self._stop.set()
        with self._lock:
            exchange = self._exchange
        if exchange is not None:
            exchange.abort()
        thread, self._thread = self._thread, None
        if thread is not None and thread is not threading.current_thread():
            thread.join(timeout=JOIN_S)

    def _check(
        self, policy: sequence_ai.Policy, stop: threading.Event
    ) -> tuple[bool, float | None]:
        exchange = Exchange()
        with self._lock:
            self._exchange = exchange
        # A stop between the event check and the registration above aborts nothing: look again.
        if stop.is_set():
            exchange.abort()
        try:
            return policy.ready(timeout=CHECK_TIMEOUT_S, exchange=exchange)
        finally:
            with self._lock:
                self._exchange = None

    def _watch(self, policy: sequence_ai.Policy | None, stop: threading.Event) -> None:
        last_problem = ""
        while policy is not None and not stop.is_set():
            try:
                ready, eta_s = self._check(policy, stop)
            except sequence_ai.SequencesError as exc:
                if stop.is_set():
                    return
                self._health.update(ready=None, readiness_error=f"{type(exc).__name__}: {exc}")
                # Once per distinct failure: a service that stays down must not flood the log.
                if str(exc) != last_problem:
                    last_problem = str(exc)
                    self._warn(f"readiness check failed: {exc}")
            else:
                self._health.update(
                    readiness_error="", ready=bool(ready), warming_eta_s=None if ready else eta_s
                )
                if ready:
                    return
            stop.wait(POLL_S)
