"""The goal state machine: every stop cause and run ending maps to exactly one row."""

from __future__ import annotations

import pytest

from sequence_ai_ros.goals import (
    ENDING_BY_CAUSE,
    ENDING_BY_RUN,
    GoalEnding,
    GoalPhase,
    GoalRun,
    ResultReason,
    StopCause,
    Terminal,
    goal_ending,
)


class _Handle:
    """Only identity matters to GoalRun's book-keeping."""


def test_every_stop_cause_and_run_ending_has_an_ending() -> None:
    assert set(ENDING_BY_CAUSE) == set(StopCause)
    assert set(ENDING_BY_RUN) == {
        r.value for r in ResultReason if r is not ResultReason.PREEMPTED
    }
    reached = set(ENDING_BY_CAUSE.values()) | set(ENDING_BY_RUN.values())
    assert reached == set(GoalEnding)


@pytest.mark.parametrize(
    ("cause", "run_ending", "terminal", "reason"),
    [
        (None, "completed", Terminal.SUCCEEDED, "completed"),
        (None, "timeout", Terminal.SUCCEEDED, "timeout"),
        (None, "validate", Terminal.ABORTED, "validate"),
        (None, "raised", Terminal.ABORTED, "raised"),
        # A stop cause decides, whatever the run reported.
        (StopCause.CANCELED, "completed", Terminal.CANCELED, "interrupted"),
        (StopCause.PREEMPTED, "interrupted", Terminal.ABORTED, "preempted"),
        (StopCause.DEACTIVATED, "raised", Terminal.ABORTED, "interrupted"),
        (StopCause.BUSY, "interrupted", Terminal.ABORTED, "interrupted"),
    ],
)
def test_the_row_of_an_ending(
    cause: StopCause | None, run_ending: str, terminal: Terminal, reason: str
) -> None:
    row = goal_ending(cause, run_ending).value
    assert row.terminal is terminal
    assert row.reason.value == reason


def test_node_stop_messages_name_the_cause() -> None:
    row = GoalEnding.NODE_STOPPED.value
    text = row.message.format(cause=StopCause.DEACTIVATED.value, detail="it never started")
    assert text == "node deactivated; it never started"


def test_a_stop_interrupts_only_a_running_goal_and_the_first_cause_stays() -> None:
    pending = GoalRun(_Handle())  # type: ignore[arg-type]
    assert not pending.request_stop(StopCause.PREEMPTED)
    assert pending.phase is GoalPhase.STOPPING and pending.stop is StopCause.PREEMPTED

    running = GoalRun(_Handle(), phase=GoalPhase.RUNNING)  # type: ignore[arg-type]
    assert running.request_stop(StopCause.CANCELED)
    assert not running.request_stop(StopCause.SHUT_DOWN)
    assert running.phase is GoalPhase.STOPPING and running.stop is StopCause.CANCELED

    ended = GoalRun(_Handle(), phase=GoalPhase.ENDED)  # type: ignore[arg-type]
    assert not ended.request_stop(StopCause.CANCELED)
    assert ended.stop is None
