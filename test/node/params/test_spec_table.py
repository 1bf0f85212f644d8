"""Parameter declarations and validation, on a real node without any service."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
import rclpy
from rclpy.node import Node
from rclpy.parameter import Parameter

from sequence_ai import ValidateMode
from sequence_ai_ros.core import command_kinds as kinds
from sequence_ai_ros.core.node_config import NodeConfig
from sequence_ai_ros.params import config_checks, spec_table
from sequence_ai_ros.params.config_checks import check_config


class Lifecycle:
    """What the node's validation asks: the state while configured, else None."""

    state: str | None = None


@pytest.fixture
def lifecycle() -> Lifecycle:
    return Lifecycle()


@pytest.fixture
def node(lifecycle: Lifecycle) -> Iterator[Node]:
    context = rclpy.Context()
    rclpy.init(context=context)
    node = Node("parameter_check", context=context)
    spec_table.declare(node)
    node.add_on_set_parameters_callback(
        config_checks.validation_callback(
            lambda: {n: node.get_parameter(n).value for n in spec_table.SPECS},
            lambda: lifecycle.state,
        )
    )
    yield node
    node.destroy_node()
    rclpy.shutdown(context=context)


@pytest.mark.slow
def test_every_contract_parameter_is_declared_with_a_description(node: Node) -> None:
    expected = {
        "model", "base_url", "api_key_file", "validate_mode", "camera_views", "camera_topics",
        "camera_transports", "joint_states_topic", "joint_names", "gripper_joint",
        "command_interface", "command_topic", "command_type", "command_mode",
        "gripper_command_topic", "velocity_scale", "prefetch", "max_in_flight",
        "playback_speed", "smooth_seam", "startup_timeout_s", "jpeg_quality",
        "max_goal_seconds", "max_state_age_s", "max_image_age_s", "max_frame_pixels",
        "joint_lower_limits",
        "joint_upper_limits", "max_step", "hold_between_goals", "hold_republish_hz",
        "input_wait_s",
        "record", "record_dir", "record_max_mb", "record_cameras_hz",
        "joint_limits_file", "enable_topic", "enable_timeout_s", "dry_run",
        "end_goal_without_client_s",
        "configure_timeout_s", "max_control_hz", "max_joint_velocity", "max_instruction_chars",
        "gripper_joints", "command_groups",
        # End-effector models (issue 21).
        "base_frame", "ee_frame", "command_frame", "command_frame_transform",
        "ee_pose_topic", "twist_topic",
        "pose_target_topic", "servo_command_type", "linear_scale", "rotational_scale",
        "workspace_min", "workspace_max", "max_linear_speed", "max_angular_speed",
        "max_pose_age_s",
    }
    assert set(spec_table.SPECS) == expected
    for name in expected:
        descriptor = node.describe_parameter(name)
        assert descriptor.description and descriptor.additional_constraints, name
    assert "read at configure" in node.describe_parameter("model").additional_constraints
    assert "read at configure" not in node.describe_parameter("prefetch").additional_constraints
    assert not any("key" in name and name != "api_key_file" for name in expected)


@pytest.mark.slow
@pytest.mark.parametrize(
    ("name", "allowed"),
    [
        ("validate_mode", "one of: warn, strict, off"),
        ("command_interface", "one of: position, velocity"),
        ("camera_transports", "each one of: raw, compressed"),
        ("command_type", "one of: std_msgs/msg/Float64MultiArray, "
                         "trajectory_msgs/msg/JointTrajectory, sensor_msgs/msg/JointState"),
        ("command_mode", "one of: auto, step, chunk"),
    ],
)
def test_choice_parameters_list_their_values_in_the_descriptor(
    node: Node, name: str, allowed: str
) -> None:
    assert allowed in node.describe_parameter(name).additional_constraints


def test_choice_parameters_list_their_values_in_docs_node_md() -> None:
    text = (Path(__file__).resolve().parents[3] / "docs" / "node.md").read_text()
    for name, spec in spec_table.SPECS.items():
        if spec.choices:
            row = next(line for line in text.splitlines() if line.startswith(f"| `{name}`"))
            assert all(f"`{choice}`" in row for choice in spec.choices), name


@pytest.mark.slow
@pytest.mark.parametrize(
    ("name", "value", "words"),
    [
        ("prefetch", "banana", ["prefetch='banana'", "a string", "expected a bool"]),
        ("smooth_seam", 2.5, ["smooth_seam=2.5", "expected an integer in 0..15"]),
        ("max_in_flight", 2.0, ["max_in_flight=2.0", "expected an integer in 1..8"]),
        ("playback_speed", "fast",
         ["playback_speed='fast'", "in [0.5, 1.0]", "or the string auto"]),
        ("playback_speed", 1, ["playback_speed=1", "an integer", "a double", "auto"]),
        ("velocity_scale", 3, ["velocity_scale=3", "a double"]),
        ("command_interface", "torque", ["command_interface='torque'", "position, velocity"]),
        ("command_mode", "stream", ["command_mode='stream'", "auto, step, chunk"]),
        ("camera_transports", ["raw", "h264"], ["['raw', 'h264']", "raw, compressed"]),
        # rclpy's own range check runs first; it names parameter, range and value too.
        ("jpeg_quality", 80, ["jpeg_quality", "Min: 90, Max: 100, value: 80"]),
    ],
)
def test_every_refusal_names_the_parameter_the_value_and_what_is_allowed(
    node: Node, name: str, value: object, words: list[str]
) -> None:
    (result,) = node.set_parameters([Parameter(name, value=value)])
    assert not result.successful
    for word in words:
        assert word in result.reason, result.reason
    # A refused value of another type does not change the parameter's type.
    assert type(node.get_parameter(name).value) is type(spec_table.SPECS[name].default)


