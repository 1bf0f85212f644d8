"""Adapters: the shipped files load, a bad key or shape is refused naming it, and outputs
become the loop's rows (velocities integrated at the deployment's rate)."""

from __future__ import annotations

import base64
import copy
from pathlib import Path
from typing import Dict

import pytest

from sequence_ai._platform.adapter import AdapterError, jpeg_size, load_adapter
from sequence_ai.errors import InvalidRequest, InvalidResponse
from sequence_ai.types import ImageFrame, Observation, Proprioception

ADAPTERS = Path(__file__).resolve().parents[3] / "config" / "adapters"
# A JPEG's start and a baseline frame header of 224x224 (enough for its size to be read).
JPEG_224 = (b"\xff\xd8\xff\xe0\x00\x10JFIF\x00\x01\x01\x00\x00\x01\x00\x01\x00\x00"
            b"\xff\xc0\x00\x11\x08\x00\xe0\x00\xe0\x03\x01\x22\x00\x02\x11\x01\x03\x11\x01")

SPEC: Dict[str, object] = {
    "template": "t", "robot": "droid_franka",
    "inputs": {"instruction": "prompt",
               "cameras": {"exterior_1": {"key": "cam", "size": [224, 224], "encoding": "jpeg"}},
               "joints": {"key": "q", "count": 2}, "gripper": {"key": "g"}},
    "outputs": {"key": "actions", "columns": 3,
                "joints": {"first": 0, "count": 2, "meaning": "velocity"},
                "gripper": {"column": 2, "scale": 2.0}},
}


def _observation(joints: list = [1.0, 2.0]) -> Observation:  # noqa: B006 (read only)
    frame = ImageFrame("exterior_1", base64.b64encode(JPEG_224).decode())
    return Observation([frame], Proprioception(list(joints), gripper=[0.25]), "pick")


@pytest.mark.parametrize("name", ["pi05-droid.yaml", "droid-absolute.yaml"])
def test_shipped_adapters_load(name: str) -> None:
    pytest.importorskip("yaml")
    adapter = load_adapter(ADAPTERS / name)
    assert adapter.action_dim == 8 and [c.view for c in adapter.cameras] == ["exterior_1",
                                                                             "wrist_left"]


def test_inputs_carry_jpeg_bytes_joints_gripper_and_instruction() -> None:
    inputs = load_adapter(SPEC).inputs(_observation())
    assert inputs == {"prompt": "pick", "cam": JPEG_224, "q": [1.0, 2.0], "g": [0.25]}
    assert jpeg_size(JPEG_224) == (224, 224)


def test_velocities_are_integrated_from_the_measured_joints() -> None:
    outputs = {"actions": [[15.0, -30.0, 0.5], [15.0, 0.0, 0.4], [0.0, 0.0, 0.0]]}
    chunk = load_adapter(SPEC).chunk(outputs, _observation(), hz=15.0, valid_len=2, replan_at=1)
    assert chunk.steps == [[2.0, 0.0, 1.0], [3.0, 0.0, 0.8]]
    assert (chunk.control_frequency_hz, chunk.open_loop_horizon, chunk.action_dim) == (15.0, 1, 3)


@pytest.mark.parametrize(("meaning", "first"), [("absolute", [15.0, -30.0]),
                                               ("delta", [16.0, -28.0])])
def test_absolute_and_delta_rows(meaning: str, first: list) -> None:
    spec = copy.deepcopy(SPEC)
    spec["outputs"]["joints"]["meaning"] = meaning  # type: ignore[index]
    chunk = load_adapter(spec).chunk({"actions": [[15.0, -30.0, 0.5]]}, _observation(),
                                     hz=15.0, valid_len=None, replan_at=None)
    assert chunk.steps[0][:2] == first


@pytest.mark.parametrize(("path", "value", "named"), [
    (("outputs", "joints", "meaning"), "twist", "outputs.joints.meaning"),
    (("outputs", "columns"), 1, "do not fit"),
    (("inputs", "cameras", "exterior_1", "size"), [224], "exterior_1.size"),
    (("inputs", "joints", "count"), 3, "inputs.joints.count"),
    (("outputs", "gripper", "column"), 9, "outputs.gripper.column"),
    (("inputs", "speed"), 1, "unknown key 'speed'"),
])
def test_bad_adapter_is_refused_naming_the_key(path: tuple, value: object, named: str) -> None:
    spec = copy.deepcopy(SPEC)
    node = spec
    for key in path[:-1]:
        node = node[key]  # type: ignore[assignment,index]
    node[path[-1]] = value  # type: ignore[index]
    with pytest.raises(AdapterError, match=named.replace(".", r"\.")):
        load_adapter(spec)


def test_wrong_observation_is_refused_before_sending() -> None:
    adapter = load_adapter(SPEC)
    with pytest.raises(InvalidRequest, match="joint_positions has 3"):
        adapter.inputs(_observation([0.0, 0.0, 0.0]))
    small = Observation([ImageFrame("exterior_1", base64.b64encode(b"png?").decode())],
                        Proprioception([0.0, 0.0], gripper=[0.0]), "x")
    with pytest.raises(InvalidRequest, match="not a JPEG"):
        adapter.inputs(small)


@pytest.mark.parametrize("outputs", [{"other": []}, {"actions": [[1.0, 2.0]]},
                                     {"actions": [[1.0, float("nan"), 0.0]]}, [1, 2]])
def test_bad_outputs_are_refused(outputs: object) -> None:
    with pytest.raises(InvalidResponse):
        load_adapter(SPEC).chunk(outputs, _observation(), hz=15.0, valid_len=None,
                                 replan_at=None)
