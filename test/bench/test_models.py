"""The models bench's analysis on made-up recordings: holds of each command type, states."""

from __future__ import annotations

import math

from bench.command_modes import ArmMessage
from bench.models import POSE, STEP, TWIST, cartesian_rows, goal_stamps, hold_at, state_at

WINDOW = (1.0, 3.0)


def test_the_state_at_a_time_is_the_newest_before_it_else_the_first_after() -> None:
    samples = [(0.5, [0.1]), (1.0, [0.2]), (1.5, [0.3])]
    assert state_at(samples, 1.2) == [0.2]
    assert state_at(samples, 0.1) == [0.1]
    assert state_at([], 1.0) is None


def test_an_ee_delta_hold_is_the_first_zero_twist_after_the_cancel() -> None:
    arm = [
        ArmMessage(0.9, (0.0,) * 6, still=True),  # before the cancel
        ArmMessage(1.02, (0.3, 0.0, 0.0, 0.0, 0.0, 0.0)),
        ArmMessage(1.05, (0.0,) * 6, still=True),
        ArmMessage(2.05, (0.0,) * 6, still=True),
    ]
    assert hold_at(TWIST, arm, WINDOW) == 1.05
    assert hold_at(TWIST, arm[:2], WINDOW) is None


def test_a_joint_hold_is_the_first_command_every_later_one_repeats() -> None:
    arm = [ArmMessage(1.02, (0.1,)), ArmMessage(1.06, (0.15,)), ArmMessage(2.0, (0.15,))]
    assert hold_at(STEP, arm, WINDOW) == 1.06


def test_an_ee_absolute_hold_is_a_repeated_target_at_the_measured_pose() -> None:
    measured = [(1.0, [0.5, 0.0, 0.4]), (1.07, [0.501, 0.0, 0.4])]
    target = (0.52, 0.0, 0.4, 1.0, 0.0, 0.0, 0.0)
    at_pose = (0.501, 0.0, 0.4, 1.0, 0.0, 0.0, 0.0)
    arm = [ArmMessage(1.03, target), ArmMessage(1.08, at_pose), ArmMessage(2.0, at_pose)]
    assert hold_at(POSE, arm, WINDOW, measured) == 1.08
    # A target away from the measured pose is no hold, even when nothing follows it.
    assert hold_at(POSE, arm[:1], WINDOW, measured) is None


def test_goal_stamps_keep_the_commands_inside_the_window() -> None:
    arm = [ArmMessage(t, (0.0,)) for t in (0.5, 1.0, 2.0, 3.5)]
    assert goal_stamps(arm, WINDOW) == [1.0, 2.0]


def test_the_cost_loop_rows_stay_in_the_simulated_workspace_at_a_moderate_speed() -> None:
    for space in ("ee_delta", "ee_absolute"):
        for k in range(100):
            pose, row = cartesian_rows(space, k)
            assert 0.2 < pose[0] < 0.8 and -0.45 < pose[1] < 0.45 and len(row) == 7
            if space == "ee_absolute":
                assert math.dist(row[:3], pose[:3]) < 0.5 / 20  # max_linear_speed at 20 Hz
            else:
                assert max(abs(v) for v in row[:6]) <= 1.0
