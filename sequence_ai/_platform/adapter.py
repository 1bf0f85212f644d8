"""Adapters: what a deployment's inputs and outputs mean to the robot, stated as data.

A deployment takes and returns its policy's own values, so the robot side says which camera
goes under which key (size, encoding), where the joints, gripper and instruction go, and what
the answer's array means (absolute joints, velocities integrated at the deployment's rate
against the measured state, or deltas from it; the gripper's column and scale). One small YAML
file per deployment shape (config/adapters/), checked when loaded: a bad key or shape is refused
before anything moves, naming it. docs/client.md, "Adapters", describes the format.
"""

from __future__ import annotations

import base64
import os
from dataclasses import dataclass
from typing import Dict, List, Mapping, Optional, Sequence, Tuple, Union

from ..errors import InvalidRequest, InvalidResponse
from ..types import ActionChunk, Observation

__all__ = ["JOINT_MEANINGS", "Adapter", "AdapterError", "Camera", "load_adapter"]

JOINT_MEANINGS = ("absolute", "velocity", "delta")
ENCODINGS = ("jpeg",)
# The rows an adapter hands the loop: absolute joint positions, then the gripper.
ACTION_SPACE = "joint_position"


class AdapterError(ValueError):
    """An adapter file that cannot be used: the message names the key, the value, the need."""


@dataclass(frozen=True)
class Camera:
    view: str
    key: str
    size: Tuple[int, int]
    encoding: str


@dataclass(frozen=True)
class Adapter:
    """One deployment shape: the inputs it reads and how its outputs become rows."""

    template: str
    robot: str
    instruction_key: str
    cameras: Tuple[Camera, ...]
    joints_key: str
    joint_count: int
    gripper_key: Optional[str]
    output_key: str
    output_columns: int
    joint_columns: Tuple[int, int]
    joint_meaning: str
    gripper_column: Optional[int]
    gripper_scale: float

    @property
    def action_dim(self) -> int:
        return self.joint_count + (1 if self.gripper_column is not None else 0)

    def inputs(self, observation: Observation) -> Dict[str, object]:
        """The deployment's inputs for ``observation`` (InvalidRequest names what is wrong)."""
        frames = {frame.view: frame for frame in observation.images}
        out: Dict[str, object] = {self.instruction_key: observation.instruction}
        for camera in self.cameras:
            frame = frames.get(camera.view)
            if frame is None:
                raise InvalidRequest(
                    f"the observation has no {camera.view!r} view (it has "
                    f"{sorted(frames)}); the {self.template} adapter sends it as {camera.key!r}")
            data = base64.b64decode(frame.data)
            size = jpeg_size(data)
            if size != camera.size:
                raise InvalidRequest(
                    f"view {camera.view!r} is {_size_text(size)}; the {self.template} adapter "
                    f"expects a {camera.size[0]}x{camera.size[1]} JPEG under {camera.key!r}")
            out[camera.key] = data
        state = observation.proprioception
        joints = [float(v) for v in state.joint_positions]
        if len(joints) != self.joint_count:
            raise InvalidRequest(f"joint_positions has {len(joints)} values; the {self.template} "
                                 f"adapter expects {self.joint_count}")
        out[self.joints_key] = joints
        if self.gripper_key is not None:
            gripper = state.gripper
            if gripper is None or len(gripper) != 1:
                raise InvalidRequest(f"gripper is {gripper!r}; the {self.template} adapter "
                                     "expects one value")
            out[self.gripper_key] = [float(gripper[0])]
        return out

    def chunk(self, outputs: object, observation: Observation, *, hz: float,
              valid_len: Optional[int], replan_at: Optional[int]) -> ActionChunk:
        """The loop's rows from the deployment's outputs (InvalidResponse on any defect)."""
        if not isinstance(outputs, Mapping) or self.output_key not in outputs:
            keys = sorted(outputs) if isinstance(outputs, Mapping) else type(outputs).__name__
            raise InvalidResponse(f"the deployment answered {keys}; the {self.template} adapter "
                                  f"reads {self.output_key!r}")
        table = _rows(outputs[self.output_key], self.output_key, self.output_columns)
        count = len(table) if valid_len is None else valid_len
        if count > len(table):
            raise InvalidResponse(f"outputs[{self.output_key!r}] has {len(table)} rows; the "
                                  f"deployment says {count} are valid")
        start = [float(v) for v in observation.proprioception.joint_positions]
        first, last = self.joint_columns
        steps: List[List[float]] = []
        current = list(start)
        for raw in table[:count]:
            joints = raw[first:last]
            if self.joint_meaning == "absolute":
                current = list(joints)
            elif self.joint_meaning == "velocity":
                current = [q + v / hz for q, v in zip(current, joints)]
            else:
                current = [q + d for q, d in zip(start, joints)]
            row = list(current)
            if self.gripper_column is not None:
                row.append(raw[self.gripper_column] * self.gripper_scale)
            steps.append(row)
        return ActionChunk(
            steps=steps, robot=self.robot, action_space=ACTION_SPACE, action_dim=self.action_dim,
            control_frequency_hz=hz, covers_seconds=count / hz, open_loop_horizon=replan_at,
        )


