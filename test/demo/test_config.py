"""config/droid.yaml and config/droid_jtc.yaml hold only parameters the node declares, and they
reach the node; the two describe one robot and differ only in how the arm is commanded."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from support.ros_domains import CONFIG_TESTS, domain

rclpy = pytest.importorskip("rclpy")

from rclpy.context import Context  # noqa: E402

from sequence_ai_ros.demo.launcher import default_params_file  # noqa: E402

DOMAIN_ID = domain(CONFIG_TESTS)
CONFIG = Path(__file__).resolve().parents[2] / "config" / "droid.yaml"
JTC_CONFIG = CONFIG.with_name("droid_jtc.yaml")


def yaml_parameters(path: Path = CONFIG) -> dict[str, Any]:
    document = yaml.safe_load(path.read_text(encoding="utf-8"))
    assert list(document) == ["/**/sequence_ai"], "one section, for the node in any namespace"
    return document["/**/sequence_ai"]["ros__parameters"]


@pytest.fixture
def context() -> Iterator[Context]:
    context = Context()
    rclpy.init(context=context, domain_id=DOMAIN_ID)
    try:
        yield context
    finally:
        rclpy.shutdown(context=context)


@pytest.mark.parametrize("config", [CONFIG, JTC_CONFIG], ids=lambda p: p.name)
@pytest.mark.parametrize("namespace", ["", "robot2"])
def test_every_key_is_declared_by_the_node_and_takes_effect(
    context: Context, namespace: str, config: Path
) -> None:
    from sequence_ai_ros.node import SequenceAiNode

    arguments = ["--ros-args", "--params-file", str(config)]
    if namespace:
        arguments += ["-r", f"__ns:=/{namespace}"]
    node = SequenceAiNode(context=context, cli_args=arguments)
    try:
        declared = set(node.list_parameters([], 0).names)
        expected = yaml_parameters(config)
        undeclared = sorted(set(expected) - declared)
        assert not undeclared, f"droid.yaml keys the node does not declare: {undeclared}"
        for name, value in expected.items():
            actual = node.get_parameter(name).value
            if isinstance(value, list):
                actual = list(actual)
            assert actual == value, f"{name}: node has {actual!r}, droid.yaml says {value!r}"
    finally:
        node.destroy_node()


def test_the_yaml_describes_pi05_droid_on_the_simulated_franka() -> None:
    from sequence_ai_ros.sim.arm import GRIPPER_JOINT, JOINT_NAMES, LOWER_LIMITS, UPPER_LIMITS

    params = yaml_parameters()
    assert params["model"] == "pi05-droid"
    assert params["camera_views"] == ["exterior_1", "wrist_left"]
    assert params["camera_topics"] == [f"cameras/{v}/image_raw" for v in params["camera_views"]]
    assert params["joint_names"] == list(JOINT_NAMES)
    assert params["gripper_joint"] == GRIPPER_JOINT
    assert params["joint_lower_limits"] == LOWER_LIMITS.tolist()
    assert params["joint_upper_limits"] == UPPER_LIMITS.tolist()


def test_the_jtc_file_is_the_same_robot_on_joint_trajectory_controller_in_chunk_mode() -> None:
    from sequence_ai_ros.parameters import SPECS, NodeConfig, check_config

    forward, jtc = yaml_parameters(), yaml_parameters(JTC_CONFIG)
    differing = {key for key in forward.keys() | jtc.keys() if forward.get(key) != jtc.get(key)}
    assert differing == {"command_topic", "command_type", "command_mode"}
    assert jtc["command_topic"] == "joint_trajectory_controller/joint_trajectory"
    for params, mode in ((forward, "step"), (jtc, "chunk")):
        config = NodeConfig.from_values({**{n: s.default for n, s in SPECS.items()}, **params})
        assert check_config(config) == [] and config.command_mode == mode


def test_the_launcher_uses_this_file_when_run_from_the_checkout() -> None:
    assert default_params_file() == CONFIG
    assert default_params_file("joint_trajectory") == JTC_CONFIG
