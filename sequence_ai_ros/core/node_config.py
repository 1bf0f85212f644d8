"""`NodeConfig`: one consistent snapshot of every parameter, as plain values. ROS-free: the
table that declares and checks the parameters is spec_table.py, the whole-snapshot checks
config_checks.py."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from sequence_ai import VALIDATE_MODES, ValidateMode
from sequence_ai_ros.core.command_kinds import (
    AUTO_MODE,
    COMMAND_INTERFACES,
    COMMAND_MODES,
    JOINT_TRAJECTORY,
    CommandMode,
    Interface,
)
from sequence_ai_ros.core.joint_limits import JointLimit

# The parameters a snapshot turns into enums, with the values each accepts.
_CHOICES = {
    "validate_mode": VALIDATE_MODES,
    "command_interface": COMMAND_INTERFACES,
    "command_mode": COMMAND_MODES,
}


@dataclass(frozen=True)
class NodeConfig:
    """A consistent snapshot of every parameter."""

    model: str
    base_url: str
    api_key_file: str
    validate_mode: ValidateMode
    camera_views: tuple[str, ...]
    camera_topics: tuple[str, ...]
    camera_transports: tuple[str, ...]
    joint_states_topic: str
    joint_names: tuple[str, ...]
    gripper_joint: str
    command_interface: Interface
    command_topic: str
    command_type: str
    # `auto` resolved by the command type (an explicit chunk is checked by check_config).
    command_mode: CommandMode
    gripper_command_topic: str
    velocity_scale: float
    prefetch: bool
    max_in_flight: int
    playback_speed: float | str
    smooth_seam: int
    configure_timeout_s: float
    max_control_hz: float
    max_joint_velocity: float
    max_instruction_chars: int
    startup_timeout_s: float
    jpeg_quality: int
    max_goal_seconds: float
    max_state_age_s: float
    max_image_age_s: float
    max_frame_pixels: int
    joint_lower_limits: tuple[float, ...]
    joint_upper_limits: tuple[float, ...]
    max_step: float
    hold_between_goals: bool
    hold_republish_hz: float
    input_wait_s: float
    record: str
    record_dir: str
    record_max_mb: float
    record_cameras_hz: float
    dry_run: bool = False
    enable_topic: str = ""
    enable_timeout_s: float = 0.5
    end_goal_without_client_s: float = 0.0
    joint_limits_file: str = ""
    # Per joint_names entry: its ros2_control limits (joint_limits.py), from the file and the
    # joint_limits.<joint>.* parameters; why they could not be read ("" when they could).
    joint_limits: tuple[JointLimit, ...] = ()
    joint_limits_problem: str = ""
    gripper_joints: tuple[str, ...] = ()
    command_groups: tuple[str, ...] = ()
    base_frame: str = "panda_link0"
    ee_frame: str = "panda_hand_tcp"
    command_frame: str = ""
    command_frame_transform: tuple[float, ...] = ()
    ee_pose_topic: str = "ee_pose"
    twist_topic: str = "servo_node/delta_twist_cmds"
    pose_target_topic: str = "cartesian_motion_controller/target_frame"
    servo_command_type: str = "unitless"
    linear_scale: float = 0.4
    rotational_scale: float = 0.8
    workspace_min: tuple[float, ...] = (0.2, -0.45, 0.05)
    workspace_max: tuple[float, ...] = (0.8, 0.45, 0.8)
    max_linear_speed: float = 0.5
    max_angular_speed: float = 1.0
    max_pose_age_s: float = 0.25

    @property
    def grippers(self) -> tuple[str, ...]:
        """The gripper joints in the model's order: gripper_joints, or the one gripper_joint."""
        return self.gripper_joints or ((self.gripper_joint,) if self.gripper_joint else ())

    @property
    def gripper_parameter(self) -> str:
        """The parameter that names the grippers, for refusals."""
        return "gripper_joints" if self.gripper_joints else "gripper_joint"

    @classmethod
    def from_values(cls, values: Mapping[str, Any]) -> NodeConfig:
        """The snapshot of parameter values; a refused enum value raises ValueError naming it."""
        # Parameter values come dynamically typed from ROS (lists for arrays); the enums are built
        # here by name and the rest are the types spec_table.py declared.
        converted: dict[str, Any] = {
            name: tuple(value) if isinstance(value, (list, tuple)) else value
            for name, value in values.items()
        }
        refused = [
            f"{name}={converted[name]!r} is refused; expected one of: {', '.join(accepted)}"
            for name, accepted in _CHOICES.items()
            if converted[name] not in accepted
        ]
        if refused:
            raise ValueError("; ".join(refused))
        plain = {name: value for name, value in converted.items() if name not in _CHOICES}
        interface = Interface(values["command_interface"])
        return cls(
            **plain,
            validate_mode=ValidateMode(values["validate_mode"]),
            command_interface=interface,
            command_mode=_resolved_mode(values["command_mode"], values["command_type"], interface),
        )


def _resolved_mode(mode: str, command_type: str, interface: Interface) -> CommandMode:
    """The `command_mode` in force: `auto` is chunk for a JointTrajectory of positions."""
    if mode != AUTO_MODE:
        return CommandMode(mode)
    chunk = command_type == JOINT_TRAJECTORY and interface is Interface.POSITION
    return CommandMode.CHUNK if chunk else CommandMode.STEP
