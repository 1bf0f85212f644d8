"""What the demo knows of each model's robot: the values it plots, the target the gateway's
simulated model reaches for, where the measured state and the node's commands come from.

A joint robot's measured state is its `joint_states` (arm joints, then grippers); a Cartesian
robot's is the end-effector position from `ee_pose` (docs/sim.md). Each target is computed by the
gateway's own code, so "closer to the target" means what the simulated model aims at.
"""

from __future__ import annotations

import importlib
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from sequence_ai_lab.robots.shared.render import IMAGE_SIZE

if TYPE_CHECKING:
    from geometry_msgs.msg import PoseStamped
    from sensor_msgs.msg import JointState
    from std_msgs.msg import Float64MultiArray

__all__ = [
    "DEFAULT_MODEL",
    "ROBOTS",
    "CommandTopic",
    "DemoRobot",
    "Group",
    "cartesian_robot",
    "robot_for",
]

DEFAULT_MODEL = "pi05-droid"
# Why `--planner vlm` cannot drive a robot: the gateway's sim-planner reads exactly the Panda's
# 7 joints from its prompt and says a step is done at the Panda joint target of that step.
PANDA_ONLY_PLANNER = (
    "the gateway's simulated chat model (sim-planner) reads 7 Panda joint positions from its "
    "prompt and judges each step against the Panda's joint target for it"
)

# A message of the topic's type -> its values (None: not this robot's, skip it).
Reader = Callable[..., "list[float] | None"]


@dataclass(frozen=True)
class CommandTopic:
    """A topic the node commands on: its values land on channels from `first`."""

    topic: str
    message: str  # "package.msg:Type"
    first: int
    read: Reader


@dataclass(frozen=True)
class Group:
    """Channels plotted (and measured against the target) together, e.g. one arm."""

    label: str
    channels: tuple[int, ...]


@dataclass(frozen=True)
class DemoRobot:
    """One model's robot as the demo drives, measures and draws it."""

    model: str
    name: str  # "the simulated DROID arm"
    channels: tuple[str, ...]  # the measured values' names, in their order
    unit: str  # of every channel and of the distance
    # instruction -> what the gateway's simulated model reaches for, on the first channels
    target: Callable[[str], Sequence[float]]
    state_topic: str
    state_message: str  # "package.msg:Type"
    read_state: Reader
    state_what: str  # what the state is, for progress lines: "joint states"
    commands: tuple[CommandTopic, ...]
    groups: tuple[Group, ...]
    command_label: str  # legend of the node's commands in the picture
    measured_label: str
    cameras: str  # for the picture's title: "1280x720"
    # Panel labels, one per channel; default "<channel> (<unit>)".
    channel_labels: tuple[str, ...] = ()
    # Empty when `--planner vlm` can plan for this robot; else why not.
    no_vlm_planner: str = ""

    def label(self, channel: int) -> str:
        if self.channel_labels:
            return self.channel_labels[channel]
        return f"{self.channels[channel]} ({self.unit})"

    def instruction_target(self, instruction: str) -> list[float]:
        values = [float(v) for v in self.target(instruction)]
        if not 0 < len(values) <= len(self.channels):
            raise ValueError(
                f"{self.model}: the target of {instruction!r} has {len(values)} values; "
                f"expected 1..{len(self.channels)} (one per channel: {', '.join(self.channels)})"
            )
        return values

    def distance(self, state: Sequence[float] | None, target: Sequence[float],
                 group: Group | None = None) -> float:
        """Euclidean distance of the targeted channels (of `group`, default all) to `target`."""
        if state is None:
            return math.nan
        channels = group.channels if group is not None else range(len(self.channels))
        pairs = [(state[i], target[i]) for i in channels if i < len(target)]
        return math.sqrt(sum((a - b) ** 2 for a, b in pairs))

    def command_row(
        self, command: CommandTopic, msg: Float64MultiArray | PoseStamped
    ) -> list[float] | None:
        """A command as a row over every channel (NaN where this topic says nothing)."""
        values = command.read(msg)
        if values is None:
            return None
        row = [math.nan] * len(self.channels)
        span = values[: len(self.channels) - command.first]
        row[command.first: command.first + len(span)] = span
        return row


def message_class(path: str) -> type:
    """The ROS message class of "package.msg:Type" (imported only when the demo runs)."""
    module, _, name = path.partition(":")
    return getattr(importlib.import_module(module), name)


def joint_reader(names: Sequence[str]) -> Reader:
    """Positions of `names`, in that order, from a JointState (None if one is missing)."""
    wanted = tuple(names)

    def read(msg: JointState) -> list[float] | None:
        index = {name: i for i, name in enumerate(msg.name)}
        try:
            return [msg.position[index[name]] for name in wanted]
        except (KeyError, IndexError):
            return None

    return read


def array_values(msg: Float64MultiArray) -> list[float] | None:
    """A Float64MultiArray's values."""
    return list(msg.data)


def pose_position(msg: PoseStamped) -> list[float] | None:
    """x, y, z of a PoseStamped."""
    p = msg.pose.position
    return [p.x, p.y, p.z]


def _panda_target(instruction: str) -> list[float]:
    # The gateway's simulated Franka models (pi05-droid, cosmos3) reach for this configuration.
    from sequence_ai_gateway.models import catalogue
    from sequence_ai_gateway.policies import instruction_target

    return instruction_target(instruction, catalogue.PANDA_LOWER, catalogue.PANDA_UPPER)


