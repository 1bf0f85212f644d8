"""The state of one `act` goal: its phase, its stop cause, and what its run left for the result.
The transitions are `GoalRunner`'s (goals/runner.py); the endings `stop_policy`'s."""

from __future__ import annotations

import enum
import math
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from sequence_ai import CallHandle
from sequence_ai_ros.goals.instruction import instruction_problem
from sequence_ai_ros.goals.stop_policy import StopCause

if TYPE_CHECKING:
    from rclpy.action.server import ServerGoalHandle
    from rclpy.task import Future

    from sequence_ai_interfaces.action import Act
    from sequence_ai_ros.goals.feedback import GoalFeedback

__all__ = ["GoalPhase", "GoalRun", "goal_problem"]


def _result_future() -> Future:
    """The future a goal's `execute` awaits on the executor: rclpy's, imported when a goal is
    made, so the state machine imports without ROS."""
    from rclpy.task import Future

    return Future()


class GoalPhase(enum.Enum):
    """Where a goal is in its life: pending → running → stopping → ended (pending may skip)."""

    PENDING = "pending"  # accepted; waits for the previous goal to end
    RUNNING = "running"  # its run drives the arm
    STOPPING = "stopping"  # a stop cause is set; the run (if any) is being interrupted
    ENDED = "ended"  # its GoalOutcome handed to its execute, which sets the terminal state


@dataclass(eq=False)
class GoalRun:
    """One accepted goal. `handle`, `call`, `started_s` and `result` never change (`call` is
    the client's interrupt of exactly this goal's run, safe from any thread; `result` is
    completed once, by whoever ends the goal, and awaited by the action server's `execute`);
    every other field is read and written only under `GoalRunner._cond` (by the action server's
    callbacks, the driving thread and the client's callbacks)."""

    handle: ServerGoalHandle
    call: CallHandle = field(default_factory=CallHandle)
    started_s: float = field(default_factory=time.monotonic)
    result: Future = field(default_factory=_result_future)
    phase: GoalPhase = GoalPhase.PENDING
    # Someone (the driving thread, or the watchdog for a stuck one) is ending it.
    ending: bool = False
    stop: StopCause | None = None
    held: bool = False
    # Why the end's hold could not be published ("" when it was, or was not asked for).
    unheld: str = ""
    validate_reason: str = ""
    # Chunk mode: the number of the last chunk sent as a trajectory, and why one was refused
    # ("" if none was): the loop's next validate then ends the goal.
    sent_chunk: int = 0
    refused: str = ""
    # Its feedback, from its run's events; set when its run starts.
    feedback: GoalFeedback | None = None
    # Its run goes through the dry run's gate (dry_run.py): nothing reaches the arm.
    dry_run: bool = False
    # The newer goal its run was handed over to (takeover.py), if any.
    handed_to: GoalRun | None = None
    # A goal taking a run over: the hand-over's book-keeping is still under way (the run's
    # end waits for it); the client found no run to hand over (`Policy.hand_over` false).
    handing: bool = False
    handover_missed: bool = False

    def holder(self) -> GoalRun:
        """The goal that now owns this goal's run: itself, or the last goal it went to."""
        run = self
        while run.handed_to is not None:
            run = run.handed_to
        return run

    def request_stop(self, cause: StopCause) -> bool:
        """Record the first stop cause; True when the goal's run must now be interrupted (its
        handle stops the run, or stops it at once if it has not started yet)."""
        if self.phase is GoalPhase.ENDED:
            return False
        if self.stop is None:
            self.stop = cause
        self.phase = GoalPhase.STOPPING
        return True


def goal_problem(goal: Act.Goal, max_instruction_chars: int) -> str | None:
    """Why a goal request must be rejected, or None."""
    if problem := instruction_problem(goal.instruction, max_instruction_chars):
        return problem
    if not math.isfinite(goal.max_seconds) or goal.max_seconds <= 0:
        return f"max_seconds is {goal.max_seconds}; expected a finite number > 0"
    if goal.max_actions < 0:
        return f"max_actions is {goal.max_actions}; expected >= 0 (0 = bounded by max_seconds)"
    return None
