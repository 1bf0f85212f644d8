"""Configure-time checks: do the configured cameras, joints and command interface fit the model?"""

from __future__ import annotations

from dataclasses import replace

from sequence_ai import Controller, Model, joint_position_problem
from sequence_ai_ros.core.command_kinds import EE_SPACES, CommandMode, Interface
from sequence_ai_ros.core.node_config import NodeConfig
from sequence_ai_ros.geometry import command_frame


def space_of(model: Model) -> str:
    """The model's action space, lower case ("" when the row declares none)."""
    return (model.action_space or "").lower()


def cartesian_problems(config: NodeConfig, model: Model) -> list[str]:
    """Why an ee model (ee_delta, ee_absolute) cannot be commanded with these parameters."""
    name, space = model.short_id, space_of(model)
    problems = []
    if config.command_mode is CommandMode.CHUNK:
        problems.append(
            f"command_mode is chunk; model {name} action_space {space} plays in step mode "
            "(chunk mode is for joint trajectories), expected command_mode step or auto"
        )
    if config.command_groups:
        problems.append(
            f"command_groups {list(config.command_groups)} split joint rows; model {name} "
            f"action_space {space} is commanded on "
            f"{'twist_topic' if space == 'ee_delta' else 'pose_target_topic'}, expected []"
        )
    frame = command_frame.problem(config, name, command_frame.tf2_imports())
    if frame is not None:
        problems.append(frame)
    if model.action_dim is not None and model.action_dim < 6:
        problems.append(
            f"model {name} action_dim is {model.action_dim}; an {space} row needs 6 values "
            "(x, y, z, roll, pitch, yaw) and the gripper"
        )
    return problems


def controller_for(config: NodeConfig, model: Model) -> tuple[Controller | None, list[str]]:
    """The client `controller=` for this model and command interface, or the reasons it has none.

    position: joint position rows, as the client reads the catalogue row (absolute joint rows
    as they come, or joint_delta rows through the verified state_at_request conversion).
    velocity: joint_delta rows are normalised joint velocities; the node scales them.
    """
    if space_of(model) in EE_SPACES:
        # Rows as the model returns them: the Cartesian gate refuses a row out of range, it
        # never clips one (prepare() would) to make it pass.
        return Controller.RAW, cartesian_problems(config, model)
    if config.command_interface is Interface.POSITION:
        problem = joint_position_problem(model)
        if problem is not None:
            return None, [f"command_interface position: {problem}"]
        return Controller.JOINT_POSITION, []
    space = space_of(model)
    if space == "joint_delta":
        return Controller.NATIVE, []
    return None, [
        f"command_interface velocity: model {model.short_id} action space {space!r} is not "
        "a joint velocity; expected joint_delta (use command_interface position)"
    ]


def fit(config: NodeConfig, model: Model) -> tuple[Controller | None, list[str]]:
    """The controller the goals run with, and every mismatch between the parameters and the
    model's catalogue row (none when the controller is not None)."""
    controller, problems = controller_for(config, model)
    # An ee model's state is its end-effector pose and gripper: joint_names are not used.
    row_config = replace(config, joint_names=()) if space_of(model) in EE_SPACES else config
    return controller, _row_problems(row_config, model) + problems


def fit_problems(config: NodeConfig, model: Model) -> list[str]:
    """Every mismatch between the parameters and the model's catalogue row."""
    return fit(config, model)[1]


def _row_problems(config: NodeConfig, model: Model) -> list[str]:
    problems = []
    if not model.control_hz or model.control_hz <= 0:
        problems.append(
            f"model {model.short_id} has no control_hz in its catalogue row; the node plays "
            "and checks steps at the catalogue's rate"
        )
    declared = tuple(model.camera_views or ())
    if declared and set(config.camera_views) != set(declared):
        missing = [v for v in declared if v not in config.camera_views]
        unknown = [v for v in config.camera_views if v not in declared]
        detail = []
        if missing:
            detail.append(f"missing {missing}")
        if unknown:
            detail.append(f"unknown {unknown}")
        problems.append(
            f"camera_views {list(config.camera_views)} do not match model {model.short_id} "
            f"views {list(declared)} ({'; '.join(detail)})"
        )
    # The client reads the layout; the node only words the mismatch in its parameters.
    split = model.state_split
    if split is not None:
        joints_expected, gripper_expected = split
        if len(config.joint_names) != joints_expected:
            problems.append(
                f"joint_names has {len(config.joint_names)} joints; model {model.short_id} "
                f"state_layout expects joint_positions: {joints_expected}"
            )
        grippers = config.grippers
        if len(grippers) != gripper_expected:
            problems.append(
                f"{config.gripper_parameter} names {len(grippers)} grippers {list(grippers)}; "
                f"model {model.short_id} state_layout expects gripper: {gripper_expected}"
                + _gripper_hint(gripper_expected)
            )
    elif model.state_dim:
        given = len(config.joint_names) + len(config.grippers)
        if given != model.state_dim:
            problems.append(
                f"joint_names plus {config.gripper_parameter} give {given} state values; model "
                f"{model.short_id} state_dim is {model.state_dim}"
            )
    return problems


def _gripper_hint(expected: int) -> str:
    if expected == 0:
        return " (set gripper_joint to '' and gripper_joints to [])"
    if expected == 1:
        return " (set gripper_joint)"
    return f" (set gripper_joints to the {expected} gripper joints in the model's order)"
