"""Command groups: a row split over several controllers, each group checked by the one gate
before any is published; a refusal of any group publishes nothing and holds every group."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from typing import Any

import pytest
from rclpy.executors import MultiThreadedExecutor
from rclpy.lifecycle import LifecycleNode
from rclpy.node import Node
from std_msgs.msg import Float64MultiArray
from support.waiting import wait_for

from sequence_ai_ros.commands.group_output import CommandGroup, GroupedCommands, group_problems
from sequence_ai_ros.core.node_config import NodeConfig
from sequence_ai_ros.core.readings import JointSnapshot
from sequence_ai_ros.params import config_checks, spec_table
from sequence_ai_ros.safety.gate import ArmGate, MotionRules

LEFT = [f"left_j{i}" for i in range(6)]
RIGHT = [f"right_j{i}" for i in range(6)]
GRIPPERS = ["left_gripper", "right_gripper"]
MULTI = "std_msgs/msg/Float64MultiArray"
GROUPS = (
    CommandGroup("left_arm", tuple(LEFT), "left_arm/commands", MULTI),
    CommandGroup("right_arm", tuple(RIGHT), "right_arm/commands", MULTI),
    CommandGroup("grippers", tuple(GRIPPERS), "grippers/commands", MULTI),
)
PERIOD_S = 1 / 50


def _config(**changes: object) -> NodeConfig:
    values = {n: s.default for n, s in spec_table.SPECS.items()}
    values.update(
        joint_names=LEFT + RIGHT, joint_lower_limits=[-2.6] * 12, joint_upper_limits=[2.6] * 12,
        gripper_joints=GRIPPERS, command_groups=[g.name for g in GROUPS], max_step=0.1,
    )
    values.update(changes)
    return NodeConfig.from_values(values)


def test_groups_that_split_the_row_have_no_problem() -> None:
    assert config_checks.check_config(_config()) == []
    assert group_problems(GROUPS, _config()) == []


def test_each_badly_split_row_is_refused_naming_the_group_parameter() -> None:
    config = _config()
    short = (GROUPS[0], GROUPS[2])
    assert any("leave ['right_j0'" in p for p in group_problems(short, config))
    twice = (*GROUPS, CommandGroup("again", ("left_j0",), "again", MULTI))
    assert any("'left_j0' is also in left_arm" in p for p in group_problems(twice, config))
    mixed = (
        CommandGroup("left", (*LEFT, "left_gripper"), "l", MULTI),
        CommandGroup("right", (*RIGHT, "right_gripper"), "r", MULTI),
    )
    problems = group_problems(mixed, config)
    assert any("command_groups.left.joints mixes arm joints and grippers" in p for p in problems)
    trajectory = (*GROUPS[:2], CommandGroup("grippers", tuple(GRIPPERS), "g", "x/JointTrajectory"))
    assert any("command_groups.grippers.type" in p for p in group_problems(trajectory, config))
    unknown = (*GROUPS, CommandGroup("extra", ("elbow",), "e", MULTI))
    assert any("['elbow'], not in joint_names" in p for p in group_problems(unknown, config))


def test_command_groups_refuse_chunk_mode() -> None:
    problems = config_checks.check_config(_config(command_mode="chunk", command_type=(
        "trajectory_msgs/msg/JointTrajectory")))
    assert any("command_groups" in p and "step mode" in p for p in problems)


class _Arm:
    """The gate's measurements: both arms at zero, fresh."""

    def joints(self, max_age_s: float) -> JointSnapshot:
        return JointSnapshot([0.0] * 12, [0.0, 0.0], 0.0, "left_j0")

    def ages(self) -> dict[str, float | None]:
        return {"front": 0.0}


class _Log:
    def __init__(self) -> None:
        self.errors: list[str] = []

    def error(self, message: str) -> None:
        self.errors.append(message)

    def warning(self, message: str) -> None:
        pass


@pytest.fixture
def pair(ros_context: Any) -> Iterator[tuple[LifecycleNode, Node]]:
    owner = LifecycleNode("group_owner", namespace="/groups", context=ros_context)
    listener = Node("group_listener", namespace="/groups", context=ros_context)
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


def test_a_refusal_of_one_group_publishes_no_group_and_holds_both_arms(
    pair: tuple[LifecycleNode, Node],
) -> None:
    owner, listener = pair
    received: dict[str, list[list[float]]] = {g.topic: [] for g in GROUPS}
    for topic, kept in received.items():
        listener.create_subscription(
            Float64MultiArray, topic, lambda msg, kept=kept: kept.append(list(msg.data)), 10
        )
    config = _config(camera_views=["front"], camera_topics=["f"], camera_transports=["raw"])
    output = GroupedCommands(owner, GROUPS, config, PERIOD_S)
    owner.trigger_configure()
    owner.trigger_activate()
    for topic in received:
        wait_for(lambda topic=topic: owner.count_subscribers(topic) >= 1, what=topic)
    log = _Log()
    gate = ArmGate(output, _Arm(), joints=12, period_s=PERIOD_S, log=log)
    gate.begin_goal(MotionRules.from_config(config))

    row = [0.05] * 6 + [-0.05] * 6 + [1.0, 0.0]
    assert gate.check(row) is None
    gate.publish(row)
    wait_for(lambda: all(received.values()), what="every group's first command")
    assert received["left_arm/commands"] == [[0.05] * 6]
    assert received["right_arm/commands"] == [[-0.05] * 6]
    assert received["grippers/commands"] == [[1.0, 0.0]]

    # The right arm's step is too large: the whole row is refused, no group gets it.
    refused = [0.05] * 6 + [0.5] + [-0.05] * 5 + [1.0, 0.0]
    reason = gate.check(refused) or ""
    assert "right_j0" in reason
    assert gate.hold() is None and not log.errors
    wait_for(lambda: len(received["right_arm/commands"]) == 2, what="the right arm's hold")
    wait_for(lambda: len(received["left_arm/commands"]) == 2, what="the left arm's hold")
    # Each arm is held still at its measured joints; the refused row reached neither.
    assert received["left_arm/commands"][-1] == [0.0] * 6
    assert received["right_arm/commands"][-1] == [0.0] * 6
    assert [0.5] not in [v[:1] for v in received["right_arm/commands"]]
    gate.end_goal()
    output.destroy()
