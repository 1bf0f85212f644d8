"""Checks of a whole parameter snapshot (each problem names its parameter and what was
expected), the on-set-parameters callback that keeps a live change valid, and the bound on the
catalogue's rate."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from rcl_interfaces.msg import SetParametersResult
from rclpy.parameter import Parameter

from sequence_ai_ros.core import joint_limits
from sequence_ai_ros.core.command_kinds import JOINT_TRAJECTORY, CommandMode, Interface
from sequence_ai_ros.core.node_config import NodeConfig
from sequence_ai_ros.params.spec_table import SPECS, check_value, shown
from sequence_ai_ros.safety import cartesian_rules


def check_config(config: NodeConfig) -> list[str]:
    """Every problem of a parameter snapshot, each naming the parameter and what was expected."""
    problems = [
        reason for name in SPECS if (reason := check_value(name, getattr(config, name))) is not None
    ]
    n_views = len(config.camera_views)
    if n_views == 0:
        problems.append("camera_views is empty; expected the model's view names")
    for other in ("camera_topics", "camera_transports"):
        if len(getattr(config, other)) != n_views:
            problems.append(
                f"{other} has {len(getattr(config, other))} entries; expected one per "
                f"camera_views entry ({n_views})"
            )
    if len(set(config.camera_views)) != n_views:
        problems.append(f"camera_views {list(config.camera_views)} repeats a view")
    if not config.joint_names:
        problems.append("joint_names is empty; expected the arm joints in the model's order")
    if len(set(config.joint_names)) != len(config.joint_names):
        problems.append(f"joint_names {list(config.joint_names)} repeats a joint")
    problems.extend(_gripper_problems(config))
    problems.extend(_limit_problems(config))
    problems.extend(_cartesian_problems(config))
    problems.extend(_mode_problems(config))
    if config.joint_limits_problem:
        problems.append(config.joint_limits_problem)
    for limit in config.joint_limits:
        problems.extend(limit.problems())
    return problems


def _gripper_problems(config: NodeConfig) -> list[str]:
    problems = []
    if config.gripper_joint and config.gripper_joints:
        problems.append(
            f"gripper_joint {config.gripper_joint!r} and gripper_joints "
            f"{list(config.gripper_joints)} are both set; expected one of them (gripper_joints "
            "for several grippers)"
        )
    grippers = config.grippers
    if len(set(grippers)) != len(grippers) or "" in grippers:
        problems.append(
            f"gripper_joints {list(grippers)} repeats a joint or has an empty name; expected "
            "each gripper's JointState name once"
        )
    for name in grippers:
        if name and name in config.joint_names:
            problems.append(
                f"{config.gripper_parameter} {name!r} is also in joint_names; expected it apart"
            )
    return problems


def _mode_problems(config: NodeConfig) -> list[str]:
    if config.command_mode is not CommandMode.CHUNK:
        return []
    problems = []
    if config.command_groups:
        problems.append(
            f"command_groups {list(config.command_groups)} play in step mode; command_mode "
            "is chunk, expected step"
        )
    if config.command_type != JOINT_TRAJECTORY:
        problems.append(
            f"command_mode=chunk publishes each chunk as one {JOINT_TRAJECTORY}; command_type "
            f"is {config.command_type}, expected {JOINT_TRAJECTORY} (or command_mode step)"
        )
    if config.command_interface is not Interface.POSITION:
        problems.append(
            f"command_mode=chunk plays joint position targets; command_interface is "
            f"{config.command_interface.value}, expected position (or command_mode step)"
        )
    return problems


def _cartesian_problems(config: NodeConfig) -> list[str]:
    """The Cartesian limits (ee models), each problem naming its parameter."""
    return cartesian_rules.CartesianLimits(
        tuple(config.workspace_min),
        tuple(config.workspace_max),
        config.max_linear_speed,
        config.max_angular_speed,
    ).problems()


def _limit_problems(config: NodeConfig) -> list[str]:
    n = len(config.joint_names)
    problems = []
    for name in ("joint_lower_limits", "joint_upper_limits"):
        if len(getattr(config, name)) != n:
            problems.append(
                f"{name} has {len(getattr(config, name))} values; expected one per "
                f"joint_names entry ({n})"
            )
    if not problems:
        for joint, lo, hi in zip(
            config.joint_names, config.joint_lower_limits, config.joint_upper_limits
        ):
            if not lo < hi:
                problems.append(
                    f"joint_lower_limits/joint_upper_limits for {joint} are [{lo}, {hi}]; "
                    "expected lower < upper"
                )
    return problems


def validation_callback(
    current: Callable[[], dict[str, Any]],
    configured_as: Callable[[], str | None],
    check_limits_file: Callable[[str], str | None] = lambda _path: None,
) -> Callable[[list[Parameter]], SetParametersResult]:
    """An on-set-parameters callback that accepts a change only if the result stays valid.

    `configured_as()` is the lifecycle state while the node is configured (then parameters
    read at configure are refused), else None; `check_limits_file(path)` says why
    joint_limits_file may not be `path` (bounded: it runs on the executor). Validation only:
    the node reads live values when a goal starts, so nothing is applied here (Humble has no
    post-set callback).
    """

    def on_set(params: list[Parameter]) -> SetParametersResult:
        merged = dict(current())
        state = configured_as()
        for param in params:
            spec = SPECS.get(param.name)
            if param.name.startswith(f"{joint_limits.PREFIX}."):
                refused = joint_limits.check_field(param.name, param.value)
                if refused:
                    return SetParametersResult(successful=False, reason=refused)
            if spec is None:
                continue
            value = None if param.type_ is Parameter.Type.NOT_SET else param.value
            reason = check_value(param.name, value)
            if reason is None and param.name == "joint_limits_file":
                reason = check_limits_file(value)
            if reason is None and spec.at_configure and state is not None:
                reason = (
                    f"{param.name}={shown(value)} is refused while the node is {state}: it is "
                    "read at configure (deactivate and cleanup, set it, then configure)"
                )
            if reason:
                return SetParametersResult(successful=False, reason=reason)
            merged[param.name] = value
        if any(p.name in ("joint_lower_limits", "joint_upper_limits") for p in params):
            problems = _limit_problems(NodeConfig.from_values(merged))
            if problems:
                return SetParametersResult(successful=False, reason="; ".join(problems))
        return SetParametersResult(successful=True)

    return on_set


def rate_problem(config: NodeConfig, control_hz: float) -> str | None:
    """Why the catalogue's rate is more than the arm accepts, or None: the catalogue comes from
    the same service as the chunks, so the robot's side bounds it."""
    if control_hz > config.max_control_hz:
        return (
            f"the catalogue's control_hz for {config.model} is {control_hz:g} Hz; expected at "
            f"most max_control_hz = {config.max_control_hz:g} Hz (the highest rate this arm "
            "accepts)"
        )
    return None
