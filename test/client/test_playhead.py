"""Playhead: which command is due, at what speed, the seam, and the refusal near max_seconds."""

from __future__ import annotations

from typing import Optional

import pytest

from sequence_ai.playhead import Playhead, Playing
from sequence_ai.speed import MAX_SPEED_CHANGE

PERIOD = 0.1


def rows(n: int, base: float = 0.0) -> list[list[float]]:
    return [[base + 0.01 * i, 0.0] for i in range(n)]


def playing(number: int = 1, *, speed: float = 1.0, due: float = 0.0, horizon: int = 8,
            sequence: int = 0) -> Playing:
    return Playing(number=number, sequence=sequence, origin=0.0, captured=0.0,
                   horizon_end=due + horizon, speed=speed)


def install(head: Playhead, chunk: list[list[float]], *, due: float = 0.0,
            deadline: Optional[float] = None, speed: float = 1.0, number: int = 1):
    return head.install(chunk, playing(number, speed=speed, due=due), due=due, horizon=8,
                        absolute=True, chunk_rows=len(chunk), deadline=deadline, at_most=100)


def test_a_chunk_plays_from_its_due_row() -> None:
    head = Playhead(PERIOD, 1.0, [], smooth_seam=0)
    chunk = rows(16)
    installed = install(head, chunk, due=3.0)
    assert installed is not None and installed.seam_jump is None
    assert head.next_command().row == chunk[3]
    assert head.playing is not None and head.playing.number == 1


def test_the_seam_jump_is_measured_before_blending() -> None:
    head = Playhead(PERIOD, 1.0, [], smooth_seam=2)
    install(head, rows(16))
    head.played(head.next_command())
    installed = install(head, rows(16, base=0.5), number=2)
    assert installed is not None and installed.seam_jump == pytest.approx(0.5)
    # Blended: the first command lies between the last row and the new chunk's first.
    assert 0.0 < head.next_command().row[0] < 0.5


def test_a_chunk_that_cannot_come_to_rest_by_the_deadline_is_refused_once_resting() -> None:
    head = Playhead(PERIOD, 1.0, [], smooth_seam=0)
    first_due = head.pacer.upcoming(PERIOD)
    # Comes to rest by a deadline 1 s away: the tail rests for it.
    assert install(head, rows(16), deadline=first_due + 1.0) is not None
    assert head.resting_for_deadline and head.ramp_s > 0
    assert install(head, rows(16), deadline=first_due + 0.2, number=2) is None
    assert head.playing is not None and head.playing.number == 1


def test_auto_speed_changes_by_at_most_the_limit_per_chunk() -> None:
    head = Playhead(PERIOD, "auto", [], smooth_seam=0)
    # No chunk yet: straight to the target the latency sustains.
    slow = head.speed_for(16, latency_s=2.0, latency_high_s=4.0, in_flight=1)
    assert slow == 0.5
    install(head, rows(16), speed=slow)
    assert head.speed_for(16, latency_s=None, latency_high_s=None, in_flight=1) == (
        pytest.approx(0.5 + MAX_SPEED_CHANGE))


def test_a_fixed_speed_is_kept() -> None:
    head = Playhead(PERIOD, 0.75, [], smooth_seam=0)
    assert head.speed == 0.75
    assert head.speed_for(16, latency_s=5.0, latency_high_s=9.0, in_flight=1) == 0.75


def test_horizon_left_counts_commands_until_the_open_loop_horizon() -> None:
    head = Playhead(PERIOD, 1.0, [], smooth_seam=0)
    install(head, rows(16))
    assert head.horizon_left(0.0) == 8
    position = head.played(head.next_command())
    assert head.horizon_left(position) == 7
