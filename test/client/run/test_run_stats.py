"""RunStats: the outcome and the progress computed from a run's events alone."""

from __future__ import annotations

import pytest

from sequence_ai import events
from sequence_ai._run.run_stats import RunStats
from sequence_ai.outcome import Ending
from sequence_ai.types import ActionChunk, Prediction

PREDICTION = Prediction(id="p", model="m", action_chunk=ActionChunk(
    steps=[[0.0]], robot="droid", action_space="joint", action_dim=1,
    control_frequency_hz=10.0, covers_seconds=0.1,
))


def played(t: float, action: int, *, speed: float = 1.0, beyond: bool = False,
           age: float = 0.1) -> events.RowPlayed:
    return events.RowPlayed(time=t, action=action, row=(0.0,), chunk=1, speed=speed,
                            beyond_horizon=beyond, observation_age_s=age)


def stats_of(sent: list[events.RunEvent], connections: list[int]) -> RunStats:
    stats = RunStats(lambda: connections[0])
    for event in sent:
        stats.on_event(event)
    return stats


def test_the_outcome_counts_what_the_events_say() -> None:
    connections = [3]
    stats = stats_of([
        events.RunStarted(time=10.0, period_s=0.1, max_in_flight=2),
        events.ObservationTaken(time=10.0, sequence=0, observe_s=0.02),
        events.ObservationSent(time=10.0, sequence=0),
        events.AnswerArrived(time=10.3, sequence=0, request_bytes=1000, in_flight=0),
        events.ChunkInstalled(time=10.3, prediction=PREDICTION, number=1, sequence=0,
                              speed=1.0, action_space="joint", seam_jump=None, commands=8),
        played(10.3, 1, age=0.3),
        played(10.4, 2, beyond=True, age=0.4),
        # A 0.3 s gap: 0.2 s without a fresh command beyond its first period.
        played(10.7, 3, speed=0.5, age=0.7),
        events.InstructionSwapped(time=10.7, lag_s=0.25),
        events.AnswerArrived(time=10.8, sequence=1, request_bytes=900, in_flight=0),
        events.ChunkDiscarded(time=10.8, sequence=1, reason=events.DiscardReason.OVERTAKEN),
        events.ChunkRefused(time=10.9, sequence=2),
        events.UnderrunBegan(time=11.0),
        events.UnderrunEnded(time=11.2, waited_s=0.2),
        events.ChunkInstalled(time=11.2, prediction=PREDICTION, number=2, sequence=3,
                              speed=0.75, action_space="joint", seam_jump=0.05, commands=8),
    ], connections)
    connections[0] = 5
    outcome = stats.outcome(Ending.INTERRUPTED, None)
    assert (outcome.actions, outcome.chunks, outcome.requests) == (3, 2, 1)
    assert outcome.discarded == 2 and outcome.request_bytes == 1900
    assert outcome.connections == 2 and outcome.max_in_flight == 2
    assert outcome.underruns == 1 and outcome.underrun_s == pytest.approx(0.2)
    assert outcome.instruction_swaps == 1 and outcome.max_instruction_lag_s == 0.25
    assert outcome.motion_s == pytest.approx(0.5) and outcome.max_gap_s == pytest.approx(0.3)
    assert outcome.no_fresh_command_s == pytest.approx(0.2)
    assert outcome.rows_beyond_horizon == 1 and outcome.max_seam_jump == 0.05
    assert outcome.speed_min == 0.5 and outcome.speed_mean == pytest.approx(2.5 / 3)
    assert outcome.observation_age_s == 0.4 and outcome.observation_age_p95_s == 0.7
    assert outcome.observe_s == pytest.approx(0.02) and outcome.reason == "interrupted"
    progress = stats.progress()
    assert (progress.actions, progress.chunks, progress.discarded, progress.speed) == (
        3, 2, 2, 0.75)


def test_a_raised_run_names_the_error_class() -> None:
    stats = stats_of([events.RunStarted(time=0.0, period_s=0.1, max_in_flight=1)], [0])
    outcome = stats.outcome(Ending.RAISED, ValueError("bad row"))
    assert outcome.reason == "raised:ValueError" and outcome.actions == 0
    assert outcome.speed_min is None and outcome.observation_age_s is None


def test_progress_in_flight_follows_requests_and_answers() -> None:
    stats = stats_of([events.RequestStarted(time=0.0, in_flight=1),
                      events.RequestStarted(time=0.1, in_flight=2)], [0])
    assert stats.progress().in_flight == 2
    stats.on_event(events.AnswerArrived(time=0.2, sequence=0, request_bytes=0, in_flight=1))
    assert stats.progress().in_flight == 1