def _rows(value: object, key: str, columns: int) -> List[List[float]]:
    tolist = getattr(value, "tolist", None)
    if callable(tolist):
        value = tolist()
    if not isinstance(value, list) or not value:
        raise InvalidResponse(f"outputs[{key!r}] is {type(value).__name__}; expected rows")
    rows: List[List[float]] = []
    for i, row in enumerate(value):
        if not isinstance(row, list) or len(row) != columns:
            raise InvalidResponse(f"outputs[{key!r}][{i}] is {row!r:.60}; expected {columns} "
                                  "numbers")
        numbers = []
        for j, v in enumerate(row):
            if isinstance(v, bool) or not isinstance(v, (int, float)) or v != v or v in (
                    float("inf"), float("-inf")):
                raise InvalidResponse(f"outputs[{key!r}][{i}][{j}] is {v!r}; expected a finite "
                                      "number")
            numbers.append(float(v))
        rows.append(numbers)
    return rows


def jpeg_size(data: bytes) -> Optional[Tuple[int, int]]:
    """(width, height) from a JPEG's frame header; None when ``data`` is not a JPEG."""
    if data[:2] != b"\xff\xd8":
        return None
    at = 2
    while at + 9 < len(data):
        if data[at] != 0xFF:
            return None
        marker = data[at + 1]
        length = int.from_bytes(data[at + 2:at + 4], "big")
        # SOF0..SOF15 except DHT (C4), JPG (C8) and DAC (CC) carry the frame size.
        if 0xC0 <= marker <= 0xCF and marker not in (0xC4, 0xC8, 0xCC):
            height = int.from_bytes(data[at + 5:at + 7], "big")
            width = int.from_bytes(data[at + 7:at + 9], "big")
            return width, height
        at += 2 + length
    return None


def _size_text(size: Optional[Tuple[int, int]]) -> str:
    return "not a JPEG" if size is None else f"{size[0]}x{size[1]}"


# -- loading --------------------------------------------------------------------------------

def load_adapter(source: Union[str, os.PathLike[str], Mapping[str, object]]) -> Adapter:
    """An adapter from a YAML file (PyYAML needed) or from its mapping, checked whole."""
    if isinstance(source, Mapping):
        return _parse(source, "adapter")
    path = os.fspath(source)
    try:
        import yaml
    except ImportError:
        raise AdapterError(f"reading {path} needs PyYAML (pip install pyyaml); or pass the "
                           "adapter as a mapping") from None
    try:
        with open(path, encoding="utf-8") as handle:
            data = yaml.safe_load(handle)
    except OSError as exc:
        raise AdapterError(f"cannot read adapter file {path}: {exc.strerror}") from None
    except yaml.YAMLError as exc:
        raise AdapterError(f"{path} is not YAML: {exc}") from None
    if not isinstance(data, Mapping):
        raise AdapterError(f"{path} holds {type(data).__name__}; expected a mapping")
    return _parse(data, os.path.basename(path))


_TOP = ("template", "robot", "inputs", "outputs")
_INPUTS = ("instruction", "cameras", "joints", "gripper")
_OUTPUTS = ("key", "columns", "joints", "gripper")


def _known(data: Mapping[str, object], keys: Sequence[str], where: str) -> None:
    for key in data:
        if key not in keys:
            raise AdapterError(f"{where}: unknown key {key!r}; expected one of {list(keys)}")


def _need(data: Mapping[str, object], key: str, where: str) -> object:
    if key not in data:
        raise AdapterError(f"{where}: missing {key!r}")
    return data[key]


def _map(data: Mapping[str, object], key: str, where: str) -> Mapping[str, object]:
    value = _need(data, key, where)
    if not isinstance(value, Mapping):
        raise AdapterError(f"{where}.{key} is {value!r:.60}; expected a mapping")
    return value


def _str(data: Mapping[str, object], key: str, where: str) -> str:
    value = _need(data, key, where)
    if not isinstance(value, str) or not value:
        raise AdapterError(f"{where}.{key} is {value!r:.60}; expected a non-empty string")
    return value


