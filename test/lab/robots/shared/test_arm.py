"""The simulated arm's dynamics and rendering, without ROS."""

from __future__ import annotations

import numpy as np
import pytest

from sequence_ai_lab.robots.shared.arm import (
    HOME,
    LOWER_LIMITS,
    UPPER_LIMITS,
    VELOCITY_LIMITS,
    SimArm,
    forward_kinematics,
)
from sequence_ai_lab.robots.shared.render import VIEWS, SceneRenderer

DT = 0.01


def run(arm: SimArm, seconds: float) -> None:
    for _ in range(round(seconds / DT)):
        arm.step(DT)


def test_moves_toward_a_position_target_no_faster_than_the_velocity_limit() -> None:
    arm = SimArm()
    target = HOME + np.array([0.5, -0.3, 0.4, 0.3, -0.6, 0.2, 0.1])
    arm.command_positions(target)
    start_error = np.abs(target - arm.q)
    previous = arm.q.copy()
    arm.step(DT)
    assert np.all(np.abs(arm.q - previous) <= VELOCITY_LIMITS * DT + 1e-12)
    assert np.all(np.abs(target - arm.q) < start_error)
    run(arm, 2.0)
    np.testing.assert_allclose(arm.q, target, atol=1e-9)


def test_integrates_velocities_and_holds_when_they_stop() -> None:
    arm = SimArm(velocity_timeout_s=0.2)
    velocity = np.array([0.5, -0.2, 0.1, 0.3, 0.0, -0.4, 0.6])
    for _ in range(50):  # 0.5 s of fresh commands
        arm.command_velocities(velocity)
        arm.step(DT)
    np.testing.assert_allclose(arm.q, HOME + velocity * 0.5, atol=1e-9)
    after_commands = arm.q.copy()
    run(arm, 1.0)
    # Commands stopped: the arm moves on for at most the timeout, then holds.
    assert np.all(np.abs(arm.q - after_commands) <= np.abs(velocity) * 0.2 + 1e-9)
    held = arm.q.copy()
    run(arm, 1.0)
    np.testing.assert_array_equal(arm.q, held)
    assert np.all(arm.qd == 0)


def test_velocities_are_limited() -> None:
    arm = SimArm()
    arm.command_velocities(np.full(7, 100.0))
    start = arm.q.copy()
    arm.step(DT)
    np.testing.assert_allclose(
        arm.q - start, np.minimum(VELOCITY_LIMITS * DT, UPPER_LIMITS - start)
    )


def test_clamps_targets_and_velocities_to_the_joint_limits() -> None:
    arm = SimArm()
    arm.command_positions(UPPER_LIMITS + 1.0)
    run(arm, 5.0)
    np.testing.assert_allclose(arm.q, UPPER_LIMITS)
    arm.command_velocities(np.full(7, -2.0))
    for _ in range(500):
        arm.command_velocities(np.full(7, -2.0))
        arm.step(DT)
    np.testing.assert_allclose(arm.q, LOWER_LIMITS)


def test_holds_still_without_commands() -> None:
    arm = SimArm()
    run(arm, 1.0)
    np.testing.assert_array_equal(arm.q, HOME)
    arm.command_positions(HOME + 0.1)
    run(arm, 1.0)
    reached = arm.q.copy()
    run(arm, 1.0)
    np.testing.assert_array_equal(arm.q, reached)


def test_gripper_follows_its_command_within_0_and_1() -> None:
    arm = SimArm()
    arm.command_gripper(3.0)
    run(arm, 1.0)
    assert arm.gripper == pytest.approx(1.0)
    arm.command_gripper(0.25)
    run(arm, 1.0)
    assert arm.gripper == pytest.approx(0.25)


@pytest.mark.parametrize(
    ("call", "value", "field"),
    [
        ("command_positions", [0.0] * 6, "position command"),
        ("command_velocities", [float("nan")] * 7, "velocity command"),
        ("command_gripper", float("inf"), "gripper command"),
    ],
)
def test_bad_commands_are_refused_naming_the_command(call: str, value: object, field: str) -> None:
    arm = SimArm()
    with pytest.raises(ValueError, match=field):
        getattr(arm, call)(value)
    np.testing.assert_array_equal(arm.q, HOME)


def test_forward_kinematics_puts_the_hand_over_the_table_at_home() -> None:
    hand = forward_kinematics(HOME)[-1]
    # The Panda's ready pose: hand 0.3 m in front of the base, 0.5 m up, pointing down.
    np.testing.assert_allclose(hand[:3, 3], [0.307, 0.0, 0.487], atol=0.005)
    assert hand[2, 2] == pytest.approx(-1.0, abs=1e-6)


@pytest.mark.parametrize("view", VIEWS)
def test_images_show_the_scene_and_change_when_the_arm_moves(view: str) -> None:
    renderer = SceneRenderer(view, 320, 180, scale=2)
    still = renderer.render(HOME, 0.0).copy()
    assert still.shape == (180, 320, 3) and still.dtype == np.uint8
    np.testing.assert_array_equal(renderer.render(HOME, 0.0), still)
    r, g, b = (still[..., i].astype(int) for i in range(3))
    red = (r > 90) & (r > 2 * g) & (r > 2 * b)
    assert red.sum() > 20, "the cup is in view"
    moved = renderer.render(HOME + np.array([0.6, 0.3, 0.0, 0.4, 0.0, -0.3, 0.0]), 0.0)
    changed = np.any(moved != still, axis=2).mean()
    assert changed > 0.005, f"only {changed:.2%} of the {view} pixels changed"


def test_wrist_view_sees_the_gripper_close() -> None:
    renderer = SceneRenderer("wrist_left", 320, 180, scale=2)
    open_frame = renderer.render(HOME, 0.0).copy()
    closed = renderer.render(HOME, 1.0)
    assert np.any(closed != open_frame)


def test_renderer_refuses_an_unknown_view() -> None:
    with pytest.raises(ValueError, match="view: got 'top'"):
        SceneRenderer("top")


@pytest.mark.parametrize("view", VIEWS)
@pytest.mark.parametrize("size", [(1280, 720), (1000, 563)])
def test_redrawing_only_what_moved_gives_the_frame_a_full_render_gives(
    view: str, size: tuple[int, int]
) -> None:
    # One renderer redraws into the same frame (it upscales only what moved); another draws
    # each pose into a fresh frame. Sizes that 4 divides and that it does not.
    width, height = size
    redrawn, fresh = SceneRenderer(view, width, height), SceneRenderer(view, width, height)
    frame = np.zeros((height, width, 3), dtype=np.uint8)
    swing = np.array([0.6, 0.3, 0.0, 0.4, 0.0, -0.3, 0.5])
    for k in range(6):
        q, gripper = HOME + swing * np.sin(k), 0.2 * k
        redrawn.render(q, gripper, out=frame)
        expected = fresh.render(q, gripper, out=np.zeros_like(frame))
        np.testing.assert_array_equal(frame, expected)


def test_render_refuses_a_frame_of_another_size() -> None:
    renderer = SceneRenderer("exterior_1", 320, 180)
    with pytest.raises(ValueError, match="out: got a"):
        renderer.render(HOME, 0.0, out=np.zeros((90, 160, 3), dtype=np.uint8))
