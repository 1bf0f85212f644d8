"""Playhead: which command is due, at what speed, the seam, and the refusal near max_seconds."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Optional

import pytest

from sequence_ai._model.catalogue import find_model, models
from sequence_ai._playback.playhead import HANDOVER_BLEND, Playhead, Playing
from sequence_ai._playback.speed import MAX_SPEED_CHANGE
from sequence_ai._run.control_loop import playhead_for

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
    assert head.rest_deadline is not None and head.ramp_s > 0
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


def test_a_hand_over_shifts_the_joints_onto_the_last_command_but_never_the_gripper(gw) -> None:
    # cosmos3 declares no gripper exception: its gripper column (dim 7, 0 open, 1 closed) comes
    # from its state layout. Shifted like a joint, a closed gripper (1) over a plan that starts
    # open (0) and closes would be commanded up to 2.
    cosmos3 = find_model(models("act", base_url=gw.url), "cosmos3-edge-policy-droid")
    assert cosmos3 is not None
    # What playhead_for reads of a session and a run's options: the playback speed, the seam.
    session = SimpleNamespace(defaults=SimpleNamespace(playback_speed=1.0))
    options = SimpleNamespace(playback_speed=None, smooth_seam=0, seam_limits=None)
    head = playhead_for(session, options, cosmos3, PERIOD)  # type: ignore[arg-type]
    arrived = [[0.1] * 7 + [1.0] for _ in range(16)]
    first = Playing(number=1, sequence=0, origin=0.0, captured=0.0, horizon_end=16.0, speed=1.0,
                    instruction="pick up the cup")
    assert head.install(arrived, first, due=0.0, horizon=16, absolute=True, chunk_rows=16,
                        deadline=None, at_most=100) is not None
    head.played(head.next_command())
    reaching = [[0.5] * 7 + [0.0 if i < 3 else 1.0] for i in range(16)]
    second = Playing(number=2, sequence=1, origin=0.0, captured=0.0, horizon_end=16.0, speed=1.0,
                     instruction="put the cup down")
    installed = head.install(reaching, second, due=0.0, horizon=16, absolute=True,
                             chunk_rows=16, deadline=None, at_most=100)
    assert installed is not None and installed.seam_jump == pytest.approx(0.4)
    rows = [command.row for command in head.tail]
    # The plan's own gripper, row for row (then its rest ramp's, still closed).
    assert [row[7] for row in rows[: len(reaching)]] == [row[7] for row in reaching]
    assert {row[7] for row in rows} == {0.0, 1.0}
    # The joints start from the last command and fade onto the new plan.
    assert 0.1 < rows[0][0] < 0.5 and rows[0][0] == pytest.approx(0.1 + 0.4 / (HANDOVER_BLEND + 1))
