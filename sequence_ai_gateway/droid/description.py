"""The DROID Franka as the data file describes it (``sequence_ai_descriptions/franka_droid``):
joints and limits, home pose, DH parameters, gripper and the cameras' calibration. The gateway
reads the file, not the robot's code."""

from __future__ import annotations

import json
from dataclasses import dataclass
from importlib import resources
from typing import Any, Dict, Mapping, Tuple

Vec3 = Tuple[float, float, float]
DESCRIPTIONS = "sequence_ai_descriptions"


@dataclass(frozen=True)
class CameraCalibration:
    """One camera: horizontal field of view and a look-at pose (base or flange frame)."""

    view: str
    horizontal_fov_deg: float
    eye: Vec3
    target: Vec3
    up: Vec3
    # "base": eye/target/up in panda_link0; "flange": in the Panda's flange frame.
    mount: str


@dataclass(frozen=True)
class RobotDescription:
    name: str
    joint_names: Tuple[str, ...]
    lower: Tuple[float, ...]
    upper: Tuple[float, ...]
    velocity: Tuple[float, ...]
    home: Tuple[float, ...]
    dh: Tuple[Tuple[float, float, float], ...]
    flange_d: float
    tcp_d: float
    tcp_turn: float
    gripper_joint: str
    cameras: Dict[str, CameraCalibration]


def _floats(values: Any, field: str, size: int) -> Tuple[float, ...]:
    if not isinstance(values, list) or len(values) != size:
        raise ValueError(f"robot description: {field} is {values!r}, expected {size} numbers")
    return tuple(float(v) for v in values)


def _vec3(values: Any, field: str) -> Vec3:
    x, y, z = _floats(values, field, 3)
    return (x, y, z)


def parse(data: Mapping[str, Any]) -> RobotDescription:
    """The description in ``data`` (a parsed robot.json); a missing or malformed field raises."""
    joints = data["joints"]
    names = tuple(str(n) for n in joints["names"])
    kinematics = data["kinematics"]
    rows = kinematics["dh"]
    if not isinstance(rows, list) or len(rows) != len(names):
        raise ValueError(f"robot description: kinematics.dh is {rows!r}, expected "
                         f"{len(names)} rows of (a, d, alpha)")
    dh = tuple(_vec3(row, f"kinematics.dh[{i}]") for i, row in enumerate(rows))
    cameras = {
        view: CameraCalibration(
            view,
            float(c["horizontal_fov"]),
            _vec3(c["eye"], f"cameras.{view}.eye"),
            _vec3(c["target"], f"cameras.{view}.target"),
            _vec3(c["up"], f"cameras.{view}.up"),
            str(c["mount"]),
        )
        for view, c in data["cameras"].items()
    }
    return RobotDescription(
        name=str(data["name"]),
        joint_names=names,
        lower=_floats(joints["lower"], "joints.lower", len(names)),
        upper=_floats(joints["upper"], "joints.upper", len(names)),
        velocity=_floats(joints["velocity"], "joints.velocity", len(names)),
        home=_floats(data["home"], "home", len(names)),
        dh=dh,
        flange_d=float(kinematics["flange_d"]),
        tcp_d=float(kinematics["tcp_d"]),
        tcp_turn=float(kinematics["tcp_turn"]),
        gripper_joint=str(data["gripper"]["joint"]),
        cameras=cameras,
    )


def load(robot: str = "franka_droid") -> RobotDescription:
    """The description in ``sequence_ai_descriptions/<robot>/robot.json``."""
    path = resources.files(DESCRIPTIONS).joinpath(robot).joinpath("robot.json")
    text = path.read_text(encoding="utf-8")
    return parse(json.loads(text))


FRANKA_DROID = load()
