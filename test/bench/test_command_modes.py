"""The command-modes bench's analysis on made-up recordings: seams, stops, intervals."""

from __future__ import annotations

import numpy as np
import pytest

from bench.command_modes import (
    ArmMessage,
    intervals,
    node_stop,
    rms_jerk,
    seam_discontinuities,
    seam_jumps,
    still_from,
    stop_command,
)

PERIOD = 0.1


def _ramp(turn_s: float | None, tick: float = 0.01) -> tuple[np.ndarray, np.ndarray]:
    """Samples of joint 3 moving at 0.5 rad/s, reversing to -0.5 at `turn_s` (if given)."""
    t = np.arange(0.0, 2.0, tick)
    q = np.zeros((len(t), 7))
    if turn_s is None:
        q[:, 2] = 0.5 * t
    else:
        q[:, 2] = np.where(t <= turn_s, 0.5 * t, 0.5 * turn_s - 0.5 * (t - turn_s))
    return t, q


def test_a_seam_where_the_velocity_changes_measures_the_change_over_a_period() -> None:
    t, q = _ramp(1.0)
    (jump,) = seam_jumps(t, q, [1.0], PERIOD)
    assert jump == pytest.approx(1.0, abs=1e-6)


def test_a_seam_on_a_steady_motion_measures_nothing_and_edges_are_skipped() -> None:
    t, q = _ramp(None)
    assert seam_jumps(t, q, [0.05, 1.0, 1.95], PERIOD) == [pytest.approx(0.0, abs=1e-9)]


def test_a_steady_acceleration_is_no_discontinuity_but_a_velocity_step_is() -> None:
    t = np.arange(0.0, 2.0, 0.01)
    q = np.zeros((len(t), 7))
    q[:, 2] = 0.5 * 3.0 * t**2  # 3 rad/s² throughout
    (jump,) = seam_jumps(t, q, [1.0], PERIOD)
    (cut,) = seam_discontinuities(t, q, [1.0], PERIOD)
    assert jump == pytest.approx(0.3, abs=0.01)
    assert cut == pytest.approx(0.0, abs=0.01)
    t, q = _ramp(1.0)
    (cut,) = seam_discontinuities(t, q, [1.0, 1.95], PERIOD)
    assert cut == pytest.approx(1.0, abs=1e-6)


def test_rms_jerk_is_zero_for_a_constant_acceleration() -> None:
    t = np.arange(0.0, 1.0, 0.01)
    v = np.outer(2.0 * t, np.ones(7))
    assert rms_jerk(t, v) == pytest.approx(0.0, abs=1e-6)


def test_intervals_drop_the_ends_and_those_spanning_an_underrun() -> None:
    stamps = [0.0, 0.1, 0.2, 0.5, 0.6, 0.7]
    assert intervals(stamps) == pytest.approx([0.1, 0.3, 0.1])
    assert intervals(stamps, underruns=[0.45]) == pytest.approx([0.1, 0.1])


def test_the_stop_is_the_first_command_every_later_one_repeats() -> None:
    arm = [ArmMessage(1.0, (0.1,)), ArmMessage(1.05, (0.2,)), ArmMessage(1.06, (0.15,)),
           ArmMessage(2.0, (0.15,))]
    assert stop_command(arm, (1.01, 3.0)) == 1.06
    assert stop_command(arm[:2], (1.01, 3.0)) == 1.05


def test_in_chunk_mode_only_a_still_trajectory_stops_the_arm() -> None:
    moving = ArmMessage(1.05, (0.1, 0.2, 1.0, 1.0), trajectory=True)
    still = ArmMessage(1.07, (0.15, 0.0), trajectory=True, still=True)
    assert stop_command([moving], (1.0, 3.0)) is None
    assert stop_command([moving, still], (1.0, 3.0)) == 1.07


def test_a_command_timer_record_becomes_an_arm_message() -> None:
    step = ArmMessage.of({"t": 1.5, "values": [0.1, 0.2]})
    assert step == ArmMessage(1.5, (0.1, 0.2))
    record = {"t": 2.0, "values": [0.3, 0.0], "trajectory": True, "still": True,
              "first_point": 2.1}
    assert ArmMessage.of(record) == ArmMessage(2.0, (0.3, 0.0), True, True, 2.1)


def test_the_node_stop_runs_from_its_cancel_to_its_next_hold() -> None:
    cancels, holds = [1.2, 5.2], [0.5, 1.25, 1.9, 5.4]
    assert node_stop(cancels, holds, (1.0, 3.0)) == pytest.approx(0.05)
    assert node_stop(cancels, [0.5], (1.0, 3.0)) == float("inf")
    assert np.isnan(node_stop([], holds, (1.0, 3.0)))


def test_the_arm_is_still_from_the_sample_after_its_last_motion() -> None:
    t = np.array([0.0, 0.01, 0.02, 0.03, 0.04])
    v = np.zeros((5, 7))
    v[1, 0] = 0.5
    assert still_from(t, v, (0.0, 0.04)) == 0.02
    v[4, 0] = 0.5
    assert still_from(t, v, (0.0, 0.04)) is None
