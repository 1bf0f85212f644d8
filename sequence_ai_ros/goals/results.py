"""Result building: a goal's terminal status and its `Act.Result`, from its `GoalEnding` row
(sequence_ai_ros/goals/stop_policy.py) and what its run reported."""

from __future__ import annotations

import math
import threading
import time
from dataclasses import dataclass

from rclpy.action.server import ServerGoalHandle
from rclpy.impl.rcutils_logger import RcutilsLogger

import sequence_ai
from sequence_ai import Ending
from sequence_ai_interfaces.action import Act
from sequence_ai_ros.core.health import HealthRecord
from sequence_ai_ros.episodes.recorder import EpisodeRecorder
from sequence_ai_ros.goals.goal_state import GoalRun
from sequence_ai_ros.goals.instruction import shown
from sequence_ai_ros.goals.stop_policy import (
    NEVER_STARTED,
    ResultReason,
    StopCause,
    Terminal,
    goal_ending,
)

__all__ = ["GoalOutcome", "GoalResults", "continuity_into", "crashed_result", "unstarted"]


@dataclass(frozen=True)
class GoalOutcome:
    """A goal's terminal status and its result, as its `execute` hands them to rclpy."""

    terminal: Terminal
    result: Act.Result

    def conclude(self, handle: ServerGoalHandle) -> Act.Result:
        """Set the terminal status; on the executor's thread only. rclpy 7.1.5 publishes the
        goal statuses from the calling thread without the server's lock, while the executor's
        thread accepts and expires goals in the same rcl goal array (ros2/rclpy#1236)."""
        if not handle.is_active:
            return self.result
        if self.terminal is Terminal.SUCCEEDED:
            handle.succeed()
        elif self.terminal is Terminal.CANCELED and handle.is_cancel_requested:
            # Only the cancel callback stops a run as canceled, and rclpy records the cancel
            # in the same executor step, before this `execute` resumes.
            handle.canceled()
        else:
            handle.abort()
        return self.result


def unstarted(cause: StopCause) -> GoalOutcome:
    """The ending of a goal the node stopped (`cause`) before its run existed: the stop
    policy's row for that cause, with nothing run and nothing commanded."""
    row = goal_ending(cause, Ending.INTERRUPTED).value
    result = Act.Result(
        reason=row.reason.value,
        stopped_early=row.terminal is not Terminal.SUCCEEDED,
        message=row.message.format(detail=NEVER_STARTED, cause=cause.value),
        max_seam_jump=math.nan,
        instruction_lag_s=math.nan,
    )
    return GoalOutcome(row.terminal, result)


class GoalResults:
    """Ends goals: sets the terminal status, builds the result, records it in the health.
    `cond` is the goal runner's, which guards each `GoalRun`'s mutable fields."""

    def __init__(
        self, cond: threading.Condition, health: HealthRecord, log: RcutilsLogger,
        episodes: EpisodeRecorder,
    ) -> None:
        self._cond = cond
        self._health = health
        self._log = log
        # Told each result: it closes the goal's episode file.
        self._episodes = episodes

    def end(
        self,
        run: GoalRun,
        outcome: sequence_ai.RunOutcome | None,
        error: Exception | None,
        *,
        ran: bool,
    ) -> GoalOutcome:
        """The goal's terminal state and result, from its `GoalEnding` row."""
        detail = self._detail(run, outcome, error) if ran else NEVER_STARTED
        if outcome is not None:
            run_ending = outcome.ending
        else:
            run_ending = Ending.RAISED if error is not None else Ending.INTERRUPTED
        with self._cond:
            cause = run.stop
            feedback = run.feedback
            unheld = run.unheld
            dry_run = run.dry_run
        row = goal_ending(cause, run_ending, error).value
        reason = row.reason.value
        if row.reason is ResultReason.RAISED:
            reason += f":{outcome.error if outcome and outcome.error else type(error).__name__}"
        message = row.message.format(detail=detail, cause=cause.value if cause else "")
        if unheld:
            message += f"; the arm could not be held: {unheld}"
        if dry_run:
            message = f"dry run (nothing reached the arm; commands on ~/planned): {message}"
        result = Act.Result(
            reason=reason,
            stopped_early=row.terminal is not Terminal.SUCCEEDED,
            message=message,
            instruction_lag_s=math.nan if feedback is None else feedback.instruction_lag_s(),
        )
        if outcome is not None:
            result.actions, result.chunks = outcome.actions, outcome.chunks
            result.underruns, result.underrun_s = outcome.underruns, float(outcome.underrun_s)
            result.elapsed_s = float(outcome.elapsed_s)
            jump = outcome.max_seam_jump
            result.max_seam_jump = math.nan if jump is None else float(jump)
            result.stopped_early = result.stopped_early or bool(outcome.stopped_early)
            continuity_into(result, outcome)
        else:
            counts = (0, 0, 0) if feedback is None else feedback.counts()
            result.actions, result.chunks, result.underruns = counts
            result.elapsed_s = time.monotonic() - run.started_s
            result.max_seam_jump = math.nan
        self._episodes.goal_ended(
            bytes(run.handle.goal_id.uuid), run.handle.request, result, outcome,
            row.terminal.value,
        )
        self._health.end_goal(f"{result.reason}: {result.message}", ran=ran)
        self._log.info(
            f"goal {shown(run.handle.request.instruction)} ended {result.reason}: "
            f"{result.message}"
        )
        return GoalOutcome(row.terminal, result)

    def _detail(
        self, run: GoalRun, outcome: sequence_ai.RunOutcome | None, error: Exception | None
    ) -> str:
        """What the run reports, for the result message."""
        if error is not None:
            return f"{type(error).__name__}: {error}"
        if outcome is not None and outcome.ending is Ending.VALIDATE:
            with self._cond:
                return run.validate_reason
        return repr(outcome)

    def crashed(self, run: GoalRun, exc: Exception) -> GoalOutcome:
        """`crashed_result`, aborted, and the goal's episode closed with it."""
        result = crashed_result(exc)
        self._episodes.goal_ended(
            bytes(run.handle.goal_id.uuid), run.handle.request, result, None,
            Terminal.ABORTED.value,
        )
        return GoalOutcome(Terminal.ABORTED, result)


def crashed_result(exc: Exception) -> Act.Result:
    """The result of a goal the node failed to end normally (a bug): aborted, raised."""
    return Act.Result(
        reason=f"{ResultReason.RAISED.value}:{type(exc).__name__}",
        stopped_early=True,
        max_seam_jump=math.nan,
        instruction_lag_s=math.nan,
        message=f"the node failed while ending the goal: {exc}",
    )


def continuity_into(result: Act.Result, outcome: sequence_ai.RunOutcome) -> None:
    """The run's continuity and cost figures into the goal's result (NaN: not measured)."""
    rate = outcome.requests_per_s
    result.requests, result.discarded = outcome.requests, outcome.discarded
    result.requests_per_s = math.nan if rate is None else rate
    result.rows_beyond_horizon = outcome.rows_beyond_horizon
    result.no_fresh_command_s = float(outcome.no_fresh_command_s)
    result.speed_min = math.nan if outcome.speed_min is None else outcome.speed_min
    result.speed_mean = math.nan if outcome.speed_mean is None else outcome.speed_mean
