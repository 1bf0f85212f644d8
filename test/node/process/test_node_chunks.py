"""Chunk mode end to end: real rclpy, the local gateway, a test arm whose
joint_trajectory_controller plays what the node sends as Humble's does.

Each chunk the policy installs reaches the arm once, as one stamped trajectory of its rows; the
node sends no per-step arm command; every way a goal ends stops the arm with a trajectory that
stays where the arm is, at rest."""

from __future__ import annotations

import math
from typing import Any

import pytest
from action_msgs.msg import GoalStatus
from support.node_harness import ArmHarness, ReceivedTrajectory, node_parameters
from support.waiting import wait_for

from sequence_ai_ros.core.command_kinds import JOINT_TRAJECTORY
from sequence_ai_ros.params.spec_table import PANDA_LOWER, PANDA_UPPER

# Starts processes or ROS nodes: `-m "not slow"` leaves it out.
pytestmark = pytest.mark.slow

INSTRUCTION = "pick up the cup"
PERIOD_S = 1 / 15  # pi05-droid's catalogue rate
MAX_STEP = 0.25


def chunk_parameters(url: str, key_file: str, **changes: Any) -> dict[str, Any]:
    """config/droid_jtc.yaml's command settings (command_mode auto resolves to chunk)."""
    return node_parameters(
        url, key_file, command_type=JOINT_TRAJECTORY,
        command_topic="joint_trajectory_controller/joint_trajectory", **changes,
    )


@pytest.fixture
def active(ros_system: Any, gateway: Any, key_file: str) -> tuple[Any, ArmHarness]:
    node, arm = ros_system(**chunk_parameters(gateway.url, key_file))
    arm.configure_and_activate()
    return node, arm


def _chunks(arm: ArmHarness, start: int = 0) -> list[ReceivedTrajectory]:
    return [t for t in arm.trajectories_since(start) if not t.is_stop]


def _start(arm: ArmHarness, max_seconds: float = 30.0, max_actions: int = 0) -> Any:
    """Send a goal and wait until its first chunk reached the arm."""
    before = len(arm.trajectories_since(0))
    handle, _ = arm.send_goal(INSTRUCTION, max_seconds, max_actions)
    assert handle.accepted
    wait_for(lambda: _chunks(arm, before), what="the goal's first chunk")
    return handle


def _assert_valid(trajectory: ReceivedTrajectory) -> None:
    """A chunk as the node sends it: one period between points, finite targets inside the
    limits, steps within max_step, at rest at the end."""
    assert trajectory.stamp_s > 0.0
    assert trajectory.times_s == pytest.approx(
        [(k + 1) * PERIOD_S for k in range(len(trajectory.times_s))], abs=1e-6
    )
    for point in trajectory.positions:
        assert all(math.isfinite(v) for v in point)
        assert all(lo <= v <= hi for v, lo, hi in zip(point, PANDA_LOWER, PANDA_UPPER))
    for a, b in zip(trajectory.positions, trajectory.positions[1:]):
        assert max(abs(x - y) for x, y in zip(a, b)) <= MAX_STEP
    assert len(trajectory.velocities) == len(trajectory.positions)
    assert not any(trajectory.velocities[-1])


def _assert_one_stop_at_a_measured_pose(arm: ArmHarness, start: int) -> ReceivedTrajectory:
    wait_for(lambda: arm.stops(start), what="the stop after the goal")
    (stop,) = arm.stops(start)
    assert arm.was_measured(stop.positions[0]), "the stop is not at a measured pose"
    return stop


def test_each_chunk_reaches_the_arm_once_as_a_stamped_trajectory(
    active: tuple[Any, ArmHarness],
) -> None:
    _, arm = active
    handle, feedback = arm.send_goal(INSTRUCTION, max_seconds=30.0, max_actions=40)
    assert handle.accepted
    status, result = arm.result(handle)

    assert status == GoalStatus.STATUS_SUCCEEDED, result.message
    assert result.reason == "completed" and result.actions == 40
    chunks = _chunks(arm)
    # One trajectory per installed chunk, none per step; no forward command at all.
    assert len(chunks) == result.chunks >= 2
    assert arm.command_count() == 0
    for chunk in chunks:
        _assert_valid(chunk)
    stamps = [c.stamp_s for c in chunks]
    assert stamps == sorted(stamps)
    # The arm followed the trajectories: it moved about as far as the chunks' rows lead.
    moved = max(abs(a - b) for a, b in zip(chunks[-1].positions[-1], chunks[0].measured))
    assert moved > 0.5
    # Feedback and the result count rows as they became due, the gripper goes with each.
    assert max(f.actions for f in feedback) <= 40
    wait_for(lambda: len(arm.gripper_commands) >= 40, what="gripper commands")
    # A completed goal ends with a stop where the arm is, like a step-mode hold.
    _assert_one_stop_at_a_measured_pose(arm, 0)


