"""Results of goals that end outside a run still come from the stop policy's rows."""

from __future__ import annotations

import math

import pytest

from sequence_ai_ros.goals.results import unstarted
from sequence_ai_ros.goals.stop_policy import ENDING_BY_CAUSE, NEVER_STARTED, StopCause


@pytest.mark.parametrize("cause", list(StopCause))
def test_an_unstarted_goal_ends_with_its_causes_row(cause: StopCause) -> None:
    outcome = unstarted(cause)
    row = ENDING_BY_CAUSE[cause].value
    assert outcome.terminal is row.terminal
    assert outcome.result.reason == row.reason.value
    assert outcome.result.message == row.message.format(detail=NEVER_STARTED, cause=cause.value)
    assert outcome.result.actions == 0 and math.isnan(outcome.result.max_seam_jump)


def test_a_goal_the_node_deactivated_before_it_started_is_aborted_as_interrupted() -> None:
    outcome = unstarted(StopCause.DEACTIVATED)
    assert (outcome.terminal.value, outcome.result.reason) == ("aborted", "interrupted")
    assert outcome.result.stopped_early
    assert outcome.result.message == "node deactivated; it never started"
