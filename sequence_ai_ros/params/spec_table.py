"""The node's parameter table: each parameter's default, meaning and accepted values, its ROS
descriptor, the check of one value with its reason, and reading a snapshot from a node."""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from rcl_interfaces.msg import (
    FloatingPointRange,
    IntegerRange,
    ParameterDescriptor,
)
from rclpy.node import Node
from rclpy.parameter import Parameter

from sequence_ai import AUTO_SPEED as AUTO
from sequence_ai import MAX_IN_FLIGHT, MIN_SPEED, VALIDATE_MODES
from sequence_ai_ros.core import joint_limits
from sequence_ai_ros.core.command_kinds import (
    COMMAND_INTERFACES,
    COMMAND_MODES,
    COMMAND_TYPES,
    FLOAT64_MULTI_ARRAY,
    JOINT_TRAJECTORY,
)
from sequence_ai_ros.core.joint_limits import JointLimit, JointLimitsError
from sequence_ai_ros.core.node_config import NodeConfig
from sequence_ai_ros.inputs.image_conversion import MAX_FRAME_PIXELS
from sequence_ai_ros.safety import cartesian_rules
from sequence_ai_ros.safety.joint_limits_file import LimitsFile, read_bounded

TRANSPORTS = ("raw", "compressed")

PANDA_JOINTS = [f"panda_joint{i}" for i in range(1, 8)]
# Franka Panda joint position limits (rad), the arm the DROID models were trained on.
PANDA_LOWER = [-2.8973, -1.7628, -2.8973, -3.0718, -2.8973, -0.0175, -2.8973]
PANDA_UPPER = [2.8973, 1.7628, 2.8973, -0.0698, 2.8973, 3.7525, 2.8973]

SMOOTH_SEAM_MAX = 15
# A tool without the node's LimitsFile (preflight) reads joint_limits_file within this.
LIMITS_READ_TIMEOUT_S = 2.0
# The arm side's bound on the catalogue's rate (docs/node.md "Rate bound"): 50 Hz is the
# fastest a catalogued model plays (the bimanual one), above the DROID Franka's 15 Hz
# (pi05-droid) and the 25 Hz ee model; a catalogue claiming more is refused at configure.
DEFAULT_MAX_CONTROL_HZ = 50.0
# The Franka Panda's lowest joint velocity limit (joints 1-4: 2.175 rad/s; 5-7: 2.61 rad/s).
PANDA_MIN_VELOCITY_LIMIT = 2.175


@dataclass(frozen=True)
class Spec:
    """One parameter: default, meaning, when it applies, accepted values.

    `at_configure` parameters are read at configure: they can be set while the node is
    unconfigured and are refused once it is configured (cleanup first). The others are live
    and apply from the next goal. The type is the default's; `choices` apply to a string or to
    each element of a string list; `words` are strings accepted besides the default's type.
    """

    default: Any
    description: str
    at_configure: bool = False
    int_range: tuple[int, int] | None = None
    float_range: tuple[float, float] | None = None
    choices: tuple[str, ...] | None = None
    words: tuple[str, ...] = ()
    # The type when the default cannot tell it (an empty list reads as a byte array).
    kind: Parameter.Type | None = None

    @property
    def type_(self) -> Parameter.Type:
        return self.kind or Parameter.Type.from_parameter_value(self.default)


