"""A planned task's trial result from its steps' act results: counts added, the trial's own
time, and the reason of the first fault, else of the last step."""

from __future__ import annotations

import math

import pytest

pytest.importorskip("sequence_ai_interfaces")

from sequence_ai_interfaces.action import Act  # noqa: E402
from sequence_ai_lab.evaluation.planned import combined, is_fault  # noqa: E402


def _step(reason: str, actions: int, requests: int, underruns: int = 0,
          jump: float = math.nan) -> Act.Result:
    result = Act.Result()
    result.reason, result.actions, result.requests = reason, actions, requests
    result.underruns, result.max_seam_jump = underruns, jump
    result.chunks, result.elapsed_s = requests, 4.0
    return result


def test_counts_add_up_and_the_last_steps_reason_stands() -> None:
    total = combined([_step("handed_over", 60, 12, jump=0.02), _step("handed_over", 70, 13),
                      _step("interrupted", 40, 8, underruns=1, jump=0.05)], 17.5)
    assert (total.actions, total.requests, total.chunks, total.underruns) == (170, 33, 33, 1)
    assert total.reason == "interrupted" and total.elapsed_s == 17.5
    assert total.max_seam_jump == pytest.approx(0.05)
    assert math.isnan(total.requests_per_s)


def test_a_faulted_step_decides_the_reason_even_when_later_steps_ran() -> None:
    total = combined([_step("handed_over", 60, 12), _step("stale_input", 3, 1),
                      _step("timeout", 100, 20)], 30.0)
    assert total.reason == "stale_input" and is_fault(total.reason)
    assert is_fault("raised:Unavailable") and not is_fault("handed_over")


def test_no_step_sent_is_said() -> None:
    total = combined([], 2.0)
    assert total.reason == "no step was sent" and total.actions == 0
