"""The stop policy: every way an `act` goal ends, and what the arm is commanded then.

Every reason to stop is a named `GoalEnding` — cancel (`CANCELED`), preemption (`PREEMPTED`),
a hand-over to a newer goal (`HANDED_OVER`: the goal ends, its run and the arm do not stop),
stale input (`STALE_INPUT`), a refused step (`VALIDATE`), a service or node error (`RAISED`),
the deadline (`TIMEOUT`), deactivate or shutdown (`NODE_STOPPED`), a stuck previous goal
(`BUSY`), the enable switch turned off (`DISABLED`), the heartbeat deadman run out
(`DEADMAN`) — with the goal status, result reason and message it reaches the planner with.
`goal_ending` picks the ending, `arm_command` what the arm is commanded; nothing else decides
either. docs/architecture.md ("stop policy") has the table.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass

from sequence_ai import Ending
from sequence_ai_ros.core.command_kinds import CommandMode, Interface
from sequence_ai_ros.core.freshness import StaleObservation

__all__ = [
    "ENDING_BY_CAUSE",
    "ENDING_BY_RUN",
    "NEVER_STARTED",
    "PREEMPT_WAIT_S",
    "ArmCommand",
    "EndingRow",
    "GoalEnding",
    "ResultReason",
    "StopCause",
    "Terminal",
    "arm_command",
    "goal_ending",
]

# A preempted run stops within one control period plus one interruptible wait; this bounds
# how long the next goal waits for it before giving up.
PREEMPT_WAIT_S = 10.0
NEVER_STARTED = "it never started"


class StopCause(str, enum.Enum):
    """Why a goal was stopped from outside its run; the value is the message's wording."""

    PREEMPTED = "preempted"
    # A newer goal took its run over (takeover.py): the goal ends, the motion goes on.
    HANDED_OVER = "handed over"
    CANCELED = "canceled"
    DEACTIVATED = "deactivated"
    SHUT_DOWN = "shut down"
    IN_ERROR = "in error"
    BUSY = "busy"
    # motion_enable.py: the enable switch turned off, the heartbeat deadman ran out.
    DISABLED = "disabled"
    DEADMAN = "deadman"
    # Every action client that could have sent it left the graph (end_goal_without_client_s).
    CLIENT_GONE = "client gone"
    # A hand-over arrived as the run ended, too late to run the goal afresh (goals/driving.py).
    LATE_HANDOVER = "late hand-over"


class ResultReason(str, enum.Enum):
    """`Act.Result.reason`; `RAISED` goes on the wire as `raised:<exception class>`."""

    COMPLETED = "completed"
    UNTIL = "until"
    TIMEOUT = "timeout"
    INTERRUPTED = "interrupted"
    VALIDATE = "validate"
    PREEMPTED = "preempted"
    HANDED_OVER = "handed_over"
    STALE_INPUT = "stale_input"
    RAISED = "raised"
    DISABLED = "disabled"
    DEADMAN = "deadman"


class Terminal(enum.Enum):
    """The terminal goal status a goal ends in."""

    SUCCEEDED = "succeeded"
    ABORTED = "aborted"
    CANCELED = "canceled"


@dataclass(frozen=True)
class EndingRow:
    """How one kind of ending reaches the planner: goal status, result reason, message.

    `message` is a template: `{detail}` is what the run reports (its outcome, the error, the
    refused step, or that it never started), `{cause}` the stop cause's wording.
    """

    terminal: Terminal
    reason: ResultReason
    message: str


