"""config/droid.yaml and config/droid_jtc.yaml hold only parameters the node declares, and they
reach the node; the two describe one robot and differ only in how the arm is commanded."""

from __future__ import annotations

import math
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from support.ros_domains import CONFIG_TESTS, domain

rclpy = pytest.importorskip("rclpy")

from rclpy.context import Context  # noqa: E402

from sequence_ai_lab.demo.launcher import default_params_file  # noqa: E402

DOMAIN_ID = domain(CONFIG_TESTS)
CONFIG = Path(__file__).resolve().parents[3] / "config" / "droid.yaml"
JTC_CONFIG = CONFIG.with_name("droid_jtc.yaml")
COSMOS3_OVERLAY = CONFIG.with_name("cosmos3-edge-policy-droid.yaml")


def yaml_parameters(path: Path = CONFIG) -> dict[str, Any]:
    """The file's parameters by their ROS names (a nested mapping's keys joined by dots)."""
    document = yaml.safe_load(path.read_text(encoding="utf-8"))
    assert list(document) == ["/**/sequence_ai"], "one section, for the node in any namespace"
    return _flat(document["/**/sequence_ai"]["ros__parameters"])


def _flat(mapping: dict[str, Any], prefix: str = "") -> dict[str, Any]:
    flat: dict[str, Any] = {}
    for key, value in mapping.items():
        if isinstance(value, dict):
            flat.update(_flat(value, f"{prefix}{key}."))
        else:
            flat[f"{prefix}{key}"] = value
    return flat


@pytest.fixture
def context() -> Iterator[Context]:
    context = Context()
    rclpy.init(context=context, domain_id=DOMAIN_ID)
    try:
        yield context
    finally:
        rclpy.shutdown(context=context)


@pytest.mark.slow
@pytest.mark.parametrize(
    "configs",
    [(CONFIG,), (JTC_CONFIG,), (CONFIG, COSMOS3_OVERLAY)],
    ids=lambda files: "+".join(p.name for p in files),
)
@pytest.mark.parametrize("namespace", ["", "robot2"])
def test_every_key_is_declared_by_the_node_and_takes_effect(
    context: Context, namespace: str, configs: tuple[Path, ...]
) -> None:
    from sequence_ai_ros.node import SequenceAiNode

    # Several files load in order, the later one's value winning (a model's overlay).
    arguments = ["--ros-args"]
    expected: dict[str, Any] = {}
    for config in configs:
        arguments += ["--params-file", str(config)]
        expected.update(yaml_parameters(config))
    if namespace:
        arguments += ["-r", f"__ns:=/{namespace}"]
    node = SequenceAiNode(context=context, cli_args=arguments)
    try:
        declared = set(node.list_parameters([], 0).names)
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
    from sequence_ai_lab.robots.shared.arm import (
        GRIPPER_JOINT,
        JOINT_NAMES,
        LOWER_LIMITS,
        UPPER_LIMITS,
    )

    params = yaml_parameters()
    assert params["model"] == "pi05-droid"
    assert params["camera_views"] == ["exterior_1", "wrist_left"]
    assert params["camera_topics"] == [f"cameras/{v}/image_raw" for v in params["camera_views"]]
    assert params["joint_names"] == list(JOINT_NAMES)
    assert params["gripper_joint"] == GRIPPER_JOINT
    assert params["joint_lower_limits"] == LOWER_LIMITS.tolist()
    assert params["joint_upper_limits"] == UPPER_LIMITS.tolist()


def test_the_jtc_file_is_the_same_robot_on_joint_trajectory_controller_in_chunk_mode() -> None:
    from sequence_ai_ros.core.node_config import NodeConfig
    from sequence_ai_ros.params.config_checks import check_config
    from sequence_ai_ros.params.spec_table import SPECS

    forward, jtc = yaml_parameters(), yaml_parameters(JTC_CONFIG)
    differing = {key for key in forward.keys() | jtc.keys() if forward.get(key) != jtc.get(key)}
    assert differing == {"command_topic", "command_type", "command_mode"}
    assert jtc["command_topic"] == "joint_trajectory_controller/joint_trajectory"
    for params, mode in ((forward, "step"), (jtc, "chunk")):
        named = {name: value for name, value in params.items() if name in SPECS}
        config = NodeConfig.from_values({**{n: s.default for n, s in SPECS.items()}, **named})
        assert check_config(config) == [] and config.command_mode == mode


def test_the_yaml_carries_the_pandas_published_joint_limits() -> None:
    from sequence_ai_ros.core.joint_limits import RateLimits, resolve

    params = yaml_parameters()
    entries: dict[str, dict[str, Any]] = {}
    for name, value in params.items():
        if name.startswith("joint_limits."):
            _, joint, field = name.split(".")
            entries.setdefault(joint, {})[field] = value
    limits = resolve(params["joint_names"], entries, {})
    assert [(lim.min_position, lim.max_position) for lim in limits] == list(
        zip(params["joint_lower_limits"], params["joint_upper_limits"])
    )
    # Franka's Panda datasheet: dq_max and ddq_max per joint; the velocity limits on, the
    # acceleration limits written and (the file says why) switched off.
    joints = params["joint_names"]
    velocities = [params[f"joint_limits.{j}.max_velocity"] for j in joints]
    accelerations = [params[f"joint_limits.{j}.max_acceleration"] for j in joints]
    assert velocities == [2.175] * 4 + [2.61] * 3
    assert accelerations == [15.0, 7.5, 10.0, 12.5, 15.0, 20.0, 20.0]
    rates = RateLimits.of(limits)
    assert rates.max_velocity == tuple(velocities)
    assert all(math.isinf(a) for a in rates.max_acceleration)
    assert all(not limit.problems() for limit in limits)


def test_the_launcher_uses_this_file_when_run_from_the_checkout() -> None:
    assert default_params_file() == CONFIG
    assert default_params_file("joint_trajectory") == JTC_CONFIG
