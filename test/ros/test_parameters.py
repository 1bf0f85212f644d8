"""Parameter declarations and validation, on a real node without any service."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
import rclpy
from rclpy.node import Node
from rclpy.parameter import Parameter

from sequence_ai_ros import parameters
from sequence_ai_ros.parameters import NodeConfig, check_config


@pytest.fixture
def node() -> Iterator[Node]:
    context = rclpy.Context()
    rclpy.init(context=context)
    node = Node("parameter_check", context=context)
    parameters.declare(node)
    node.add_on_set_parameters_callback(
        parameters.validation_callback(
            lambda: {n: node.get_parameter(n).value for n in parameters.SPECS}
        )
    )
    yield node
    node.destroy_node()
    rclpy.shutdown(context=context)


def test_every_contract_parameter_is_declared_with_a_description(node: Node) -> None:
    expected = {
        "model", "base_url", "api_key_file", "validate_mode", "camera_views", "camera_topics",
        "camera_transports", "joint_states_topic", "joint_names", "gripper_joint",
        "command_interface", "command_topic", "command_type", "gripper_command_topic",
        "velocity_scale", "prefetch", "smooth_seam", "startup_timeout_s", "jpeg_quality",
        "max_goal_seconds", "max_state_age_s", "max_image_age_s", "joint_lower_limits",
        "joint_upper_limits", "max_step", "hold_between_goals", "hold_republish_hz",
    }
    assert set(parameters.SPECS) == expected
    for name in expected:
        descriptor = node.describe_parameter(name)
        assert descriptor.description, name
    assert node.describe_parameter("model").read_only
    assert not node.describe_parameter("prefetch").read_only
    assert not node.describe_parameter("smooth_seam").read_only
    assert not any("key" in name and name != "api_key_file" for name in expected)


def test_defaults_are_consistent() -> None:
    config = NodeConfig.from_values({n: s.default for n, s in parameters.SPECS.items()})
    assert check_config(config) == []
    assert config.smooth_seam == 0 and config.prefetch is True


def test_live_values_change(node: Node) -> None:
    result = node.set_parameters([Parameter("prefetch", value=False),
                                  Parameter("smooth_seam", value=3)])
    assert all(r.successful for r in result)
    assert node.get_parameter("smooth_seam").value == 3


@pytest.mark.parametrize(
    "name,value,words",
    [
        ("smooth_seam", 16, ["smooth_seam", "15"]),
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


def test_read_only_parameters_cannot_change(node: Node) -> None:
    (result,) = node.set_parameters([Parameter("model", value="other")])
    assert not result.successful and "model" in result.reason


def test_limits_must_stay_one_per_joint(node: Node) -> None:
    (result,) = node.set_parameters([Parameter("joint_lower_limits", value=[-1.0, -1.0])])
    assert not result.successful and "joint_lower_limits" in result.reason


def test_config_problems_name_the_parameter() -> None:
    values = {n: s.default for n, s in parameters.SPECS.items()}
    values["camera_topics"] = ["only_one"]
    values["camera_transports"] = ["raw", "h264"]
    problems = check_config(NodeConfig.from_values(values))
    assert any(p.startswith("camera_topics has 1") for p in problems)
    assert any("camera_transports" in p and "h264" in p for p in problems)
