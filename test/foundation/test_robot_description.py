"""The DROID Franka is described once, as data (sequence_ai_descriptions/franka_droid/robot.json):
every reader gets the same joints, limits and home pose, and the node's configuration, which
still writes them out, agrees with the file."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import yaml

from sequence_ai_gateway.droid import cameras, kinematics
from sequence_ai_gateway.droid.description import FRANKA_DROID, parse
from sequence_ai_gateway.models import catalogue
from sequence_ai_lab.robots.shared import arm
from sequence_ai_ros.params import spec_table

ROOT = Path(__file__).resolve().parents[2]
ROBOT_JSON = ROOT / "sequence_ai_descriptions" / "franka_droid" / "robot.json"
RAW = json.loads(ROBOT_JSON.read_text(encoding="utf-8"))


def test_the_gateway_reads_the_file() -> None:
    assert FRANKA_DROID == parse(RAW)
    assert list(catalogue.PANDA_LOWER) == RAW["joints"]["lower"]
    assert list(catalogue.PANDA_UPPER) == RAW["joints"]["upper"]
    assert kinematics.LOWER.tolist() == RAW["joints"]["lower"]
    assert kinematics.VELOCITY_LIMITS.tolist() == RAW["joints"]["velocity"]
    assert [list(row) for row in kinematics.PANDA_DH] == RAW["kinematics"]["dh"]
    assert cameras.CALIBRATION["wrist_left"].eye == tuple(RAW["cameras"]["wrist_left"]["eye"])


def test_the_simulator_reads_the_file() -> None:
    assert list(arm.JOINT_NAMES) == RAW["joints"]["names"]
    assert arm.GRIPPER_JOINT == RAW["gripper"]["joint"]
    assert arm.LOWER_LIMITS.tolist() == RAW["joints"]["lower"]
    assert arm.UPPER_LIMITS.tolist() == RAW["joints"]["upper"]
    assert arm.VELOCITY_LIMITS.tolist() == RAW["joints"]["velocity"]
    assert arm.HOME.tolist() == RAW["home"]


def test_the_nodes_defaults_agree_with_the_file() -> None:
    assert spec_table.PANDA_JOINTS == RAW["joints"]["names"]
    assert spec_table.PANDA_LOWER == RAW["joints"]["lower"]
    assert spec_table.PANDA_UPPER == RAW["joints"]["upper"]


@pytest.mark.parametrize("config", ["droid.yaml", "droid_jtc.yaml"])
def test_the_nodes_configuration_agrees_with_the_file(config: str) -> None:
    text = (ROOT / "config" / config).read_text(encoding="utf-8")
    params = next(iter(yaml.safe_load(text).values()))["ros__parameters"]
    joints = RAW["joints"]
    assert params["joint_names"] == joints["names"]
    assert params["joint_lower_limits"] == joints["lower"]
    assert params["joint_upper_limits"] == joints["upper"]
    for i, name in enumerate(joints["names"]):
        limit = params["joint_limits"][name]
        assert (limit["min_position"], limit["max_position"]) == (joints["lower"][i],
                                                                   joints["upper"][i])
        assert limit["max_velocity"] == joints["velocity"][i]


def test_the_home_pose_lies_inside_the_limits() -> None:
    home = np.array(FRANKA_DROID.home)
    assert np.all(home > kinematics.LOWER) and np.all(home < kinematics.UPPER)


@pytest.mark.parametrize(
    ("path", "value", "named"),
    [
        (("joints", "lower"), [0.0] * 6, "joints.lower"),
        (("home",), "ready", "home"),
        (("kinematics", "dh"), [[0.0, 0.333, 0.0]], "kinematics.dh"),
        (("cameras", "wrist_left", "eye"), [0.0, 0.0], "cameras.wrist_left.eye"),
    ],
)
def test_a_malformed_field_is_refused_by_name(path: tuple[str, ...], value: Any,
                                              named: str) -> None:
    data = copy.deepcopy(RAW)
    node = data
    for key in path[:-1]:
        node = node[key]
    node[path[-1]] = value
    with pytest.raises(ValueError, match=named.replace(".", r"\.")):
        parse(data)
