"""Joint limits end to end: the node reads ros2_control's layout from its parameters or a
joint_limits_file, and a goal whose rows pass max_step but not a joint's speed ends `validate`,
the arm held, in step mode and in chunk mode."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest
import yaml
from action_msgs.msg import GoalStatus
from lifecycle_msgs.msg import Transition
from node.process.test_node_chunks import (
    _assert_one_stop_at_a_measured_pose,
    _chunks,
    chunk_parameters,
)
from support.node_harness import JOINTS, node_parameters
from support.waiting import wait_for

# Starts processes or ROS nodes: `-m "not slow"` leaves it out.
pytestmark = pytest.mark.slow

INSTRUCTION = "pick up the cup"


def limits(**fields: float) -> dict[str, Any]:
    """joint_limits.<joint>.* parameters giving every arm joint the same `fields`."""
    values: dict[str, Any] = {}
    for joint in JOINTS:
        for name, value in fields.items():
            flag = "has_position_limits" if "position" in name else f"has_{name[4:]}_limits"
            values[f"joint_limits.{joint}.{flag}"] = True
            values[f"joint_limits.{joint}.{name}"] = value
    return values


def test_a_step_too_fast_for_a_joint_ends_the_goal_validate_and_held(
    ros_system: Any, gateway: Any, key_file: str
) -> None:
    # pi05-droid's simulated rows move 0.06 rad per 1/15 s step (0.9 rad/s): within max_step.
    _, arm = ros_system(**node_parameters(gateway.url, key_file, **limits(max_velocity=0.5)))
    arm.configure_and_activate()
    handle, _ = arm.send_goal(INSTRUCTION, max_seconds=30.0)
    status, result = arm.result(handle)

    assert status == GoalStatus.STATUS_ABORTED and result.reason == "validate", result.message
    assert "max_velocity 0.5000" in result.message and result.actions == 0
    # Nothing but the hold reached the arm.
    wait_for(lambda: arm.holds(), what="the hold")
    # The idle hold may be republished meanwhile (hold_republish_hz): every command is a hold.
    commands = arm.commands_since(0)
    assert commands and all(
        any(np.allclose(c.values, h.values) for h in arm.holds()) for c in commands
    )


def test_an_acceleration_beyond_a_joints_limit_ends_the_goal_validate(
    ros_system: Any, gateway: Any, key_file: str, tmp_path: Path
) -> None:
    # From a joint_limits_file, as MoveIt and ros2_control keep it; a change of 0.5 rad/s² is
    # 0.002 rad per step per step: the rows' own noise exceeds it within a few steps.
    path = tmp_path / "joint_limits.yaml"
    table = {j: {"has_acceleration_limits": True, "max_acceleration": 0.5} for j in JOINTS}
    path.write_text(yaml.safe_dump({"joint_limits": table}), encoding="utf-8")
    _, arm = ros_system(**node_parameters(gateway.url, key_file, joint_limits_file=str(path)))
    arm.configure_and_activate()
    handle, _ = arm.send_goal(INSTRUCTION, max_seconds=30.0)
    status, result = arm.result(handle)

    assert status == GoalStatus.STATUS_ABORTED and result.reason == "validate", result.message
    assert "accelerates" in result.message and "max_acceleration is 0.5000" in result.message
    wait_for(lambda: arm.holds(), what="the hold")


def test_a_chunk_too_fast_for_a_joint_is_refused_whole_and_the_arm_held(
    ros_system: Any, gateway: Any, key_file: str
) -> None:
    _, arm = ros_system(**chunk_parameters(gateway.url, key_file, **limits(max_velocity=0.5)))
    arm.configure_and_activate()
    handle, _ = arm.send_goal(INSTRUCTION, max_seconds=30.0)
    status, result = arm.result(handle)

    assert status == GoalStatus.STATUS_ABORTED and result.reason == "validate", result.message
    assert "trajectory point" in result.message and "max_velocity 0.5000" in result.message
    assert _chunks(arm) == []
    _assert_one_stop_at_a_measured_pose(arm, 0)


def test_insane_limits_fail_configure_naming_the_joint(
    ros_system: Any, gateway: Any, key_file: str
) -> None:
    bad = {f"joint_limits.{JOINTS[2]}.has_velocity_limits": True,
           f"joint_limits.{JOINTS[2]}.max_velocity": -1.0}
    node, arm = ros_system(**node_parameters(gateway.url, key_file, **bad))
    assert not arm.transition(Transition.TRANSITION_CONFIGURE)
    assert f"joint_limits.{JOINTS[2]}.max_velocity is -1.0" in node.health.snapshot().problem