SPECS: dict[str, Spec] = {
    "model": Spec("pi05-droid", "catalogue model id (short or full)", at_configure=True),
    "base_url": Spec(
        "", "API base URL; empty = SEQUENCES_BASE_URL or the client default", at_configure=True
    ),
    "api_key_file": Spec(
        "",
        "file holding the API key; empty = SEQUENCES_API_KEY from the environment",
        at_configure=True,
    ),
    "validate_mode": Spec(
        "strict",
        "client pre-send check of views and state layout: warn | strict | off",
        at_configure=True,
        choices=VALIDATE_MODES,
    ),
    "camera_views": Spec(
        ["exterior_1", "wrist_left"], "model view names, one per camera topic", at_configure=True
    ),
    "camera_topics": Spec(
        ["cameras/exterior_1/image_raw", "cameras/wrist_left/image_raw"],
        "camera topic for each view (same order as camera_views)",
        at_configure=True,
    ),
    "camera_transports": Spec(
        ["raw", "raw"],
        "per view: raw (sensor_msgs/Image) or compressed (sensor_msgs/CompressedImage)",
        at_configure=True,
        choices=TRANSPORTS,
    ),
    "joint_states_topic": Spec(
        "joint_states", "sensor_msgs/JointState topic of the arm", at_configure=True
    ),
    "joint_names": Spec(
        PANDA_JOINTS, "arm joints in the order of the model's state layout", at_configure=True
    ),
    "gripper_joint": Spec(
        "", "JointState name of the gripper (0 open … 1 closed); empty = none", at_configure=True
    ),
    "gripper_joints": Spec(
        [],
        "JointState names of several grippers, in the model's order (instead of gripper_joint)",
        at_configure=True,
        kind=Parameter.Type.STRING_ARRAY,
    ),
    "command_groups": Spec(
        [],
        "names of command groups, one per controller (command_groups.<group>.joints|topic|"
        "type); empty = command_topic and gripper_command_topic",
        at_configure=True,
        kind=Parameter.Type.STRING_ARRAY,
    ),
    "command_interface": Spec(
        "position",
        "position (joint targets) or velocity (joint velocities)",
        at_configure=True,
        choices=COMMAND_INTERFACES,
    ),
    "command_topic": Spec(
        "forward_position_controller/commands", "topic for arm commands", at_configure=True
    ),
    "command_type": Spec(
        FLOAT64_MULTI_ARRAY,
        "arm command message type: " + " | ".join(COMMAND_TYPES),
        at_configure=True,
        choices=COMMAND_TYPES,
    ),
    "command_mode": Spec(
        "auto",
        "step (one command per control period) | chunk (each chunk as one timed "
        "JointTrajectory, for joint_trajectory_controller) | auto (chunk for "
        f"{JOINT_TRAJECTORY} with position targets, else step)",
        at_configure=True,
        choices=COMMAND_MODES,
    ),
    "gripper_command_topic": Spec(
        "gripper_controller/commands",
        "std_msgs/Float64MultiArray topic with one gripper value; empty = none",
        at_configure=True,
    ),
    # End-effector models (ee_delta, ee_absolute; docs/node.md "MoveIt Servo"). Read only
    # for them: a joint-space model ignores these.
    "base_frame": Spec(
        "panda_link0", "robot base frame: the observation's end_effector_pose and ee_absolute "
        "targets are in it (ee models)", at_configure=True,
    ),
    "ee_frame": Spec(
        "panda_hand_tcp", "end-effector frame looked up from base_frame with tf2 (ee models)",
        at_configure=True,
    ),
    "command_frame": Spec(
        "", "header.frame_id of TwistStamped / PoseStamped commands and the frame of "
        "workspace_min/max; empty = base_frame (ee models)", at_configure=True,
    ),
    "command_frame_transform": Spec(
        [], "base_frame's pose in command_frame [x, y, z, roll, pitch, yaw] (m, rad), as "
        "static_transform_publisher --frame-id <command_frame> --child-frame-id <base_frame> "
        "takes it; empty = looked up with tf2 (ee models, when command_frame differs)",
        at_configure=True, kind=Parameter.Type.DOUBLE_ARRAY,
    ),
    "ee_pose_topic": Spec(
        "ee_pose", "geometry_msgs/PoseStamped of the end effector in base_frame, used where "
        "tf2_ros does not import (ee models)", at_configure=True,
    ),
    "twist_topic": Spec(
        "servo_node/delta_twist_cmds", "MoveIt Servo's geometry_msgs/TwistStamped input "
        "(ee_delta)", at_configure=True,
    ),
    "pose_target_topic": Spec(
        "cartesian_motion_controller/target_frame", "a Cartesian controller's "
        "geometry_msgs/PoseStamped target (ee_absolute)", at_configure=True,
    ),
    "servo_command_type": Spec(
        "unitless", "MoveIt Servo's command_in_type: unitless (each twist value in [-1, 1], "
        "Servo scales it) | speed_units (the node sends row x linear/rotational_scale in m/s, "
        "rad/s) (ee_delta)", at_configure=True, choices=cartesian_rules.SERVO_COMMAND_TYPES,
    ),
    "linear_scale": Spec(
        0.4, "m/s per unit of an ee_delta row's linear part: Servo's scale.linear (ee_delta)",
        at_configure=True, float_range=(0.001, 10.0),
    ),
    "rotational_scale": Spec(
        0.8, "rad/s per unit of an ee_delta row's angular part: Servo's scale.rotational "
        "(ee_delta)", at_configure=True, float_range=(0.001, 20.0),
    ),
    "workspace_min": Spec(
        [0.2, -0.45, 0.05], "lowest x, y, z the end effector may be commanded to, in "
        "command_frame (m; ee models, next goal)",
    ),
    "workspace_max": Spec(
        [0.8, 0.45, 0.8], "highest x, y, z the end effector may be commanded to, in "
        "command_frame (m; ee models, next goal)",
    ),
    "max_linear_speed": Spec(
        0.5, "largest end-effector speed a command may imply (m/s; ee models, next goal)",
        float_range=(0.001, 10.0),
    ),
    "max_angular_speed": Spec(
        1.0, "largest end-effector turn rate a command may imply (rad/s; ee models, next goal)",
        float_range=(0.001, 20.0),
    ),
    "max_pose_age_s": Spec(
        0.25, "oldest end-effector pose a command may be checked against or an observation "
        "may use (s; ee models)", float_range=(0.001, 10.0),
    ),
    "velocity_scale": Spec(
        3.0,
        "rad/s per unit of a normalised velocity row (0.2 rad per step × 15 Hz)",
        float_range=(0.01, 10.0),
    ),
    "prefetch": Spec(True, "fetch the next chunk while the current one plays (next goal)"),
    "max_in_flight": Spec(
        1,
        "requests to the model in flight during a goal: a chunk lands about every latency/N, "
        "for N times the requests (next goal)",
        int_range=(1, MAX_IN_FLIGHT),
    ),
    "playback_speed": Spec(
        1.0,
        "speed at which chunks are played (1.0 = the model's), or auto: the largest the "
        "measured latency sustains without a hold (next goal)",
        float_range=(MIN_SPEED, 1.0),
        words=(AUTO,),
    ),
    "smooth_seam": Spec(
        0,
        "blend this many steps at each chunk seam, absolute spaces only (next goal)",
        int_range=(0, SMOOTH_SEAM_MAX),
    ),
    "configure_timeout_s": Spec(
        10.0,
        "longest configure waits for the service's catalogue; configure fails past it (s)",
        at_configure=True,
        float_range=(0.1, 600.0),
    ),
    "max_control_hz": Spec(
        DEFAULT_MAX_CONTROL_HZ,
        "highest control rate the arm accepts; a catalogue rate above it fails configure (Hz)",
        at_configure=True,
        float_range=(0.1, 1000.0),
    ),
    "max_joint_velocity": Spec(
        PANDA_MIN_VELOCITY_LIMIT,
        "largest joint velocity a velocity command may carry, any joint (rad/s)",
        float_range=(0.001, 100.0),
    ),
    "max_instruction_chars": Spec(
        1000,
        "longest goal instruction accepted; longer goals are rejected (characters)",
        int_range=(1, 1_000_000),
    ),
    "startup_timeout_s": Spec(
        300.0, "longest wait for a cold model to load (s)", float_range=(0.0, 3600.0)
    ),
    "jpeg_quality": Spec(
        95, "JPEG quality of camera frames sent to the model", int_range=(90, 100)
    ),
    "max_goal_seconds": Spec(
        120.0, "cap on any goal's max_seconds (s)", float_range=(0.1, 3600.0)
    ),
    "max_state_age_s": Spec(
        0.25, "oldest joint state an observation may use (s)", float_range=(0.001, 10.0)
    ),
    "max_image_age_s": Spec(
        0.5, "oldest camera frame an observation may use (s)", float_range=(0.001, 10.0)
    ),
    "max_frame_pixels": Spec(
        3840 * 2160,
        "largest compressed camera frame decoded (width x height, px): what the cameras are "
        "configured to deliver; a larger one is refused undecoded",
        int_range=(1, MAX_FRAME_PIXELS),
    ),
    "joint_lower_limits": Spec(PANDA_LOWER, "lower position limit per joint (rad)"),
    "joint_upper_limits": Spec(PANDA_UPPER, "upper position limit per joint (rad)"),
    "max_step": Spec(
        0.25,
        "largest change of a position target between steps (rad)",
        float_range=(0.001, 3.2),
    ),
    "joint_limits_file": Spec(
        "",
        "YAML file with ros2_control joint_limits (<joint>: has_velocity_limits, max_velocity, "
        "…); joint_limits.<joint>.* parameters override it; empty = none. Read at configure "
        "and when set (a regular file, no anchors or aliases), then again when it changes; a "
        "bad edit keeps the limits in force (next goal)",
    ),
    "hold_between_goals": Spec(
        True,
        "command a hold when a goal is preempted, before the next goal starts (position; a "
        "velocity arm gets zeros at every goal end)",
    ),
    "hold_republish_hz": Spec(
        1.0,
        "while no goal runs and hold_between_goals is true, send the last hold again at this "
        "rate, if it still passes the safety checks (0 = off)",
        at_configure=True,
        float_range=(0.0, 10.0),
    ),
    "dry_run": Spec(
        False,
        "run goals without moving anything: commands go to ~/planned and a JointState ghost to "
        "~/planned_joint_states, never to the arm (next goal); nothing is sent to the arm "
        "while it is true, not even the idle hold",
    ),
    "end_goal_without_client_s": Spec(
        0.0,
        "end a goal, held, once every action client that could have sent it has been gone from "
        "the ROS graph this long (s); 0 = off, as ROS 2 does: a goal runs on without its client",
        float_range=(0.0, 3600.0),
    ),
    "enable_topic": Spec(
        "",
        "std_msgs/Bool heartbeat (a teleop deadman, an e-stop bridge): motion only while a true "
        "arrived within enable_timeout_s; empty = none",
        at_configure=True,
    ),
    "enable_timeout_s": Spec(
        0.5,
        "longest gap between two true messages on enable_topic before motion stops (s)",
        at_configure=True,
        float_range=(0.01, 60.0),
    ),
    "input_wait_s": Spec(
        5.0,
        "how long a goal waits for every camera and the joint states to deliver a first "
        "message before it ends StaleObservation (s)",
        float_range=(0.0, 60.0),
    ),
    "record": Spec(
        "off",
        "off | goals: one MCAP episode file per act goal in record_dir (docs/recording.md)",
        choices=("off", "goals"),
    ),
    "record_dir": Spec("~/.ros/sequence_ai/episodes", "folder of the episode files"),
    "record_max_mb": Spec(
        2048.0,
        "largest size of record_dir's episodes; the oldest are removed first (MB, 0 = no bound)",
        float_range=(0.0, 1e7),
    ),
    "record_cameras_hz": Spec(
        0.0,
        "also record each camera's raw frames at this rate (Hz, 0 = only the JPEGs sent)",
        float_range=(0.0, 30.0),
    ),
}
# How a type is named in a refusal.
TYPE_NAMES = {
    Parameter.Type.BOOL: "a bool (true or false)",
    Parameter.Type.INTEGER: "an integer",
    Parameter.Type.DOUBLE: "a double (with a decimal point: 3.0, not 3)",
    Parameter.Type.STRING: "a string",
    Parameter.Type.STRING_ARRAY: "a list of strings",
    Parameter.Type.DOUBLE_ARRAY: "a list of doubles (with decimal points: [1.0], not [1])",
}