def _bimanual_target(instruction: str) -> list[float]:
    # AbsoluteJointReach for sim-bimanual-reach: instruction_target over its 12 arm joints'
    # ±LIMIT_RAD (sim_bimanual's limits; test_demo_robots checks the gateway's rows reach it).
    from sequence_ai_gateway.policies import instruction_target
    from sequence_ai_lab.robots.sim_bimanual.bimanual import JOINT_NAMES, LIMIT_RAD

    joints = len(JOINT_NAMES)
    return instruction_target(instruction, [-LIMIT_RAD] * joints, [LIMIT_RAD] * joints)


def _panda(model: str) -> DemoRobot:
    names = tuple(f"panda_joint{j}" for j in range(1, 8))
    return DemoRobot(
        model=model,
        name="the simulated DROID arm",
        channels=names,
        unit="rad",
        target=_panda_target,
        state_topic="joint_states",
        state_message="sensor_msgs.msg:JointState",
        read_state=joint_reader(names),
        state_what="joint states",
        commands=(
            CommandTopic(
                "forward_position_controller/commands", "std_msgs.msg:Float64MultiArray", 0,
                array_values,
            ),
        ),
        groups=(Group("", tuple(range(len(names)))),),
        command_label="joint target sent by the node",
        measured_label="measured joint position",
        cameras="{}x{}".format(*IMAGE_SIZE),
    )


def _bimanual() -> DemoRobot:
    arms = {side: tuple(f"{side}_joint{i}" for i in range(1, 7)) for side in ("left", "right")}
    grippers = ("left_gripper", "right_gripper")
    names = (*arms["left"], *arms["right"], *grippers)
    float_array = "std_msgs.msg:Float64MultiArray"
    return DemoRobot(
        model="sim-bimanual-reach",
        name="the simulated two-arm robot",
        channels=names,
        unit="rad",
        target=_bimanual_target,
        state_topic="joint_states",
        state_message="sensor_msgs.msg:JointState",
        read_state=joint_reader(names),
        state_what="joint states",
        commands=(
            CommandTopic("left_arm_controller/commands", float_array, 0, array_values),
            CommandTopic("right_arm_controller/commands", float_array, 6, array_values),
            CommandTopic("left_gripper_controller/commands", float_array, 12, array_values),
            CommandTopic("right_gripper_controller/commands", float_array, 13, array_values),
        ),
        # One column per arm: its six joints, then its gripper (0 open .. 1 closed).
        groups=(
            Group("left arm", (*range(0, 6), 12)),
            Group("right arm", (*range(6, 12), 13)),
        ),
        command_label="joint target sent by the node",
        measured_label="measured joint position",
        cameras="320x240",  # sim_bimanual's image_width x image_height
        channel_labels=(
            *(f"{name} (rad)" for name in names[:12]),
            *(f"{name} (0 open, 1 closed)" for name in grippers),
        ),
        no_vlm_planner=PANDA_ONLY_PLANNER,
    )


def cartesian_robot(
    model: str, space: str, target: Callable[[str], Sequence[float]]
) -> DemoRobot:
    """A Cartesian-commanded arm (sim_cartesian): its end-effector position from `ee_pose`.

    `space` is the model's action space, ee_delta (twists to MoveIt Servo: no position to
    draw) or ee_absolute (target poses, drawn); `target` maps an instruction to the x, y, z
    (m, in the base frame) the gateway's simulated model steers towards.
    """
    if space not in ("ee_delta", "ee_absolute"):
        raise ValueError(f"{model}: action space {space!r}; expected ee_delta or ee_absolute")
    commands = () if space == "ee_delta" else (
        CommandTopic(
            "cartesian_motion_controller/target_frame", "geometry_msgs.msg:PoseStamped", 0,
            pose_position,
        ),
    )
    return DemoRobot(
        model=model,
        name="the simulated Cartesian arm",
        channels=("x", "y", "z"),
        unit="m",
        target=target,
        state_topic="ee_pose",
        state_message="geometry_msgs.msg:PoseStamped",
        read_state=pose_position,
        state_what="end-effector poses",
        commands=commands,
        groups=(Group("", (0, 1, 2)),),
        command_label="end-effector target sent by the node",
        measured_label="measured end-effector position",
        cameras="256x256",  # sim_cartesian's front camera (docs/sim.md)
        no_vlm_planner=PANDA_ONLY_PLANNER,
    )


def _ee_target(instruction: str) -> list[float]:
    # The gateway's simulated end-effector models steer the hand towards this position.
    from sequence_ai_gateway.policies import ee_target

    return ee_target(instruction)


# The models `--model` takes.
ROBOTS: dict[str, DemoRobot] = {
    "pi05-droid": _panda("pi05-droid"),
    "cosmos3-edge-policy-droid": _panda("cosmos3-edge-policy-droid"),
    "sim-bimanual-reach": _bimanual(),
    "sim-stateless-ee-delta": cartesian_robot("sim-stateless-ee-delta", "ee_delta", _ee_target),
    "sim-ee-absolute-reach": cartesian_robot(
        "sim-ee-absolute-reach", "ee_absolute", _ee_target
    ),
}


def robot_for(model: str) -> DemoRobot:
    """The demo's description of `model`'s robot; a clear error for a model it does not know."""
    try:
        return ROBOTS[model]
    except KeyError:
        raise ValueError(
            f"--model {model}: the demo knows {', '.join(sorted(ROBOTS))}"
        ) from None
