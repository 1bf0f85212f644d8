"""Configure-time checks: do the configured cameras, joints and command interface fit the model?"""

from __future__ import annotations

from sequence_ai import Model
from sequence_ai_ros.parameters import NodeConfig

# Action spaces whose rows (after the client's conversion) are absolute joint positions.
_ABSOLUTE_JOINT_SPACES = ("joint_absolute", "joint_position", "joint_pos")


def controller_for(config: NodeConfig, model: Model) -> tuple[str | None, list[str]]:
    """The client `controller=` for this model and command interface, or the reasons it has none.

    position: absolute joint rows as they come (prepared), or joint_delta rows through the
    model's verified joint_position conversion (reference = joints at request time).
    velocity: joint_delta rows are normalised joint velocities; the node scales them.
    """
    space = (model.action_space or "").lower()
    semantics = model.action_semantics or {}
    conversion = (semantics.get("conversions") or {}).get("joint_position")
    if config.command_interface == "position":
        if space in _ABSOLUTE_JOINT_SPACES:
            return "joint_position", []
        if space == "joint_delta":
            if not isinstance(conversion, dict):
                return None, [
                    f"command_interface position: model {model.short_id} emits joint_delta rows "
                    "and its catalogue row declares no verified joint_position conversion"
                ]
            if conversion.get("reference") != "state_at_request":
                return None, [
                    f"command_interface position: model {model.short_id}'s joint_position "
                    f"conversion uses reference {conversion.get('reference')!r}; expected "
                    "'state_at_request'"
                ]
            return "joint_position", []
        return None, [
            f"command_interface position: model {model.short_id} action space {space!r} has no "
            "joint position meaning; expected joint_delta or joint_absolute"
        ]
    if space == "joint_delta":
        return "native", []
    return None, [
        f"command_interface velocity: model {model.short_id} action space {space!r} is not "
        "a joint velocity; expected joint_delta (use command_interface position)"
    ]


def fit_problems(config: NodeConfig, model: Model) -> list[str]:
    """Every mismatch between the parameters and the model's catalogue row."""
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
    layout = model.state_layout
    if layout is not None:
        joints_expected = int(layout.get("joint_positions", 0))
        gripper_expected = int(layout.get("gripper", 0))
        if len(config.joint_names) != joints_expected:
            problems.append(
                f"joint_names has {len(config.joint_names)} joints; model {model.short_id} "
                f"state_layout expects joint_positions: {joints_expected}"
            )
        gripper_given = 1 if config.gripper_joint else 0
        if gripper_given != gripper_expected:
            problems.append(
                f"gripper_joint is {config.gripper_joint!r}; model {model.short_id} "
                f"state_layout expects gripper: {gripper_expected}"
                + (" (set gripper_joint)" if gripper_expected else " (set gripper_joint to '')")
            )
    elif model.state_dim:
        given = len(config.joint_names) + (1 if config.gripper_joint else 0)
        if given != model.state_dim:
            problems.append(
                f"joint_names plus gripper_joint give {given} state values; model "
                f"{model.short_id} state_dim is {model.state_dim}"
            )
    _, interface_problems = controller_for(config, model)
    problems.extend(interface_problems)
    return problems
