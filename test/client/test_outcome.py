"""RunOutcome: every field of the spec, and a one-line repr."""

from __future__ import annotations

import dataclasses

import pytest

from sequence_ai import Ending, RunOutcome


def test_fields_and_defaults() -> None:
    outcome = RunOutcome(actions=3, chunks=1, elapsed_s=0.2)
    assert {f.name for f in dataclasses.fields(outcome)} == {
        "actions", "chunks", "elapsed_s", "underruns", "underrun_s", "ending", "error",
        "max_seam_jump", "action_space", "instruction_swaps", "max_instruction_lag_s",
        "observe_s", "requests", "discarded", "connections", "request_bytes", "max_in_flight",
        "motion_s", "rows_beyond_horizon", "no_fresh_command_s", "max_gap_s", "speed_min",
        "speed_mean", "observation_age_s", "observation_age_p95_s",
    }
    assert outcome.requests_per_s is None
    assert RunOutcome(30, 4, 2.0, requests=6, motion_s=1.5).requests_per_s == 4.0
    assert (outcome.underruns, outcome.underrun_s, outcome.stopped_early) == (0, 0.0, False)
    assert outcome.reason == "completed" and outcome.max_seam_jump is None
    assert outcome.ending is Ending.COMPLETED and outcome.error is None


def test_repr_names_only_what_happened() -> None:
    assert repr(RunOutcome(250, 32, 16.84)) == (
        "RunOutcome(250 actions over 32 chunks in 16.8s, completed)"
    )
    busy = RunOutcome(
        40, 5, 3.0, underruns=2, underrun_s=0.4, ending=Ending.INTERRUPTED,
        instruction_swaps=1, max_instruction_lag_s=0.25,
    )
    assert repr(busy) == (
        "RunOutcome(40 actions over 5 chunks in 3.0s, 2 underruns (0.40s), "
        "1 instruction swaps (max lag 0.25s), interrupted)"
    )
    costly = RunOutcome(
        120, 20, 8.5, requests=24, motion_s=8.0, max_in_flight=2, speed_min=0.5, speed_mean=0.75
    )
    assert repr(costly) == (
        "RunOutcome(120 actions over 20 chunks in 8.5s, 3.0 requests/s with up to 2 in flight, "
        "speed min 0.50 mean 0.75, completed)"
    )


def test_reason_is_the_ending_or_the_raised_class() -> None:
    for ending in Ending:
        error = "Unavailable" if ending is Ending.RAISED else None
        outcome = RunOutcome(1, 1, 0.1, ending=ending, error=error)
        assert outcome.stopped_early == (ending is not Ending.COMPLETED)
        expected = "raised:Unavailable" if ending is Ending.RAISED else ending.value
        assert outcome.reason == expected and outcome.ending == expected.split(":")[0]


def test_an_error_belongs_exactly_to_a_raised_ending() -> None:
    with pytest.raises(ValueError, match="error"):
        RunOutcome(1, 1, 0.1, ending=Ending.RAISED)
    with pytest.raises(ValueError, match="error"):
        RunOutcome(1, 1, 0.1, ending=Ending.TIMEOUT, error="Unavailable")
