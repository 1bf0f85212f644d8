"""Commands to more than one controller: slices of a row, each group's joints, topic and type.

A two-arm robot usually runs one controller per arm and one per gripper. `command_groups`
names the groups; `command_groups.<group>.joints|topic|type` say which joints (of joint_names
and the grippers) each controller takes, where, and in which message type. The arm gate checks
the whole row before `GroupedCommands` publishes any group, so a refusal of any group publishes
nothing on every group and the hold that follows goes to all of them.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from rcl_interfaces.msg import ParameterDescriptor
from rclpy.lifecycle import LifecycleNode, LifecyclePublisher
from rclpy.node import Node
from std_msgs.msg import Float64MultiArray

from sequence_ai_ros.commands.cartesian_output import CartesianCommands, cartesian_output
from sequence_ai_ros.commands.joint_output import CommandPublisher
from sequence_ai_ros.commands.output_stage import COMMAND_QOS
from sequence_ai_ros.core.chunk_trajectory import ChunkTrajectory
from sequence_ai_ros.core.command_kinds import (
    COMMAND_TYPES,
    EE_SPACES,
    FLOAT64_MULTI_ARRAY,
    Interface,
)
from sequence_ai_ros.core.node_config import NodeConfig

PREFIX = "command_groups"
FIELDS = ("joints", "topic", "type")


@dataclass(frozen=True)
class CommandGroup:
    """One controller's share of a row."""

    name: str
    joints: tuple[str, ...]
    topic: str
    type: str


def parameter_name(group: str, field: str) -> str:
    return f"{PREFIX}.{group}.{field}"


def read(node: Node, names: Sequence[str]) -> tuple[CommandGroup, ...]:
    """Each named group from its parameters, declared here if not yet (the params file's
    values apply at declaration)."""
    defaults: dict[str, object] = {"joints": [""], "topic": "", "type": FLOAT64_MULTI_ARRAY}
    groups = []
    for group in names:
        values = {}
        for field in FIELDS:
            name = parameter_name(group, field)
            if not node.has_parameter(name):
                node.declare_parameter(
                    name,
                    defaults[field],
                    ParameterDescriptor(
                        name=name, description=f"command group {group}: {field}",
                        dynamic_typing=True,
                    ),
                )
            values[field] = node.get_parameter(name).value
        joints = values["joints"]
        groups.append(CommandGroup(
            group,
            tuple(str(j) for j in joints) if isinstance(joints, (list, tuple)) else (),
            str(values["topic"]),
            str(values["type"]),
        ))
    return tuple(groups)


def group_problems(groups: Sequence[CommandGroup], config: NodeConfig) -> list[str]:
    """Every way the groups fail to split the row: each joint of joint_names and of the
    grippers in exactly one group; a group all arm joints or all grippers; a known type."""
    problems = []
    arm, grippers = set(config.joint_names), set(config.grippers)
    owner: dict[str, str] = {}
    for group in groups:
        where = parameter_name(group.name, "joints")
        if not group.joints or "" in group.joints:
            problems.append(f"{where} is {list(group.joints)}; expected the group's joint names")
            continue
        unknown = [j for j in group.joints if j not in arm and j not in grippers]
        if unknown:
            problems.append(
                f"{where} has {unknown}, not in joint_names or {config.gripper_parameter}"
            )
        for joint in group.joints:
            if joint in owner:
                problems.append(f"{where}: {joint!r} is also in {owner[joint]}'s joints")
            owner[joint] = group.name
        if any(j in arm for j in group.joints) and any(j in grippers for j in group.joints):
            problems.append(
                f"{where} mixes arm joints and grippers; expected one controller for each"
            )
        if not group.topic:
            problems.append(f"{parameter_name(group.name, 'topic')} is empty; expected a topic")
        kinds = COMMAND_TYPES if not set(group.joints) & grippers else (FLOAT64_MULTI_ARRAY,)
        if group.type not in kinds:
            problems.append(
                f"{parameter_name(group.name, 'type')} is {group.type!r}; expected one of "
                f"{', '.join(kinds)}"
            )
    missing = [j for j in (*config.joint_names, *config.grippers) if j not in owner]
    if groups and missing:
        problems.append(f"command_groups leave {missing} without a group; expected every joint")
    return problems


def command_output(
    node: LifecycleNode,
    config: NodeConfig,
    groups: Sequence[CommandGroup],
    period_s: float,
    on_publish: Callable[[str, object], None] | None,
    space: str = "",
) -> CommandPublisher | GroupedCommands | CartesianCommands:
    """The arm gate's output: an ee model's twists or pose targets (`space` ee_delta or
    ee_absolute), one publisher per group, or command_topic (and the gripper's)."""
    if space in EE_SPACES:
        return cartesian_output(node, config, space, on_publish)
    if groups:
        return GroupedCommands(node, groups, config, period_s, on_publish)
    return CommandPublisher(
        node,
        joint_names=config.joint_names,
        interface=config.command_interface,
        command_topic=config.command_topic,
        command_type=config.command_type,
        gripper_topic=config.gripper_command_topic,
        period_s=period_s,
        on_publish=on_publish,
    )


class GroupedCommands:
    """The arm gate's output for several controllers: each checked command split by group and
    published to every group of its kind in the same call (step mode only)."""

    def __init__(
        self,
        node: LifecycleNode,
        groups: Sequence[CommandGroup],
        config: NodeConfig,
        period_s: float,
        on_publish: Callable[[str, object], None] | None = None,
    ) -> None:
        self._node = node
        self._on_publish = on_publish
        self._interface = config.command_interface
        arm, grippers = list(config.joint_names), list(config.grippers)
        self._arm: list[tuple[list[int], CommandPublisher]] = []
        self._grippers: list[tuple[list[int], LifecyclePublisher]] = []
        for group in groups:
            if group.joints[0] in grippers:
                publisher = node.create_lifecycle_publisher(
                    Float64MultiArray, group.topic, COMMAND_QOS
                )
                self._grippers.append(([grippers.index(j) for j in group.joints], publisher))
                continue
            output = CommandPublisher(
                node, joint_names=group.joints, interface=self._interface,
                command_topic=group.topic, command_type=group.type, gripper_topic="",
                period_s=period_s, on_publish=on_publish,
            )
            self._arm.append(([arm.index(j) for j in group.joints], output))

    @property
    def interface(self) -> Interface:
        return self._interface

    def publish_arm(self, values: Sequence[float]) -> None:
        for indices, output in self._arm:
            output.publish_arm([values[i] for i in indices])

    def publish_gripper(self, values: Sequence[float]) -> None:
        for indices, publisher in self._grippers:
            if max(indices) < len(values):
                msg = Float64MultiArray(data=[float(values[i]) for i in indices])
                publisher.publish(msg)
                if self._on_publish is not None:
                    self._on_publish("gripper", msg)

    def publish_trajectory(self, trajectory: ChunkTrajectory) -> None:
        raise RuntimeError("command_groups play in step mode; a chunk trajectory has no group")

    def command_rate_hz(self) -> float:
        """The slowest arm group's command rate: every group gets every tick or none does."""
        return min((output.command_rate_hz() for _, output in self._arm), default=0.0)

    def destroy(self) -> None:
        for _, output in self._arm:
            output.destroy()
        for _, publisher in self._grippers:
            self._node.destroy_lifecycle_publisher(publisher)