def declare_joint_limits(node: Node, joint_names: list[str]) -> None:
    """Declare `joint_limits.<joint>.<field>` for each joint not declared yet (the params file's
    values apply here). Dynamically typed: an integer limit from YAML is accepted."""
    for joint in joint_names:
        for field in joint_limits.FIELDS:
            name = joint_limits.parameter_name(joint, field)
            if not node.has_parameter(name):
                node.declare_parameter(
                    name,
                    joint_limits.parameter_default(field),
                    ParameterDescriptor(
                        name=name, description=f"ros2_control joint_limits {field} of {joint}",
                        dynamic_typing=True,
                    ),
                )


def read_joint_limits(
    node: Node, joint_names: list[str], table: Mapping[str, Mapping[str, object]]
) -> tuple[JointLimit, ...]:
    """Each joint's limits from joint_limits_file's `table` and the node's joint_limits
    parameters."""
    given = {
        joint: {
            field: node.get_parameter(name).value
            for field in joint_limits.FIELDS
            if node.has_parameter(name := joint_limits.parameter_name(joint, field))
        }
        for joint in joint_names
    }
    return joint_limits.resolve(joint_names, given, table)


def read_config(node: Node, limits_file: LimitsFile | None = None) -> NodeConfig:
    """The snapshot of `node`'s parameters, with each joint's limits (or why they are missing).
    `limits_file`: where joint_limits_file's table is kept (the node's, never waited on);
    without it the file is read, bounded by LIMITS_READ_TIMEOUT_S (a tool's one snapshot)."""
    values = {name: node.get_parameter(name).value for name in SPECS}
    path = values["joint_limits_file"]
    try:
        if limits_file is not None:
            table = limits_file.table_for(path)
        else:
            table = read_bounded(path, LIMITS_READ_TIMEOUT_S) if path else {}
        values["joint_limits"] = read_joint_limits(node, values["joint_names"], table)
    except JointLimitsError as exc:
        values["joint_limits_problem"] = str(exc)
    return NodeConfig.from_values(values)


