"""The Cartesian simulator's integration step, without ROS: twists like Servo, pose targets at
bounded speed, the command timeout, refused commands."""

from __future__ import annotations

import math

import numpy as np
import pytest

from sequence_ai_lab.robots.sim_cartesian import panda_kinematics as kin
from sequence_ai_lab.robots.sim_cartesian.cartesian_arm import (
    CartesianArm,
    CommandRefused,
    ServoCommandType,
    ServoSettings,
)

DT = 0.01  # the simulator's 100 Hz step
DOWN = np.diag([1.0, -1.0, -1.0])  # the hand pointing down, as at the ready pose


def run(arm: CartesianArm, seconds: float, now: float, command=None, every: int = 1) -> float:
    """Step `arm` for `seconds` from time `now`, calling `command(now)` every `every` steps."""
    for i in range(round(seconds / DT)):
        if command is not None and i % every == 0:
            command(now)
        arm.step(DT, now)
        now += DT
    return now


def test_a_unitless_twist_moves_the_tcp_the_commanded_way_at_the_linear_scale():
    arm = CartesianArm()
    start = arm.tcp()
    run(arm, 0.5, 0.0, lambda now: arm.command_twist([0.0, 0.5, -0.25], [0.0, 0.0, 0.0], now))
    moved = arm.tcp()[:3, 3] - start[:3, 3]
    # Half a second at 0.5 and -0.25 of Servo's Panda scale 0.4 m/s (plus the last command's
    # 0.1 s of validity, not yet used up), orientation kept.
    np.testing.assert_allclose(moved, [0.0, 0.1, -0.05], atol=0.002)
    assert np.linalg.norm(kin.rotation_vector(arm.tcp()[:3, :3] @ start[:3, :3].T)) < 0.01


def test_an_angular_twist_turns_the_hand_about_the_base_axis():
    arm = CartesianArm()
    start = arm.tcp()
    run(arm, 0.5, 0.0, lambda now: arm.command_twist([0.0] * 3, [0.0, 0.0, 0.5], now))
    turn = kin.rotation_vector(arm.tcp()[:3, :3] @ start[:3, :3].T)
    np.testing.assert_allclose(turn, [0.0, 0.0, 0.5 * 0.8 * 0.5], atol=0.01)
    np.testing.assert_allclose(arm.tcp()[:3, 3], start[:3, 3], atol=0.002)


def test_speed_units_twists_are_taken_as_they_are():
    arm = CartesianArm(ServoSettings(command_type=ServoCommandType.SPEED_UNITS))
    start = arm.tcp()[:3, 3].copy()
    run(arm, 0.5, 0.0, lambda now: arm.command_twist([0.1, 0.0, 0.0], [0.0] * 3, now))
    np.testing.assert_allclose(arm.tcp()[:3, 3] - start, [0.05, 0.0, 0.0], atol=0.002)


def test_a_stale_twist_stops_the_arm():
    arm = CartesianArm()
    arm.command_twist([1.0, 0.0, 0.0], [0.0] * 3, 0.0)
    run(arm, 0.11, 0.0)  # the command is valid for 0.1 s: steps at 0 .. 0.1 move the arm
    assert arm.moving(0.1) and not arm.moving(0.1 + 1e-6)
    held = arm.q.copy()
    run(arm, 1.0, 0.12)
    np.testing.assert_array_equal(arm.q, held)


def test_a_pose_target_is_approached_at_bounded_speed_and_reached():
    settings = ServoSettings(target_linear_speed=0.25)
    arm = CartesianArm(settings)
    goal = np.array([0.5, 0.2, 0.3])
    previous = arm.tcp()[:3, 3].copy()
    now = 0.0
    for _ in range(300):
        arm.command_pose(goal.tolist(), DOWN, now)
        arm.step(DT, now)
        now += DT
        position = arm.tcp()[:3, 3]
        assert np.linalg.norm(position - previous) <= 0.25 * DT + 1e-4
        previous = position.copy()
    np.testing.assert_allclose(arm.tcp()[:3, 3], goal, atol=0.002)
    assert np.linalg.norm(kin.rotation_vector(arm.tcp()[:3, :3] @ DOWN.T)) < 0.01
    assert np.all(arm.q >= kin.LOWER_LIMITS) and np.all(arm.q <= kin.UPPER_LIMITS)


def test_a_pose_target_sent_once_moves_the_arm_for_the_timeout_only():
    arm = CartesianArm(ServoSettings(target_linear_speed=0.25))
    start = arm.tcp()[:3, 3].copy()
    arm.command_pose([0.6, 0.0, 0.3], DOWN, 0.0)
    run(arm, 1.0, 0.0)
    travelled = np.linalg.norm(arm.tcp()[:3, 3] - start)
    assert 0.0 < travelled <= 0.25 * (0.1 + DT) + 1e-4


@pytest.mark.parametrize(("linear", "angular"), [
    ([math.nan, 0.0, 0.0], [0.0] * 3),
    ([0.0] * 3, [0.0, math.inf, 0.0]),
    ([1.5, 0.0, 0.0], [0.0] * 3),  # unitless beyond [-1, 1]
])
def test_refused_twists_are_counted_and_change_nothing(linear, angular):
    arm = CartesianArm()
    arm.command_twist([0.0, 0.2, 0.0], [0.0] * 3, 0.0)
    with pytest.raises(CommandRefused, match="twist"):
        arm.command_twist(linear, angular, 0.0)
    assert arm.refused == 1
    start = arm.tcp()[:3, 3].copy()
    arm.step(0.05, 0.05)
    # The earlier, valid twist still drives the arm: +y.
    assert arm.tcp()[1, 3] > start[1] and abs(arm.tcp()[0, 3] - start[0]) < 1e-3


def test_refused_pose_and_gripper_commands_are_counted():
    arm = CartesianArm()
    with pytest.raises(CommandRefused, match="target position"):
        arm.command_pose([0.5, math.nan, 0.3], DOWN, 0.0)
    with pytest.raises(CommandRefused, match="target rotation"):
        arm.command_pose([0.5, 0.0, 0.3], np.full((3, 3), math.inf), 0.0)
    with pytest.raises(CommandRefused, match="gripper"):
        arm.command_gripper(math.nan)
    assert arm.refused == 3 and arm.target is None and not arm.moving(0.0)


def test_the_gripper_closes_at_its_speed():
    arm = CartesianArm()
    arm.command_gripper(1.0)
    arm.step(0.25, 0.0)
    assert arm.gripper == pytest.approx(0.5)
    arm.step(0.5, 0.25)
    assert arm.gripper == 1.0
