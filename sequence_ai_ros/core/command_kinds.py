"""The kinds of command the node can send, as plain values: the controller message types, what a
command carries (`Interface`), how it is timed (`CommandMode`) and the end-effector action
spaces. ROS-free, so the gate, the stop policy and model fit import them without the parameter
layer."""

from __future__ import annotations

import enum

FLOAT64_MULTI_ARRAY = "std_msgs/msg/Float64MultiArray"
JOINT_TRAJECTORY = "trajectory_msgs/msg/JointTrajectory"
JOINT_STATE = "sensor_msgs/msg/JointState"
COMMAND_TYPES = (FLOAT64_MULTI_ARRAY, JOINT_TRAJECTORY, JOINT_STATE)


class Interface(str, enum.Enum):
    """What an arm command carries (the `command_interface` parameter)."""

    POSITION = "position"
    VELOCITY = "velocity"


class CommandMode(str, enum.Enum):
    """How the arm is commanded (the `command_mode` parameter, `auto` resolved)."""

    STEP = "step"  # one command per control period
    CHUNK = "chunk"  # each chunk as one timed JointTrajectory


AUTO_MODE = "auto"
COMMAND_INTERFACES = tuple(interface.value for interface in Interface)
COMMAND_MODES = (AUTO_MODE, *(mode.value for mode in CommandMode))

# The end-effector action spaces of ee models: a pose change per row, or the pose itself.
EE_DELTA = "ee_delta"
EE_ABSOLUTE = "ee_absolute"
EE_SPACES = (EE_DELTA, EE_ABSOLUTE)
