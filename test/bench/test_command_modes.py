"""The command-modes bench's analysis on made-up recordings: seams, stops, intervals."""

from __future__ import annotations

import numpy as np
import pytest

from bench.command_modes import (
    ArmMessage,
    intervals,
    rms_jerk,
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


def test_the_arm_is_still_from_the_sample_after_its_last_motion() -> None:
    t = np.array([0.0, 0.01, 0.02, 0.03, 0.04])
    v = np.zeros((5, 7))
    v[1, 0] = 0.5
    assert still_from(t, v, (0.0, 0.04)) == 0.02
    v[4, 0] = 0.5
    assert still_from(t, v, (0.0, 0.04)) is None