@pytest.mark.slow
def test_parameters_read_at_configure_change_only_while_unconfigured(
    node: Node, lifecycle: Lifecycle
) -> None:
    (result,) = node.set_parameters([Parameter("model", value="cosmos3-edge-policy-droid")])
    assert result.successful, result.reason
    lifecycle.state = "active"
    (result,) = node.set_parameters([Parameter("model", value="pi05-droid")])
    assert not result.successful
    assert "model='pi05-droid'" in result.reason and "active" in result.reason
    assert "cleanup" in result.reason
    (live,) = node.set_parameters([Parameter("prefetch", value=False)])
    assert live.successful


def test_defaults_are_consistent() -> None:
    config = NodeConfig.from_values({n: s.default for n, s in spec_table.SPECS.items()})
    assert check_config(config) == []
    assert config.smooth_seam == 0 and config.prefetch is True


def test_the_snapshot_holds_the_enums_the_gate_and_the_client_take() -> None:
    config = NodeConfig.from_values({n: s.default for n, s in spec_table.SPECS.items()})
    assert config.validate_mode is ValidateMode.STRICT
    assert config.command_interface is kinds.Interface.POSITION
    # `auto` with the default Float64MultiArray resolves to step.
    assert config.command_mode is kinds.CommandMode.STEP


def test_a_refused_enum_value_names_the_parameter() -> None:
    values = {n: s.default for n, s in spec_table.SPECS.items()}
    values.update(command_interface="torque", validate_mode="loose")
    with pytest.raises(ValueError) as refused:
        NodeConfig.from_values(values)
    assert "command_interface='torque' is refused" in str(refused.value)
    assert "validate_mode='loose' is refused" in str(refused.value)
    assert "one of: position, velocity" in str(refused.value)


@pytest.mark.slow
def test_live_values_change(node: Node) -> None:
    result = node.set_parameters([Parameter("prefetch", value=False),
                                  Parameter("smooth_seam", value=3)])
    assert all(r.successful for r in result)
    assert node.get_parameter("smooth_seam").value == 3


@pytest.mark.slow
def test_playback_speed_takes_a_factor_or_auto(node: Node) -> None:
    for value in ("auto", 0.75, 1.0):
        (result,) = node.set_parameters([Parameter("playback_speed", value=value)])
        assert result.successful, result.reason
        assert node.get_parameter("playback_speed").value == value
    (result,) = node.set_parameters([Parameter("max_in_flight", value=4)])
    assert result.successful and node.get_parameter("max_in_flight").value == 4


@pytest.mark.slow
@pytest.mark.parametrize(
    "name,value,words",
    [
        ("smooth_seam", 16, ["smooth_seam", "15"]),
        ("max_in_flight", 9, ["max_in_flight", "8"]),
        ("max_in_flight", 0, ["max_in_flight", "1"]),
        ("playback_speed", 0.4, ["playback_speed", "0.5"]),
        ("jpeg_quality", 80, ["jpeg_quality", "90", "100"]),
        ("max_step", -0.1, ["max_step"]),
        ("max_image_age_s", 0.0, ["max_image_age_s"]),
    ],
)
def test_out_of_range_values_are_rejected_with_a_reason(
    node: Node, name: str, value: object, words: list[str]
) -> None:
    (result,) = node.set_parameters([Parameter(name, value=value)])
    assert not result.successful
    for word in words:
        assert word in result.reason




@pytest.mark.slow
def test_limits_must_stay_one_per_joint(node: Node) -> None:
    (result,) = node.set_parameters([Parameter("joint_lower_limits", value=[-1.0, -1.0])])
    assert not result.successful and "joint_lower_limits" in result.reason


@pytest.mark.parametrize(
    ("command_type", "interface", "resolved"),
    [
        (kinds.JOINT_TRAJECTORY, "position", "chunk"),
        (kinds.JOINT_TRAJECTORY, "velocity", "step"),
        (kinds.FLOAT64_MULTI_ARRAY, "position", "step"),
        (kinds.JOINT_STATE, "position", "step"),
    ],
)
def test_command_mode_auto_is_chunk_for_trajectories_of_positions(
    command_type: str, interface: str, resolved: str
) -> None:
    values = {n: s.default for n, s in spec_table.SPECS.items()}
    values.update(command_type=command_type, command_interface=interface)
    config = NodeConfig.from_values(values)
    assert check_config(config) == []
    assert config.command_mode is kinds.CommandMode(resolved)


@pytest.mark.parametrize(
    ("change", "words"),
    [
        ({"command_type": kinds.FLOAT64_MULTI_ARRAY},
         ["command_mode=chunk", "command_type is std_msgs/msg/Float64MultiArray",
          "expected trajectory_msgs/msg/JointTrajectory"]),
        ({"command_interface": "velocity"},
         ["command_mode=chunk", "command_interface is velocity", "expected position"]),
    ],
    ids=["not a trajectory", "velocities"],
)
def test_chunk_mode_needs_trajectories_of_positions(
    change: dict[str, str], words: list[str]
) -> None:
    values = {n: s.default for n, s in spec_table.SPECS.items()}
    values.update(command_type=kinds.JOINT_TRAJECTORY, command_mode="chunk")
    values.update(change)
    (problem,) = check_config(NodeConfig.from_values(values))
    for word in words:
        assert word in problem, problem


def test_config_problems_name_the_parameter() -> None:
    values = {n: s.default for n, s in spec_table.SPECS.items()}
    values["camera_topics"] = ["only_one"]
    values["camera_transports"] = ["raw", "h264"]
    problems = check_config(NodeConfig.from_values(values))
    assert any(p.startswith("camera_topics has 1") for p in problems)
    assert any("camera_transports" in p and "h264" in p for p in problems)