@enum.unique
class GoalEnding(enum.Enum):
    """Every way a goal ends. Adding one is adding a member with its row."""

    COMPLETED = EndingRow(Terminal.SUCCEEDED, ResultReason.COMPLETED, "{detail}")
    UNTIL = EndingRow(Terminal.SUCCEEDED, ResultReason.UNTIL, "{detail}")
    TIMEOUT = EndingRow(Terminal.SUCCEEDED, ResultReason.TIMEOUT, "{detail}")
    VALIDATE = EndingRow(
        Terminal.ABORTED, ResultReason.VALIDATE, "safety check refused a step: {detail}"
    )
    # A camera frame or joint state missing, too old or unusable: nothing stale is sent or
    # played.
    STALE_INPUT = EndingRow(Terminal.ABORTED, ResultReason.STALE_INPUT, "stale input: {detail}")
    RAISED = EndingRow(Terminal.ABORTED, ResultReason.RAISED, "{detail}")
    # The run reports an interrupt that no stop cause of this goal asked for.
    INTERRUPTED = EndingRow(Terminal.ABORTED, ResultReason.INTERRUPTED, "{detail}")
    CANCELED = EndingRow(Terminal.CANCELED, ResultReason.INTERRUPTED, "canceled; {detail}")
    PREEMPTED = EndingRow(
        Terminal.ABORTED, ResultReason.PREEMPTED, "preempted by a newer goal; {detail}"
    )
    # Not a stop: the newer goal plays on from the rows this one left (no hold).
    HANDED_OVER = EndingRow(
        Terminal.SUCCEEDED, ResultReason.HANDED_OVER,
        "handed over to a newer goal, which goes on with the motion; figures up to the hand-over",
    )
    NODE_STOPPED = EndingRow(Terminal.ABORTED, ResultReason.INTERRUPTED, "node {cause}; {detail}")
    BUSY = EndingRow(
        Terminal.ABORTED,
        ResultReason.INTERRUPTED,
        f"the previous goal did not stop within {PREEMPT_WAIT_S:g} s; {{detail}}",
    )
    # Motion blocked (motion_enable.py) while the goal ran: it stops, held.
    DISABLED = EndingRow(
        Terminal.ABORTED, ResultReason.DISABLED, "motion disabled by ~/enable; {detail}"
    )
    DEADMAN = EndingRow(
        Terminal.ABORTED,
        ResultReason.DEADMAN,
        "no true on the enable topic within enable_timeout_s; {detail}",
    )
    # Not what ROS 2 does (a goal outlives its client): only with end_goal_without_client_s.
    CLIENT_GONE = EndingRow(
        Terminal.ABORTED,
        ResultReason.INTERRUPTED,
        "every action client that could have sent this goal left the ROS graph "
        "(end_goal_without_client_s); {detail}",
    )
    # The run it was to take over ended as it arrived, with less than a control period of its
    # max_seconds left: refused rather than reported done with nothing played.
    LATE_HANDOVER = EndingRow(
        Terminal.ABORTED,
        ResultReason.INTERRUPTED,
        "the running goal ended as this hand-over arrived, and less than a control period of "
        "its max_seconds was left to run it afresh; send it again; {detail}",
    )


# A stop cause decides the ending whatever the run reported; without one, the run's ending does.
ENDING_BY_CAUSE: dict[StopCause, GoalEnding] = {
    StopCause.PREEMPTED: GoalEnding.PREEMPTED,
    StopCause.HANDED_OVER: GoalEnding.HANDED_OVER,
    StopCause.CANCELED: GoalEnding.CANCELED,
    StopCause.DEACTIVATED: GoalEnding.NODE_STOPPED,
    StopCause.SHUT_DOWN: GoalEnding.NODE_STOPPED,
    StopCause.IN_ERROR: GoalEnding.NODE_STOPPED,
    StopCause.BUSY: GoalEnding.BUSY,
    StopCause.DISABLED: GoalEnding.DISABLED,
    StopCause.DEADMAN: GoalEnding.DEADMAN,
    StopCause.CLIENT_GONE: GoalEnding.CLIENT_GONE,
    StopCause.LATE_HANDOVER: GoalEnding.LATE_HANDOVER,
}
ENDING_BY_RUN: dict[Ending, GoalEnding] = {
    Ending.COMPLETED: GoalEnding.COMPLETED,
    Ending.UNTIL: GoalEnding.UNTIL,
    Ending.TIMEOUT: GoalEnding.TIMEOUT,
    Ending.VALIDATE: GoalEnding.VALIDATE,
    Ending.RAISED: GoalEnding.RAISED,
    Ending.INTERRUPTED: GoalEnding.INTERRUPTED,
}


def goal_ending(
    cause: StopCause | None, run_ending: Ending, error: BaseException | None = None
) -> GoalEnding:
    """The ending of a goal from its stop cause (if any), its run's ending and the error the
    run raised (a stale input is its own ending, whichever callback met it)."""
    if cause is not None:
        return ENDING_BY_CAUSE[cause]
    if run_ending is Ending.RAISED and isinstance(error, StaleObservation):
        return GoalEnding.STALE_INPUT
    return ENDING_BY_RUN[run_ending]


class ArmCommand(enum.Enum):
    """What the arm is commanded when a goal's run stops."""

    # Hold at the measured position (a velocity arm: zero velocity).
    HOLD = "hold"
    # Leave a position arm at its last target: still, and the next goal moves on from there.
    LEAVE = "leave"


def arm_command(
    cause: StopCause | None,
    *,
    interrupted: bool,
    interface: Interface,
    mode: CommandMode,
    hold_between_goals: bool,
) -> ArmCommand:
    """The one decision of what the arm does at a goal's end.

    `interrupted`: the run stopped early (the client's `hold`); a run that ended without
    calling it (completed, or never started) is always held, as is every arm whose motion was
    blocked (`DISABLED`, `DEADMAN`). A handed-over goal's run does not stop: nothing is
    commanded at its end (its successor's end decides). Only a preempted position arm in step
    mode with `hold_between_goals` off is left at its last target: a velocity arm never stands
    still on its own, nor an arm playing a chunk's trajectory.
    """
    if (
        interrupted and cause is StopCause.PREEMPTED and not hold_between_goals
        and interface is Interface.POSITION and mode is CommandMode.STEP
    ):
        return ArmCommand.LEAVE
    return ArmCommand.HOLD
