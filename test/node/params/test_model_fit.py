"""Configure-time fit of views, state layout and command interface against catalogue rows."""

from __future__ import annotations

from dataclasses import replace

from sequence_ai import Model
from sequence_ai_ros.core.command_kinds import Interface
from sequence_ai_ros.core.node_config import NodeConfig
from sequence_ai_ros.params import config_checks, spec_table
from sequence_ai_ros.params.model_fit import controller_for, fit_problems

PI05 = Model(
    id="sequences/pi05-droid",
    control_hz=15.0,
    camera_views=("exterior_1", "wrist_left"),
    state_layout={"joint_positions": 7, "gripper": 1},
    state_dim=8,
    action_space="joint_delta",
    action_semantics={
        "space": "joint_delta",
        "conversions": {"joint_position": {"reference": "state_at_request"}},
    },
)
COSMOS = Model(
    id="sequences/cosmos3-edge-policy-droid",
    control_hz=15.0,
    camera_views=("exterior_1", "exterior_2", "wrist_left"),
    state_layout={"joint_positions": 7, "gripper": 1},
    state_dim=8,
    action_space="joint_absolute",
    action_semantics={"space": "joint_absolute"},
)


def _config(**changes: object) -> NodeConfig:
    values = {n: s.default for n, s in spec_table.SPECS.items()}
    values["gripper_joint"] = "panda_finger_joint1"
    values.update(changes)
    return NodeConfig.from_values(values)


def test_droid_configuration_fits_pi05() -> None:
    assert fit_problems(_config(), PI05) == []
    assert controller_for(_config(), PI05) == ("joint_position", [])
    assert controller_for(_config(command_interface="velocity"), PI05) == ("native", [])


def test_view_mismatch_names_missing_and_unknown_views() -> None:
    problems = fit_problems(_config(camera_views=["exterior_1", "exterior_2"]), PI05)
    assert len(problems) == 1
    assert "camera_views" in problems[0] and "missing ['wrist_left']" in problems[0]
    assert "unknown ['exterior_2']" in problems[0]


def test_layout_mismatch_names_each_half() -> None:
    problems = fit_problems(_config(gripper_joint="", joint_names=["a", "b"]), PI05)
    assert any("joint_positions: 7" in p for p in problems)
    assert any("gripper: 1" in p for p in problems)


BIMANUAL = Model(
    id="sequences/sim-bimanual-reach",
    control_hz=50.0,
    camera_views=("cam_high",),
    state_layout={"joint_positions": 12, "gripper": 2},
    state_dim=14,
    action_space="joint_absolute",
    action_semantics={"space": "joint_absolute", "gripper_dims": [12, 13]},
)
STATELESS = Model(
    id="sequences/sim-stateless-ee-delta",
    control_hz=25.0,
    camera_views=("exterior_1", "wrist_left"),
    state_dim=0,
    action_space="joint_absolute",
    action_semantics={"space": "joint_absolute"},
)
TWELVE = [f"{side}_j{i}" for side in ("left", "right") for i in range(6)]


def _bimanual(**changes: object) -> NodeConfig:
    values: dict[str, object] = {
        "camera_views": ["cam_high"], "camera_topics": ["a"], "camera_transports": ["raw"],
        "joint_names": TWELVE, "joint_lower_limits": [-2.6] * 12,
        "joint_upper_limits": [2.6] * 12, "gripper_joint": "",
        "gripper_joints": ["left_gripper", "right_gripper"],
    }
    values.update(changes)
    return _config(**values)


def test_two_grippers_fit_a_bimanual_layout() -> None:
    config = _bimanual()
    assert config.grippers == ("left_gripper", "right_gripper")
    assert config_checks.check_config(config) == []
    assert fit_problems(config, BIMANUAL) == []


def test_a_gripper_count_that_does_not_fit_names_the_parameter_and_the_half() -> None:
    (problem,) = fit_problems(_bimanual(gripper_joints=["left_gripper"]), BIMANUAL)
    assert "gripper_joints names 1 grippers" in problem
    assert "sim-bimanual-reach state_layout expects gripper: 2" in problem
    one = _config(
        camera_views=["cam_high"], camera_topics=["a"], camera_transports=["raw"],
        joint_names=TWELVE, joint_lower_limits=[-2.6] * 12, joint_upper_limits=[2.6] * 12,
    )
    (problem,) = fit_problems(one, BIMANUAL)
    assert problem.startswith("gripper_joint names 1 grippers") and "gripper: 2" in problem


def test_gripper_joint_and_gripper_joints_are_not_both_set() -> None:
    problems = config_checks.check_config(_bimanual(gripper_joint="left_gripper"))
    assert any("are both set" in p for p in problems)
    problems = config_checks.check_config(_bimanual(gripper_joints=["left_j0", "left_j0"]))
    assert any("repeats" in p for p in problems)
    assert any("'left_j0' is also in joint_names" in p for p in problems)


def test_a_stateless_model_fits_any_joints_it_is_commanded_with() -> None:
    config = _config(gripper_joint="")
    assert fit_problems(config, STATELESS) == []
    assert fit_problems(_config(), STATELESS) == []


def test_position_needs_a_verified_conversion() -> None:
    unverified = replace_semantics(PI05, {"space": "joint_delta"})
    problems = fit_problems(_config(), unverified)
    assert any("no verified joint_position conversion" in p for p in problems)


def test_absolute_rows_cannot_drive_velocity() -> None:
    config = _config(camera_views=list(COSMOS.camera_views),
                     camera_topics=["a", "b", "c"], camera_transports=["raw"] * 3)
    assert fit_problems(config, COSMOS) == []
    problems = fit_problems(replace(config, command_interface=Interface.VELOCITY), COSMOS)
    assert any("command_interface velocity" in p for p in problems)


def test_a_model_without_a_catalogue_rate_is_refused() -> None:
    (problem,) = fit_problems(_config(), replace(PI05, control_hz=None))
    assert "control_hz" in problem and "pi05-droid" in problem


def replace_semantics(model: Model, semantics: dict) -> Model:
    return replace(model, action_semantics=semantics)