def constraints(spec: Spec) -> str:
    """What a parameter accepts, in words: the descriptor's `additional_constraints`."""
    text = TYPE_NAMES[spec.type_]
    if spec.choices:
        each = "each " if spec.type_ is Parameter.Type.STRING_ARRAY else ""
        text += f", {each}one of: {', '.join(spec.choices)}"
    if spec.int_range is not None:
        text += f" in {spec.int_range[0]}..{spec.int_range[1]}"
    if spec.float_range is not None:
        text += f" in [{spec.float_range[0]}, {spec.float_range[1]}]"
    if spec.words:
        text += f", or the string {' or '.join(spec.words)}"
    if spec.at_configure:
        text += "; read at configure: set it while the node is unconfigured"
    return text


def _descriptor(name: str, spec: Spec, *, read_only: bool = False) -> ParameterDescriptor:
    # Dynamically typed so that a value of the wrong type reaches validation_callback, which
    # names the parameter, the value and what is allowed (rclpy's own type refusal names none).
    descriptor = ParameterDescriptor(
        name=name,
        description=spec.description,
        additional_constraints=constraints(spec),
        dynamic_typing=True,
        read_only=read_only,
    )
    if spec.int_range is not None:
        descriptor.integer_range = [
            IntegerRange(from_value=spec.int_range[0], to_value=spec.int_range[1], step=1)
        ]
    if spec.float_range is not None:
        descriptor.floating_point_range = [
            FloatingPointRange(from_value=spec.float_range[0], to_value=spec.float_range[1])
        ]
    return descriptor


