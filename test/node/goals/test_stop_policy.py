"""The goal state machine: every stop cause and run ending maps to exactly one row."""

from __future__ import annotations

import pytest

from sequence_ai import Ending
from sequence_ai_ros.core.command_kinds import CommandMode, Interface
from sequence_ai_ros.core.freshness import StaleObservation
from sequence_ai_ros.goals.goal_state import GoalPhase, GoalRun
from sequence_ai_ros.goals.stop_policy import (
    ENDING_BY_CAUSE,
    ENDING_BY_RUN,
    ArmCommand,
    GoalEnding,
    StopCause,
    Terminal,
    arm_command,
    goal_ending,
)


class _Handle:
    """Only identity matters to GoalRun's book-keeping."""


def test_every_stop_cause_and_run_ending_has_an_ending() -> None:
    assert set(ENDING_BY_CAUSE) == set(StopCause)
    assert set(ENDING_BY_RUN) == set(Ending)
    # Each run ending reaches the planner under its own name.
    assert {e.value for e in Ending} == {
        ENDING_BY_RUN[e].value.reason.value for e in Ending
    }
    # A stale input is the one ending named by the error the run raised.
    reached = set(ENDING_BY_CAUSE.values()) | set(ENDING_BY_RUN.values())
    assert reached | {GoalEnding.STALE_INPUT} == set(GoalEnding)


@pytest.mark.parametrize(
    ("cause", "run_ending", "terminal", "reason"),
    [
        (None, Ending.COMPLETED, Terminal.SUCCEEDED, "completed"),
        (None, Ending.TIMEOUT, Terminal.SUCCEEDED, "timeout"),
        (None, Ending.VALIDATE, Terminal.ABORTED, "validate"),
        (None, Ending.RAISED, Terminal.ABORTED, "raised"),
        # A stop cause decides, whatever the run reported.
        (StopCause.CANCELED, Ending.COMPLETED, Terminal.CANCELED, "interrupted"),
        (StopCause.PREEMPTED, Ending.INTERRUPTED, Terminal.ABORTED, "preempted"),
        # A hand-over ends the goal, not its motion: succeeded, whatever the run reports.
        (StopCause.HANDED_OVER, Ending.COMPLETED, Terminal.SUCCEEDED, "handed_over"),
        (StopCause.DEACTIVATED, Ending.RAISED, Terminal.ABORTED, "interrupted"),
        (StopCause.BUSY, Ending.INTERRUPTED, Terminal.ABORTED, "interrupted"),
        # Motion blocked (motion_enable.py): its own reason, whatever the run reported.
        (StopCause.DISABLED, Ending.INTERRUPTED, Terminal.ABORTED, "disabled"),
        (StopCause.DEADMAN, Ending.COMPLETED, Terminal.ABORTED, "deadman"),
    ],
)
def test_the_row_of_an_ending(
    cause: StopCause | None, run_ending: Ending, terminal: Terminal, reason: str
) -> None:
    row = goal_ending(cause, run_ending).value
    assert row.terminal is terminal
    assert row.reason.value == reason


def test_a_stale_input_is_its_own_ending_not_a_class_name() -> None:
    stale = StaleObservation("camera wrist_left: no image received yet")
    row = goal_ending(None, Ending.RAISED, stale).value
    assert (row.terminal, row.reason.value) == (Terminal.ABORTED, "stale_input")
    # Any other error stays raised:<Class>; a stop cause still decides first.
    assert goal_ending(None, Ending.RAISED, ValueError("x")) is GoalEnding.RAISED
    assert goal_ending(StopCause.CANCELED, Ending.RAISED, stale) is GoalEnding.CANCELED


@pytest.mark.parametrize(
    ("cause", "interrupted", "interface", "mode", "between", "command"),
    [
        # Preempted mid-run, position arm stepping, no hold between goals: left at its target.
        (StopCause.PREEMPTED, True, Interface.POSITION, CommandMode.STEP, False, ArmCommand.LEAVE),
        (StopCause.PREEMPTED, True, Interface.POSITION, CommandMode.STEP, True, ArmCommand.HOLD),
        (StopCause.PREEMPTED, True, Interface.VELOCITY, CommandMode.STEP, False, ArmCommand.HOLD),
        (StopCause.PREEMPTED, True, Interface.POSITION, CommandMode.CHUNK, False, ArmCommand.HOLD),
        # A run that did not call hold (completed, never started) is always held.
        (StopCause.PREEMPTED, False, Interface.POSITION, CommandMode.STEP, False, ArmCommand.HOLD),
        (StopCause.CANCELED, True, Interface.POSITION, CommandMode.STEP, False, ArmCommand.HOLD),
        (None, True, Interface.POSITION, CommandMode.STEP, False, ArmCommand.HOLD),
        (None, False, Interface.VELOCITY, CommandMode.STEP, False, ArmCommand.HOLD),
        # Motion blocked: held, whatever hold_between_goals says.
        (StopCause.DISABLED, True, Interface.POSITION, CommandMode.STEP, False, ArmCommand.HOLD),
        (StopCause.DEADMAN, True, Interface.POSITION, CommandMode.STEP, False, ArmCommand.HOLD),
    ],
)
def test_one_function_decides_the_arm_at_every_end(
    cause: StopCause | None, interrupted: bool, interface: Interface, mode: CommandMode,
    between: bool, command: ArmCommand,
) -> None:
    assert arm_command(
        cause, interrupted=interrupted, interface=interface, mode=mode,
        hold_between_goals=between,
    ) is command


def test_node_stop_messages_name_the_cause() -> None:
    row = GoalEnding.NODE_STOPPED.value
    text = row.message.format(cause=StopCause.DEACTIVATED.value, detail="it never started")
    assert text == "node deactivated; it never started"


def test_a_stop_keeps_the_first_cause_and_never_reopens_an_ended_goal() -> None:
    pending = GoalRun(_Handle())  # type: ignore[arg-type]
    assert pending.request_stop(StopCause.PREEMPTED)
    assert pending.phase is GoalPhase.STOPPING and pending.stop is StopCause.PREEMPTED

    running = GoalRun(_Handle(), phase=GoalPhase.RUNNING)  # type: ignore[arg-type]
    assert running.request_stop(StopCause.CANCELED)
    assert running.request_stop(StopCause.SHUT_DOWN)
    assert running.phase is GoalPhase.STOPPING and running.stop is StopCause.CANCELED

    ended = GoalRun(_Handle(), phase=GoalPhase.ENDED)  # type: ignore[arg-type]
    assert not ended.request_stop(StopCause.CANCELED)
    assert ended.stop is None


def test_a_take_over_shares_the_run_and_passes_it_on() -> None:
    from sequence_ai_ros.goals.takeover import take_over

    first = GoalRun(_Handle(), phase=GoalPhase.RUNNING)  # type: ignore[arg-type]
    first.sent_chunk = 4
    second = take_over(first, _Handle())  # type: ignore[arg-type]
    # The same interrupt: a cancel of the new goal stops the one run.
    assert second.call is first.call
    assert second.phase is GoalPhase.RUNNING and second.ending and second.sent_chunk == 4
    assert first.stop is StopCause.HANDED_OVER and first.phase is GoalPhase.STOPPING
    third = take_over(second, _Handle())  # type: ignore[arg-type]
    assert first.holder() is third and second.holder() is third and third.holder() is third
