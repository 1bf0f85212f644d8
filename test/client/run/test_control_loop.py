"""Pure parts of the control loop: the playback rate, pacing on absolute deadlines, the seam."""

from __future__ import annotations

import pytest

from sequence_ai._model.catalogue import Model
from sequence_ai._model.controllers import is_absolute_space
from sequence_ai._playback.pacing import Pacer
from sequence_ai._playback.seam import seam_jump, shift_seam
from sequence_ai._requests.session import Session
from sequence_ai._run.control_loop import playback_hz
from sequence_ai._transport.transport import Transport


class FakeClock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_pacing_does_not_add_callback_time_to_the_period() -> None:
    clock = FakeClock()
    pacer = Pacer(clock)
    period = 0.1
    pacer.stamp(period)  # first step handed to act at t=100.0
    clock.now += 0.04  # act, observe for a prefetch and validate took 40 ms
    due = pacer.next_due(period)
    assert due == pytest.approx(100.1)  # not 100.14: the deadline is absolute
    clock.now = due
    pacer.stamp(period)
    clock.now += 0.09
    assert pacer.next_due(period) == pytest.approx(100.2)


def test_pacing_catches_up_a_small_delay_without_drift() -> None:
    clock = FakeClock()
    pacer = Pacer(clock)
    pacer.stamp(0.1)
    due = pacer.next_due(0.1)
    clock.now = due + 0.05  # woke 50 ms late: less than a period
    pacer.stamp(0.1)
    assert pacer.next_due(0.1) == pytest.approx(100.2)


def test_pacing_resyncs_instead_of_bursting_after_a_long_stall() -> None:
    clock = FakeClock()
    pacer = Pacer(clock)
    pacer.stamp(0.1)
    pacer.next_due(0.1)
    clock.now = 100.75  # a 650 ms underrun: six steps late
    pacer.stamp(0.1)
    # The next step is a full period after the late one, not due immediately.
    assert pacer.next_due(0.1) == pytest.approx(100.85)


def test_seam_jump_is_the_largest_per_dimension_change() -> None:
    assert seam_jump([0.0, 1.0, 0.5], [0.1, 0.2, 0.5]) == 0.8
    assert seam_jump([0.0], [0.0, 1.0]) is None
    # A gripper closing at a seam is not a jump of the arm.
    assert seam_jump([0.1, 0.2, 1.0], [0.1, 0.3, 0.0], skip_dims=[2]) == pytest.approx(0.1)


def test_blend_ramps_the_first_rows_and_skips_declared_dims() -> None:
    rows = [[1.0, 1.0], [1.0, 1.0], [1.0, 1.0], [1.0, 1.0]]
    shift_seam(rows, [0.0, 0.0], 3, skip_dims=[1])
    assert [row[0] for row in rows] == [0.25, 0.5, 0.75, 1.0]
    assert [row[1] for row in rows] == [1.0, 1.0, 1.0, 1.0]


def test_only_target_spaces_count_as_absolute() -> None:
    for space in ("joint_absolute", "ee_absolute", "joint_pos", "JOINT_POSITION"):
        assert is_absolute_space(space)
    for space in ("joint_delta", "ee_delta", "joint_velocity", "delta_position"):
        assert not is_absolute_space(space)


def _session(control_hz) -> Session:
    transport = Transport(base_url="http://127.0.0.1:9", api_key="k")
    return Session("accounts/sequences/models/m", transport, validate="off",
                   control_hz=control_hz, startup_timeout_s=0.0, on_warming=None)


def test_playback_rate_is_connects_else_the_catalogues_never_a_chunks() -> None:
    listed = Model(id="accounts/sequences/models/m", control_hz=15.0)
    assert playback_hz(_session(None), listed) == 15.0
    assert playback_hz(_session(30.0), listed) == 30.0
    assert playback_hz(_session(30.0), None) == 30.0
    for model in (None, Model(id="accounts/sequences/models/m")):
        with pytest.raises(ValueError, match="pass control_hz= to sequence_ai.connect"):
            playback_hz(_session(None), model)
