"""Dry runs end to end: a `dry_run` goal runs as a real one, but nothing reaches the arm's or
the gripper's command topics; every would-be command goes to `~/planned` (the command's own
type) and a JointState ghost of the planned pose to `~/planned_joint_states`."""

from __future__ import annotations

import threading
from typing import Any

import pytest
from action_msgs.msg import GoalStatus
from node.process.test_node_chunks import chunk_parameters
from sensor_msgs.msg import JointState
from std_msgs.msg import Float64MultiArray
from support.node_harness import JOINTS, ArmHarness, node_parameters
from support.waiting import wait_for
from trajectory_msgs.msg import JointTrajectory

# Starts processes or ROS nodes: `-m "not slow"` leaves it out.
pytestmark = pytest.mark.slow

INSTRUCTION = "pick up the cup"
ACTIONS = 20


class Planned:
    """What the node publishes on its planned topics, as an RViz ghost would get it."""

    def __init__(self, arm: ArmHarness, message_type: type) -> None:
        self._lock = threading.Lock()
        self.commands: list[Any] = []
        self.gripper: list[float] = []
        self.ghosts: list[JointState] = []
        base = f"{arm.get_namespace()}/sequence_ai"
        arm.create_subscription(message_type, f"{base}/planned", self._keep(self.commands), 100)
        arm.create_subscription(
            Float64MultiArray, f"{base}/planned_gripper",
            lambda msg: self._keep(self.gripper)(msg.data[0]), 100,
        )
        arm.create_subscription(JointState, f"{base}/planned_joint_states",
                                self._keep(self.ghosts), 100)

    def _keep(self, into: list[Any]) -> Any:
        def keep(msg: Any) -> None:
            with self._lock:
                into.append(msg)

        return keep

    def count(self) -> int:
        with self._lock:
            return len(self.commands)


def _quiet_arm(arm: ArmHarness) -> tuple[int, int, int]:
    return arm.command_count(), len(arm.trajectories_since(0)), len(arm.gripper_commands)


def test_a_dry_run_goal_sends_every_command_to_planned_and_nothing_to_the_arm(
    ros_system: Any, gateway: Any, key_file: str
) -> None:
    _, arm = ros_system(**node_parameters(gateway.url, key_file, hold_republish_hz=0.0))
    planned = Planned(arm, Float64MultiArray)
    arm.configure_and_activate()
    assert all(r.successful for r in arm.set_parameters(dry_run=True))
    before = _quiet_arm(arm)
    handle, _ = arm.send_goal(INSTRUCTION, max_seconds=30.0, max_actions=ACTIONS)
    status, result = arm.result(handle)

    assert status == GoalStatus.STATUS_SUCCEEDED and result.actions == ACTIONS, result.message
    assert result.message.startswith("dry run (nothing reached the arm")
    # Each step and the final hold, in the command's own type; the ghost follows the plan.
    wait_for(lambda: planned.count() >= ACTIONS + 1, what="every planned command")
    assert planned.count() == ACTIONS + 1
    assert len(planned.gripper) == ACTIONS
    wait_for(lambda: len(planned.ghosts) >= ACTIONS + 1, what="the ghost")
    ghost = planned.ghosts[-1]
    assert list(ghost.name) == JOINTS
    assert list(ghost.position) == pytest.approx(list(planned.commands[-1].data))
    assert _quiet_arm(arm) == before
    wait_for(lambda: (arm.node_status() or {}).get("dry_run") == "true", what="diagnostics")


def test_a_dry_run_plan_continues_from_itself_not_from_the_unmoved_arm(
    ros_system: Any, gateway: Any, key_file: str
) -> None:
    # 80 steps of 0.06 rad: far beyond max_step from where the arm stayed.
    _, arm = ros_system(**node_parameters(gateway.url, key_file, dry_run=True))
    planned = Planned(arm, Float64MultiArray)
    arm.configure_and_activate()
    handle, _ = arm.send_goal(INSTRUCTION, max_seconds=30.0, max_actions=80)
    status, result = arm.result(handle)

    assert status == GoalStatus.STATUS_SUCCEEDED and result.actions == 80, result.message
    first, last = planned.commands[0].data, planned.commands[-1].data
    assert max(abs(a - b) for a, b in zip(first, last)) > 0.5
    assert arm.command_count() == 0


def test_a_dry_run_chunk_goes_to_planned_as_a_trajectory(
    ros_system: Any, gateway: Any, key_file: str
) -> None:
    _, arm = ros_system(**chunk_parameters(gateway.url, key_file, dry_run=True))
    planned = Planned(arm, JointTrajectory)
    arm.configure_and_activate()
    before = _quiet_arm(arm)
    handle, _ = arm.send_goal(INSTRUCTION, max_seconds=30.0, max_actions=ACTIONS)
    status, result = arm.result(handle)

    assert status == GoalStatus.STATUS_SUCCEEDED, result.message
    wait_for(lambda: planned.count() >= 2, what="the chunk and the stop on ~/planned")
    chunk, stop = planned.commands[0], planned.commands[-1]
    assert len(chunk.points) > 1 and len(stop.points) == 1
    wait_for(lambda: planned.ghosts, what="the ghost sampled from the trajectory")
    assert _quiet_arm(arm) == before


def test_turning_dry_run_off_mid_goal_applies_from_the_next_goal_only(
    ros_system: Any, gateway: Any, key_file: str
) -> None:
    _, arm = ros_system(**node_parameters(gateway.url, key_file, dry_run=True))
    planned = Planned(arm, Float64MultiArray)
    arm.configure_and_activate()
    handle, _ = arm.send_goal(INSTRUCTION, max_seconds=30.0, max_actions=60)
    wait_for(lambda: planned.count() >= 3, what="the dry goal's first steps")
    assert all(r.successful for r in arm.set_parameters(dry_run=False))
    status, result = arm.result(handle)

    assert status == GoalStatus.STATUS_SUCCEEDED and result.message.startswith("dry run")
    assert arm.command_count() == 0
    handle, _ = arm.send_goal(INSTRUCTION, max_seconds=30.0, max_actions=5)
    status, result = arm.result(handle)
    assert status == GoalStatus.STATUS_SUCCEEDED and not result.message.startswith("dry run")
    wait_for(lambda: arm.command_count() >= 6, what="the live goal's steps and hold")