def test_cancel_stops_the_trajectory_where_the_arm_is(active: tuple[Any, ArmHarness]) -> None:
    _, arm = active
    handle = _start(arm)
    start = len(arm.trajectories_since(0))
    handle.cancel()
    status, result = arm.result(handle)

    assert status == GoalStatus.STATUS_CANCELED, result.message
    assert result.reason == "interrupted" and result.stopped_early
    stop = _assert_one_stop_at_a_measured_pose(arm, start)
    # Nothing after the stop but the same stop again (the idle node's republish).
    later = arm.trajectories_since(arm.trajectories.index(stop))
    assert all(t.is_stop and t.positions == stop.positions for t in later)


@pytest.mark.parametrize("hold_between_goals", [True, False])
def test_a_preempted_goal_stops_its_trajectory_before_the_next_goal_moves(
    ros_system: Any, gateway: Any, key_file: str, hold_between_goals: bool
) -> None:
    """Even with hold_between_goals false: a position arm left at its last step target is
    still, an arm left playing a chunk's trajectory is not."""
    _, arm = ros_system(**chunk_parameters(gateway.url, key_file,
                                           hold_between_goals=hold_between_goals))
    arm.configure_and_activate()
    first = _start(arm)
    start = len(arm.trajectories_since(0))
    second, _ = arm.send_goal("put the cup in the sink", max_seconds=30.0, max_actions=12)
    assert second.accepted
    first_result = arm.result(first)[1]
    assert first_result.reason == "preempted", first_result.message
    second_status, second_result = arm.result(second)
    assert second_status == GoalStatus.STATUS_SUCCEEDED, second_result.message

    # The first goal may send a chunk more before it stops: then chunks, a stop, the second
    # goal's chunks, its stop. Without a stop between the goals, their chunks would run together.
    wait_for(lambda: arm.stops(start)[1:], what="the stop after the second goal")
    kinds = ["stop" if t.is_stop else "chunk" for t in arm.trajectories_since(start)]
    runs = [kind for i, kind in enumerate(kinds) if i == 0 or kind != kinds[i - 1]]
    assert runs in (["stop", "chunk", "stop"], ["chunk", "stop", "chunk", "stop"]), kinds


def test_a_chunk_with_a_point_beyond_max_step_is_refused_whole_and_the_arm_held(
    ros_system: Any, gateway: Any, key_file: str
) -> None:
    # pi05-droid's simulated rows move 0.06 rad per step: every chunk exceeds 0.02.
    _, arm = ros_system(**chunk_parameters(gateway.url, key_file, max_step=0.02))
    arm.configure_and_activate()
    handle, _ = arm.send_goal(INSTRUCTION, max_seconds=30.0)
    status, result = arm.result(handle)

    assert status == GoalStatus.STATUS_ABORTED and result.reason == "validate", result.message
    assert "trajectory point" in result.message and "max_step" in result.message
    # Nothing of the chunk reached the arm; it was held where it was.
    assert _chunks(arm) == []
    _assert_one_stop_at_a_measured_pose(arm, 0)


def test_a_camera_that_stops_mid_chunk_stops_the_trajectory(
    ros_system: Any, gateway: Any, key_file: str
) -> None:
    """The controller would play the rest of the chunk by itself: the node's check of every
    step's inputs stops it."""
    # A second: only the paused view may go stale (the others' 15 Hz images have been seen
    # 0.36 s apart on a loaded CI machine).
    _, arm = ros_system(**chunk_parameters(gateway.url, key_file, max_image_age_s=1.0))
    arm.configure_and_activate()
    handle = _start(arm)
    arm.paused_views.add("wrist_left")
    start = len(arm.trajectories_since(0))
    status, result = arm.result(handle)

    assert status == GoalStatus.STATUS_ABORTED, result.message
    assert result.reason == "stale_input" and "wrist_left" in result.message
    _assert_one_stop_at_a_measured_pose(arm, start)