def declare(node: Node) -> None:
    """Declare every parameter with its descriptor (overrides from --params-file apply here)."""
    for name, spec in SPECS.items():
        node.declare_parameter(name, spec.default, _descriptor(name, spec))
    declare_joint_limits(node, list(node.get_parameter("joint_names").value))


def declare_read_only(node: Node, specs: dict[str, Spec]) -> dict[str, Any]:
    """Declare `specs` read-only on `node` and return their values; any refused value raises
    ValueError naming each parameter, its value and what it accepts (another node's table, such
    as the simulator's, checked as this node's own)."""
    values = {
        name: node.declare_parameter(
            name, spec.default, _descriptor(name, spec, read_only=True)
        ).value
        for name, spec in specs.items()
    }
    refused = [
        reason
        for name, spec in specs.items()
        if (reason := spec_problem(name, spec, values[name])) is not None
    ]
    if refused:
        raise ValueError("; ".join(refused))
    return values


def shown(value: Any) -> str:
    if isinstance(value, (list, tuple)) or type(value).__name__ == "array":
        return repr(list(value))
    return repr(value)


def check_value(name: str, value: Any) -> str | None:
    """Why `value` is not acceptable for parameter `name`, or None."""
    spec = SPECS.get(name)
    if spec is None:
        return f"{name} is not a parameter of this node"
    reason = spec_problem(name, spec, value)
    if reason is None and name in ("joint_lower_limits", "joint_upper_limits"):
        if not all(math.isfinite(v) for v in value):
            return f"{name}={shown(value)} has a non-finite value; expected finite radians"
    return reason


def spec_problem(name: str, spec: Spec, value: Any) -> str | None:
    """Why `value` does not meet `spec` (its type, choices, range, words), or None."""
    if spec.words and isinstance(value, str):
        if value in spec.words:
            return None
        return f"{name}={shown(value)} is refused; expected {constraints(spec)}"
    given = Parameter.Type.from_parameter_value(value) if value is not None else None
    empty_list = isinstance(value, (list, tuple)) and not value
    if given is not spec.type_ and not (empty_list and spec.type_.name.endswith("_ARRAY")):
        kind = TYPE_NAMES.get(given, given.name.lower() if given else "not set")
        return f"{name}={shown(value)} ({kind}) is refused; expected {constraints(spec)}"
    refused = f"{name}={shown(value)} is refused; expected {constraints(spec)}"
    if spec.choices is not None:
        values = value if spec.type_ is Parameter.Type.STRING_ARRAY else [value]
        if any(v not in spec.choices for v in values):
            return refused
    if spec.int_range is not None:
        lo, hi = spec.int_range
        if not lo <= value <= hi:
            return refused
    if spec.float_range is not None:
        lo, hi = spec.float_range
        if not (math.isfinite(value) and lo <= value <= hi):
            return refused
    return None


