"""RunOutcome: every field of the spec, and a one-line repr."""

from __future__ import annotations

import dataclasses

from sequence_ai import RunOutcome


def test_fields_and_defaults() -> None:
    outcome = RunOutcome(actions=3, chunks=1, elapsed_s=0.2)
    assert {f.name for f in dataclasses.fields(outcome)} == {
        "actions", "chunks", "elapsed_s", "underruns", "underrun_s", "stopped_early", "reason",
        "max_seam_jump", "action_space", "instruction_swaps", "max_instruction_lag_s",
        "observe_s",
    }
    assert (outcome.underruns, outcome.underrun_s, outcome.stopped_early) == (0, 0.0, False)
    assert outcome.reason == "completed" and outcome.max_seam_jump is None


def test_repr_names_only_what_happened() -> None:
    assert repr(RunOutcome(250, 32, 16.84)) == (
        "RunOutcome(250 actions over 32 chunks in 16.8s, completed)"
    )
    busy = RunOutcome(
        40, 5, 3.0, underruns=2, underrun_s=0.4, stopped_early=True, reason="interrupted",
        instruction_swaps=1, max_instruction_lag_s=0.25,
    )
    assert repr(busy) == (
        "RunOutcome(40 actions over 5 chunks in 3.0s, 2 underruns (0.40s), "
        "1 instruction swaps (max lag 0.25s), interrupted)"
    )
