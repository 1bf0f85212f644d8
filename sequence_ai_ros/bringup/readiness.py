"""`Readiness`: brings the model up in the background once the node is active; its progress
goes to `/diagnostics`.

Its thread (`sequence_ai-readiness`, from activate until the model is loaded) shares the goals'
Policy: it reads only its `policy` argument, calling `Policy.ready()`, which the client makes
safe from any thread beside a running goal (the Session keeps its state under its own lock,
the transport's connection pool is thread-safe); it writes only `health` (own lock) and waits
on its stop event; `_exchange` is guarded by `_lock`. `start` and `stop` belong to the
lifecycle callbacks.

Each check is bounded (`CHECK_TIMEOUT_S`; no answer by then is a failing check, a WARN in
`/diagnostics`), and `stop` ends a check in flight by closing its connection, so neither a
thread nor a socket outlives a deactivate and the executor that stops it never waits on the
network.
"""

from __future__ import annotations

import threading

from rclpy.impl.rcutils_logger import RcutilsLogger

import sequence_ai
from sequence_ai import Exchange
from sequence_ai_ros.core.health import HealthRecord

__all__ = ["CHECK_TIMEOUT_S", "READINESS_THREAD", "READY_POLL_S", "Readiness"]

READINESS_THREAD = "sequence_ai-readiness"
# Between checks while the model loads.
READY_POLL_S = 1.0
# A check that has no answer by then counts as failing.
CHECK_TIMEOUT_S = 5.0


class Readiness:
    def __init__(self, health: HealthRecord, log: RcutilsLogger, stop_timeout_s: float) -> None:
        self._health = health
        self._log = log
        # Stopping aborts the check in flight, so the join is over within a socket read; this
        # only bounds a thread that is somehow stuck elsewhere.
        self._stop_timeout_s = stop_timeout_s
        # Lock order: a leaf (a check is aborted after its release).
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._exchange: Exchange | None = None
        self._thread: threading.Thread | None = None

    def start(self, policy: sequence_ai.Policy | None) -> None:
        self.stop()
        # A fresh event per thread: a watch that outlived its join still sees its own stop.
        self._stop = threading.Event()
        self._thread = threading.Thread(
            target=self._watch, args=(policy, self._stop), name=READINESS_THREAD, daemon=True
        )
        self._thread.start()

    def stop(self) -> None:
        """End the watch and any check in flight."""
        self._stop.set()
        with self._lock:
            exchange = self._exchange
        if exchange is not None:
            exchange.abort()
        thread, self._thread = self._thread, None
        if thread is not None and thread is not threading.current_thread():
            thread.join(timeout=self._stop_timeout_s)

    def _check(
        self, policy: sequence_ai.Policy, stop: threading.Event
    ) -> tuple[bool, float | None]:
        exchange = Exchange()
        with self._lock:
            self._exchange = exchange
        # A stop between the caller's look at the event and the registration above aborts
        # nothing: look again.
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
                    self._log.warning(f"readiness check failed: {exc}")
            else:
                self._health.update(
                    readiness_error="", ready=bool(ready), warming_eta_s=None if ready else eta_s
                )
                if ready:
                    return
            stop.wait(READY_POLL_S)