def _int(data: Mapping[str, object], key: str, where: str, low: int = 1) -> int:
    value = _need(data, key, where)
    if isinstance(value, bool) or not isinstance(value, int) or value < low:
        raise AdapterError(f"{where}.{key} is {value!r:.60}; expected an integer >= {low}")
    return value


def _parse(data: Mapping[str, object], where: str) -> Adapter:
    _known(data, _TOP, where)
    inputs = _map(data, "inputs", where)
    outputs = _map(data, "outputs", where)
    _known(inputs, _INPUTS, f"{where}.inputs")
    _known(outputs, _OUTPUTS, f"{where}.outputs")
    cameras = []
    raw_cameras = _map(inputs, "cameras", f"{where}.inputs")
    for view, spec in raw_cameras.items():
        at = f"{where}.inputs.cameras.{view}"
        if not isinstance(spec, Mapping):
            raise AdapterError(f"{at} is {spec!r:.60}; expected a mapping")
        _known(spec, ("key", "size", "encoding"), at)
        size = _need(spec, "size", at)
        if (not isinstance(size, list) or len(size) != 2
                or not all(isinstance(s, int) and not isinstance(s, bool) and s > 0
                           for s in size)):
            raise AdapterError(f"{at}.size is {size!r:.60}; expected [width, height] in pixels")
        encoding = _str(spec, "encoding", at)
        if encoding not in ENCODINGS:
            raise AdapterError(f"{at}.encoding is {encoding!r}; expected one of {ENCODINGS}")
        cameras.append(Camera(str(view), _str(spec, "key", at), (size[0], size[1]), encoding))
    joints_in = _map(inputs, "joints", f"{where}.inputs")
    _known(joints_in, ("key", "count"), f"{where}.inputs.joints")
    gripper_in = inputs.get("gripper")
    gripper_key = None
    if gripper_in is not None:
        if not isinstance(gripper_in, Mapping):
            raise AdapterError(f"{where}.inputs.gripper is {gripper_in!r:.60}; expected a mapping")
        _known(gripper_in, ("key",), f"{where}.inputs.gripper")
        gripper_key = _str(gripper_in, "key", f"{where}.inputs.gripper")
    columns = _int(outputs, "columns", f"{where}.outputs")
    joints_out = _map(outputs, "joints", f"{where}.outputs")
    at = f"{where}.outputs.joints"
    _known(joints_out, ("first", "count", "meaning"), at)
    first = _int(joints_out, "first", at, low=0)
    count = _int(joints_out, "count", at)
    meaning = _str(joints_out, "meaning", at)
    if meaning not in JOINT_MEANINGS:
        raise AdapterError(f"{at}.meaning is {meaning!r}; expected one of {JOINT_MEANINGS}")
    if first + count > columns:
        raise AdapterError(f"{at}: columns {first}..{first + count - 1} do not fit in "
                           f"outputs.columns = {columns}")
    joint_count = _int(joints_in, "count", f"{where}.inputs.joints")
    if joint_count != count:
        raise AdapterError(f"{where}: inputs.joints.count is {joint_count} but outputs.joints."
                           f"count is {count}; the rows integrate against the measured joints")
    gripper_out = outputs.get("gripper")
    gripper_column, scale = None, 1.0
    if gripper_out is not None:
        at = f"{where}.outputs.gripper"
        if not isinstance(gripper_out, Mapping):
            raise AdapterError(f"{at} is {gripper_out!r:.60}; expected a mapping")
        _known(gripper_out, ("column", "scale"), at)
        gripper_column = _int(gripper_out, "column", at, low=0)
        if gripper_column >= columns:
            raise AdapterError(f"{at}.column is {gripper_column}; outputs.columns is {columns}")
        raw_scale = gripper_out.get("scale", 1.0)
        if isinstance(raw_scale, bool) or not isinstance(raw_scale, (int, float)) or not (
                raw_scale > 0):
            raise AdapterError(f"{at}.scale is {raw_scale!r}; expected a positive number")
        scale = float(raw_scale)
    return Adapter(
        template=_str(data, "template", where), robot=_str(data, "robot", where),
        instruction_key=_str(inputs, "instruction", f"{where}.inputs"), cameras=tuple(cameras),
        joints_key=_str(joints_in, "key", f"{where}.inputs.joints"), joint_count=joint_count,
        gripper_key=gripper_key, output_key=_str(outputs, "key", f"{where}.outputs"),
        output_columns=columns, joint_columns=(first, first + count), joint_meaning=meaning,
        gripper_column=gripper_column, gripper_scale=scale,
    )
