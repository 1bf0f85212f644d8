"""`GoalFeedback`: one goal's `Act` feedback and its share of `/diagnostics`, computed from the
run's event stream (an observer of `sequence_ai.events`, called on the client's events thread).

The counts and continuity figures come from a `RunStats` fed by the same events as the run's
own outcome, so feedback, `/diagnostics` and the result agree by construction.
"""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Callable

from rclpy.action.server import ServerGoalHandle

import sequence_ai
from sequence_ai import RunStats, RunStatus
from sequence_ai.events import (
    ChunkInstalled,
    RowPlayed,
    RunEnded,
    RunEvent,
    RunStarted,
    UnderrunBegan,
    UnderrunEnded,
)
from sequence_ai_interfaces.action import Act
from sequence_ai_ros.core.health import HealthRecord
from sequence_ai_ros.goals.instruction_progress import InstructionProgress

__all__ = ["FEEDBACK_PERIOD_S", "GoalFeedback", "request_latency_s"]

FEEDBACK_PERIOD_S = 0.2


def request_latency_s(prediction: sequence_ai.Prediction) -> float | None:
    """The round trip of the request that produced this chunk: the client's figure if it
    reports one, else the service's own time to first action (a lower bound)."""
    for key in ("round_trip_ms", "ttfa_ms"):
        value = prediction.perf.get(key)
        # A negative time is impossible: the service's figure is ignored then.
        if isinstance(value, (int, float)) and math.isfinite(value) and value >= 0:
            return float(value) / 1000.0
    return None


class GoalFeedback:
    """Feedback of one goal: published on each status change and at most every
    FEEDBACK_PERIOD_S while it plays. Any thread; `_lock` is a leaf (nothing is taken under
    it, nothing is published under it)."""

    def __init__(
        self, handle: ServerGoalHandle, health: HealthRecord, started_s: float,
        on_feedback: Callable[[Act.Feedback], None],
    ) -> None:
        self._handle = handle
        # Told each feedback published: the episode recorder.
        self._on_feedback = on_feedback
        self._health = health
        self._started_s = started_s
        self._stats = RunStats(lambda: 0)
        self._view = InstructionProgress(handle.request.instruction, started_s)
        # Lock order: a leaf (nothing is taken under it).
        self._lock = threading.Lock()
        # Under _lock: what the feedback shows besides the stats; when it was last published;
        # whether a run is under way (its figures are shown only then).
        self._status = RunStatus.STARTING
        self._warming_eta_s = math.nan
        self._request_bytes = 0
        self._last_s = 0.0
        self._running = False

    def on_event(self, event: RunEvent) -> None:
        self._stats.on_event(event)
        self._view.on_event(event)
        if isinstance(event, RowPlayed):
            self._set(RunStatus.RUNNING, math.nan)
        elif isinstance(event, ChunkInstalled):
            self._installed(event.prediction)
        elif isinstance(event, UnderrunEnded):
            self._health.add_underrun()
        elif isinstance(event, UnderrunBegan):
            self._set(RunStatus.WAITING, math.nan)
        elif isinstance(event, RunStarted):
            with self._lock:
                self._running = True
            self._set(RunStatus.STARTING, math.nan)
        elif isinstance(event, RunEnded):
            with self._lock:
                self._running = False

    def waiting(self, warming_eta_s: float = math.nan) -> None:
        """The goal waits (for its inputs, or for a loading model): shown at once."""
        self._set(RunStatus.WAITING, warming_eta_s, force=True)

    def outcome(
        self, ending: sequence_ai.Ending, error: Exception | None
    ) -> sequence_ai.RunOutcome:
        """This goal's share of the run (a hand-over splits one run between goals)."""
        return self._stats.outcome(ending, error)

    def instruction_lag_s(self) -> float:
        return self._view.instruction_lag_s()

    def show_playing(self, chunk: ChunkInstalled, played: int) -> None:
        """A hand-over: the chunk already playing, `played` of its rows played."""
        self._view.seed(chunk, played)

    def counts(self) -> tuple[int, int, int]:
        """Actions, chunks and underruns so far."""
        progress = self._stats.progress()
        return progress.actions, progress.chunks, progress.underruns

    def _installed(self, prediction: sequence_ai.Prediction) -> None:
        with self._lock:
            self._request_bytes = prediction.request_bytes or 0
        latency = request_latency_s(prediction)
        if latency is not None:
            self._health.add_latency(latency)
        observation = prediction.observation
        self._health.update(
            request_bytes=prediction.request_bytes,
            view_bytes=None if observation is None else dict(observation.view_bytes),
        )

    def _set(self, status: RunStatus, warming_eta_s: float, force: bool = False) -> None:
        with self._lock:
            changed = status is not self._status
            self._status, self._warming_eta_s = status, warming_eta_s
        self.publish(force=force or changed)

    def publish(self, force: bool = False) -> None:
        now = time.monotonic()
        with self._lock:
            if not force and now - self._last_s < FEEDBACK_PERIOD_S:
                return
            self._last_s = now
            running = self._running
            status, eta_s, request_bytes = self._status, self._warming_eta_s, self._request_bytes
        # Counted only when published: most rows publish nothing.
        progress = self._stats.progress()
        feedback = Act.Feedback(
            status=status.value,
            actions=progress.actions,
            chunks=progress.chunks,
            underruns=progress.underruns,
            elapsed_s=now - self._started_s,
            warming_eta_s=eta_s,
            request_bytes=request_bytes,
        )
        self._view.fill(feedback, now)
        if running:
            rate = progress.requests_per_s
            feedback.requests = progress.requests
            feedback.in_flight = progress.in_flight
            feedback.requests_per_s = math.nan if rate is None else rate
            feedback.speed = progress.speed
            feedback.rows_beyond_horizon = progress.rows_beyond_horizon
            feedback.no_fresh_command_s = progress.no_fresh_command_s
            self._health.update(continuity=progress)
        else:
            feedback.requests_per_s = feedback.speed = math.nan
        self._handle.publish_feedback(feedback)
        self._on_feedback(feedback)
