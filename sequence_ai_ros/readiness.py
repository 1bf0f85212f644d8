"""`Readiness`: brings the model up in the background once the node is active; its progress
goes to `/diagnostics`.

Its thread (`sequence_ai-readiness`, from activate until the model is loaded) shares the goals'
Policy: it reads only its `policy` argument, calling `Policy.ready()`, which the client makes
safe from any thread beside a running goal (the Session keeps its state under its own lock,
the transport's connection pool is thread-safe); it writes only `health` (own lock) and waits
on `_stop`. `start` and `stop` belong to the lifecycle callbacks.
"""

from __future__ import annotations

import threading

from rclpy.impl.rcutils_logger import RcutilsLogger

import sequence_ai
from sequence_ai_ros.diagnostics import HealthRecord

__all__ = ["READY_POLL_S", "Readiness"]

READY_POLL_S = 1.0


class Readiness:
    def __init__(self, health: HealthRecord, log: RcutilsLogger, stop_timeout_s: float) -> None:
        self._health = health
        self._log = log
        self._stop_timeout_s = stop_timeout_s
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self, policy: sequence_ai.Policy | None) -> None:
        self._stop.clear()
        self._thread = threading.Thread(
            target=self._watch, args=(policy,), name="sequence_ai-readiness", daemon=True
        )
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        thread, self._thread = self._thread, None
        if thread is not None and thread is not threading.current_thread():
            thread.join(timeout=self._stop_timeout_s)

    def _watch(self, policy: sequence_ai.Policy | None) -> None:
        last_problem = ""
        while policy is not None and not self._stop.is_set():
            try:
                ready, eta_s = policy.ready()
            except sequence_ai.SequencesError as exc:
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
            self._stop.wait(READY_POLL_S)
