"""Hand-over: an `act` goal with `handover` set takes the running goal's run over without
stopping it (docs/node.md, "Preemption versus hand-over").

The run keeps playing; the client's `Policy.hand_over` puts the new instruction on its very
next request and bounds the run by the new goal's `max_seconds` from its acceptance; the first
chunk of the new instruction drops the old rows. The old goal ends `HANDED_OVER`
(stop_policy.py) with its figures up to the hand-over. The new goal shares the run's call
handle, so a cancel still stops it within one period, and its steps still go through the gate.
"""

from __future__ import annotations

import dataclasses
import threading
import time
from typing import TYPE_CHECKING

from sequence_ai import Ending, RunOutcome
from sequence_ai.events import ChunkInstalled, RowPlayed, RunEvent, RunStarted
from sequence_ai_ros.core.node_config import NodeConfig
from sequence_ai_ros.goals.goal_state import GoalPhase, GoalRun
from sequence_ai_ros.goals.stop_policy import StopCause

if TYPE_CHECKING:
    from rclpy.action.server import ServerGoalHandle

    from sequence_ai_interfaces.action import Act
    from sequence_ai_ros.goals.feedback import GoalFeedback

__all__ = [
    "RunBaton",
    "afresh_seconds",
    "handed_over_outcome",
    "handover_problem",
    "own_outcome",
    "take_over",
]

# A run that ended this way reported success.
_SUCCESSES = (Ending.COMPLETED, Ending.TIMEOUT, Ending.UNTIL)


class RunBaton:
    """One run's events, relayed to the feedback of the goal that owns the run now; an
    observer of the run (the client's events thread). `config` is the snapshot the run was
    started with. `_lock` is a leaf: nothing is taken or published under it."""

    def __init__(self, feedback: GoalFeedback, config: NodeConfig) -> None:
        self.config = config
        # Lock order: a leaf (nothing is taken under it).
        self._lock = threading.Lock()
        # Under _lock: where the events go; the run's start, once it has started; the chunk
        # playing and the rows played of it (what the next owner's plan view starts from).
        self._feedback = feedback
        self._started: RunStarted | None = None
        self._chunk: ChunkInstalled | None = None
        self._played = 0

    @property
    def running(self) -> bool:
        """The client's loop has started: a hand-over reaches it."""
        with self._lock:
            return self._started is not None

    def on_event(self, event: RunEvent) -> None:
        with self._lock:
            if isinstance(event, RunStarted):
                self._started = event
            elif isinstance(event, ChunkInstalled):
                self._chunk, self._played = event, 0
            elif isinstance(event, RowPlayed):
                self._played += 1
            feedback = self._feedback
        feedback.on_event(event)

    def pass_to(self, feedback: GoalFeedback) -> None:
        """The newer goal's feedback takes the run's events from now on, as a run of its own
        that starts now (its counts and continuity are its own)."""
        with self._lock:
            started, chunk, played = self._started, self._chunk, self._played
        if started is not None:
            feedback.on_event(dataclasses.replace(started, time=time.monotonic()))
        if chunk is not None:
            # The old plan plays on: the newer goal's feedback shows it until its own chunk.
            feedback.show_playing(chunk, played)
        with self._lock:
            self._feedback = feedback


def handover_problem(
    goal: Act.Goal, running: Act.Goal | None, baton: RunBaton | None, live: NodeConfig
) -> str | None:
    """Why a goal asking for a hand-over must be rejected, or None. `running` is the goal whose
    run it would take over (None: none runs, and the goal simply starts)."""
    if not goal.handover:
        return None
    if goal.max_actions > 0:
        return (
            f"handover is true with max_actions {goal.max_actions}; a hand-over is bounded by "
            "max_seconds alone (expected max_actions 0)"
        )
    if running is None or baton is None:
        return None
    if running.max_actions > 0:
        return (
            f"the running goal is bounded by max_actions ({running.max_actions}); only a goal "
            "bounded by max_seconds alone is handed over (send handover false to preempt it)"
        )
    if baton.config != live:
        changed = [
            f.name for f in dataclasses.fields(live)
            if getattr(live, f.name) != getattr(baton.config, f.name)
        ]
        return (
            f"the node's parameters changed since the running goal started ({', '.join(changed)})"
            "; a hand-over keeps the running configuration (send handover false to preempt it)"
        )
    return None


def take_over(previous: GoalRun, handle: ServerGoalHandle) -> GoalRun:
    """Under the goal runner's condition: the new goal, owning `previous`'s run (the same
    call handle), which is stopped `HANDED_OVER` (its run goes on)."""
    run = GoalRun(handle, call=previous.call)
    run.phase = GoalPhase.RUNNING
    # Until `GoalDriver.hand_over` returns: the run's end waits for it.
    run.handing = True
    # The driving thread is already inside its run: it never picks it as a goal to start.
    run.ending = True
    run.sent_chunk, run.dry_run = previous.sent_chunk, previous.dry_run
    previous.request_stop(StopCause.HANDED_OVER)
    previous.handed_to = run
    return run


def own_outcome(
    feedback: GoalFeedback | None, outcome: RunOutcome | None, error: Exception | None
) -> RunOutcome | None:
    """A goal that took a run over: its own figures, from its acceptance to the run's end."""
    if feedback is None or outcome is None:
        return outcome
    return feedback.outcome(outcome.ending, error)


def handed_over_outcome(feedback: GoalFeedback | None) -> RunOutcome | None:
    """The figures of a goal that handed its run over, up to the hand-over."""
    return None if feedback is None else feedback.outcome(Ending.COMPLETED, None)


def afresh_seconds(
    run: GoalRun, live: NodeConfig, outcome: RunOutcome | None, error: Exception | None,
    period_s: float,
) -> float | None:
    """Under the goal runner's condition, at the end of the run `run` took over: None when the
    hand-over took (or `run` was stopped meanwhile). Else the run ended as the goal arrived —
    `Policy.hand_over` found no run, or the run was past its last check and ended early with
    nothing played for `run` — and `run` goes on as a goal of its own for the seconds returned
    (its fields reset), or, with less than `period_s` of its max_seconds left, is stopped
    LATE_HANDOVER and 0.0 is returned: a step is never reported done having played nothing."""
    left_s = min(float(run.handle.request.max_seconds), live.max_goal_seconds) - (
        time.monotonic() - run.started_s
    )
    played_nothing = (
        error is None and outcome is not None and outcome.ending in _SUCCESSES
        and outcome.actions == 0
    )
    if run.stop is not None or not (
        run.handover_missed or (played_nothing and left_s >= period_s)
    ):
        return None
    if left_s < period_s:
        run.request_stop(StopCause.LATE_HANDOVER)
        return 0.0
    # The old run held the arm at its end; the fresh run holds at its own.
    run.held, run.unheld, run.validate_reason = False, "", ""
    run.sent_chunk, run.refused, run.handover_missed = 0, "", False
    return left_s
