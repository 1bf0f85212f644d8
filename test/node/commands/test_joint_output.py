"""Command messages for each controller type (the arm gate's output stage)."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from typing import Any

import pytest
from rclpy.executors import MultiThreadedExecutor
from rclpy.lifecycle import LifecycleNode
from rclpy.node import Node
from sensor_msgs.msg import JointState
from std_msgs.msg import Float64MultiArray
from support.waiting import wait_for
from trajectory_msgs.msg import JointTrajectory

from sequence_ai_ros.commands.joint_output import CommandPublisher

JOINTS = ["a", "b", "c"]
# The catalogue's period: a trajectory point is reached one period after its message.
PERIOD_S = 1 / 15
TYPES = {
    "std_msgs/msg/Float64MultiArray": Float64MultiArray,
    "trajectory_msgs/msg/JointTrajectory": JointTrajectory,
    "sensor_msgs/msg/JointState": JointState,
}


@pytest.fixture
def pair(ros_context: Any) -> Iterator[tuple[LifecycleNode, Node]]:
    owner = LifecycleNode("command_owner", namespace="/commands", context=ros_context)
    listener = Node("command_listener", namespace="/commands", context=ros_context)
    executor = MultiThreadedExecutor(num_threads=2, context=ros_context)
    executor.add_node(owner)
    executor.add_node(listener)
    spinner = threading.Thread(target=executor.spin, daemon=True)
    spinner.start()
    yield owner, listener
    executor.shutdown(timeout_sec=5.0)
    owner.destroy_node()
    listener.destroy_node()
    spinner.join(timeout=5.0)


def _publisher(owner: LifecycleNode, interface: str, command_type: str) -> CommandPublisher:
    commands = CommandPublisher(
        owner,
        joint_names=JOINTS,
        interface=interface,
        command_topic="arm",
        command_type=command_type,
        gripper_topic="gripper",
        period_s=PERIOD_S,
    )
    owner.trigger_configure()
    owner.trigger_activate()
    return commands


@pytest.mark.parametrize("command_type", sorted(TYPES))
@pytest.mark.parametrize("interface", ["position", "velocity"])
def test_each_message_type_carries_the_step(
    pair: tuple[LifecycleNode, Node], command_type: str, interface: str
) -> None:
    owner, listener = pair
    received: list[Any] = []
    listener.create_subscription(TYPES[command_type], "arm", received.append, 10)
    commands = _publisher(owner, interface, command_type)
    wait_for(lambda: owner.count_subscribers("arm") >= 1, what="the subscriber")

    commands.publish_arm([0.1, 0.2, 0.3, 0.9])
    msg = wait_for(lambda: received and received[-1], what="the command")
    if command_type.endswith("Float64MultiArray"):
        values = list(msg.data)
    elif command_type.endswith("JointTrajectory"):
        assert list(msg.joint_names) == JOINTS and len(msg.points) == 1
        point = msg.points[0]
        values = list(point.velocities if interface == "velocity" else point.positions)
        assert point.time_from_start.nanosec == pytest.approx(PERIOD_S * 1e9, rel=1e-3)
    else:
        assert list(msg.name) == JOINTS
        values = list(msg.velocity if interface == "velocity" else msg.position)
    # Only the arm joints: the gripper value goes to its own topic.
    assert values == [0.1, 0.2, 0.3]
