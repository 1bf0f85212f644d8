"""Configure-time fit of ee models (issue 21): ee_delta and ee_absolute rows play raw through
the Cartesian gate, in step mode, in command_frame; every refusal names the parameter and the model
field. Joint-space models fit exactly as before."""

from __future__ import annotations

from dataclasses import replace

import pytest

from sequence_ai import Controller, Model
from sequence_ai_ros.core.node_config import NodeConfig
from sequence_ai_ros.geometry import command_frame
from sequence_ai_ros.params import config_checks, spec_table
from sequence_ai_ros.params.model_fit import controller_for, fit, fit_problems

EE_DELTA = Model(
    id="sequences/sim-stateless-ee-delta", control_hz=25.0, camera_views=("front",),
    state_dim=0, action_dim=7, action_space="ee_delta",
    action_semantics={"space": "ee_delta", "value_range": [-1.0, 1.0]},
)
EE_ABSOLUTE = Model(
    id="sequences/sim-ee-absolute-reach", control_hz=20.0, camera_views=("front",),
    state_dim=7, state_layout={"end_effector_pose": 6, "gripper": 1}, action_dim=7,
    action_space="ee_absolute",
)
PI05 = Model(
    id="sequences/pi05-droid", control_hz=15.0, camera_views=("exterior_1", "wrist_left"),
    state_layout={"joint_positions": 7, "gripper": 1}, state_dim=8, action_space="joint_delta",
    action_semantics={
        "space": "joint_delta",
        "conversions": {"joint_position": {"reference": "state_at_request"}},
    },
)


def _config(**changes: object) -> NodeConfig:
    values = {n: s.default for n, s in spec_table.SPECS.items()}
    values.update(camera_views=["front"], camera_topics=["cameras/front/image_raw"],
                  camera_transports=["raw"], command_mode="step")
    values.update(changes)
    return NodeConfig.from_values(values)


def test_ee_models_fit_with_raw_rows_whatever_joint_names_say() -> None:
    # Raw: prepare() would clip a row to [-1, 1]; the gate refuses it instead.
    assert fit(_config(), EE_DELTA) == (Controller.RAW, [])
    assert fit(_config(gripper_joint="panda_finger_joint1"), EE_ABSOLUTE) == (Controller.RAW, [])
    # joint_names (the Panda's by default) are not the state of an ee model.
    assert fit_problems(_config(joint_names=["a"], joint_lower_limits=[-1.0],
                                joint_upper_limits=[1.0]), EE_DELTA) == []


def test_ee_absolute_needs_its_gripper_state() -> None:
    problems = fit_problems(_config(), EE_ABSOLUTE)
    assert len(problems) == 1
    assert "gripper_joint" in problems[0] and "state_layout expects gripper: 1" in problems[0]


def test_chunk_mode_is_refused_for_ee_models_naming_both_sides() -> None:
    for model in (EE_DELTA, EE_ABSOLUTE):
        config = _config(command_mode="chunk", gripper_joint="panda_finger_joint1")
        controller, problems = controller_for(config, model)
        assert any(
            "command_mode is chunk" in p and f"action_space {model.action_space}" in p
            and "expected command_mode step" in p for p in problems
        ), problems


def test_other_refusals_name_the_parameter_and_the_model_field(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Without tf2_ros another command frame needs its transform as a parameter.
    monkeypatch.setattr(command_frame, "tf2_imports", lambda: False)
    problems = fit_problems(_config(command_frame="world"), EE_DELTA)
    assert any("command_frame 'world'" in p and "base_frame 'panda_link0'" in p
               and "command_frame_transform" in p for p in problems)
    given = _config(command_frame="world", command_frame_transform=[0.0, 0.0, 0.1, 0, 0, 0])
    assert fit_problems(given, EE_DELTA) == []
    problems = fit_problems(_config(command_groups=["arm"]), EE_DELTA)
    assert any("command_groups ['arm']" in p and "twist_topic" in p for p in problems)
    # As for joints, an empty gripper_command_topic leaves the gripper uncommanded.
    assert fit_problems(_config(gripper_command_topic=""), EE_DELTA) == []
    narrow = Model(id="sequences/x", control_hz=10.0, camera_views=("front",), state_dim=0,
                   action_dim=3, action_space="ee_delta")
    assert any("action_dim is 3" in p for p in fit_problems(_config(), narrow))


def test_cartesian_parameters_are_checked_like_the_others() -> None:
    problems = config_checks.check_config(_config(workspace_min=[0.9, -0.45, 0.05]))
    assert any("workspace_min" in p and "min < max" in p for p in problems)
    problems = config_checks.check_config(_config(workspace_max=[0.8, 0.45]))
    assert any("workspace_max is [0.8, 0.45]" in p and "3 finite metres" in p for p in problems)
    assert "servo_command_type='newtons'" in (
        spec_table.check_value("servo_command_type", "newtons") or ""
    )
    assert "max_linear_speed=0.0" in (spec_table.check_value("max_linear_speed", 0.0) or "")


def test_joint_space_models_fit_as_before() -> None:
    droid = _config(camera_views=["exterior_1", "wrist_left"],
                    camera_topics=["a", "b"], camera_transports=["raw", "raw"],
                    gripper_joint="panda_finger_joint1", command_mode="auto")
    assert fit(droid, PI05) == (Controller.JOINT_POSITION, [])
    # The Cartesian parameters are not read for a joint model.
    assert fit(replace(droid, command_frame="world"), PI05) == (Controller.JOINT_POSITION, [])
    assert "joint_names is empty" in " ".join(config_checks.check_config(_config(joint_names=[])))
