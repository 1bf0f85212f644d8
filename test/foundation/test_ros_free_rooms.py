"""The node's ROS-free rooms import without ROS: every module of the folders mypy.ini lists under
`packages` (the ground floor `core/`, `geometry/`, `safety/`), and the few modules of mixed rooms
it lists under `modules` (the goal state machine, model fit, the launch description). Imported in
a fresh interpreter where rclpy, the interfaces and every *_msgs package raise ImportError, as on
a machine without ROS. mypy.ini is the one place that names them: `make lint` type-checks the
same folders and modules strictly."""

from __future__ import annotations

import configparser
import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
NODE = "sequence_ai_ros"


def _mypy_names(key: str) -> tuple[str, ...]:
    config = configparser.ConfigParser()
    config.read_string((ROOT / "mypy.ini").read_text())
    names = (name.strip() for name in config["mypy"][key].split(","))
    return tuple(name for name in names if name.startswith(NODE + "."))


ROOMS = _mypy_names("packages")
MIXED_ROOM_MODULES = _mypy_names("modules")


def _room_modules(room: str) -> tuple[str, ...]:
    folder = ROOT.joinpath(*room.split("."))
    return tuple(
        f"{room}.{path.stem}" for path in sorted(folder.glob("*.py")) if path.stem != "__init__"
    )


ROS_FREE = tuple(m for room in ROOMS for m in _room_modules(room)) + MIXED_ROOM_MODULES

# Run in the child: a finder that refuses ROS before any import, then each module.
_CHILD = """
import importlib, importlib.abc, json, sys

class NoRos(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        top = name.split(".")[0]
        if top in ("rclpy", "sequence_ai_interfaces") or top.endswith("_msgs"):
            raise ImportError(f"{name} is not installed (ROS-free check)")
        return None

sys.meta_path.insert(0, NoRos())
failed = {}
for name in json.loads(sys.argv[1]):
    try:
        importlib.import_module(name)
    except ImportError as exc:
        failed[name] = str(exc)
ros = sorted(m for m in sys.modules if m.split(".")[0] == "rclpy" or m.endswith("_msgs"))
print(json.dumps({"failed": failed, "ros": ros}))
"""


def _import_without_ros(modules: tuple[str, ...]) -> dict[str, object]:
    done = subprocess.run(
        [sys.executable, "-c", _CHILD, json.dumps(modules)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    report: dict[str, object] = json.loads(done.stdout)
    return report


@pytest.mark.slow
def test_the_ros_free_rooms_import_with_rclpy_and_the_messages_absent() -> None:
    report = _import_without_ros(ROS_FREE)
    assert report == {"failed": {}, "ros": []}


@pytest.mark.slow
def test_the_check_can_fail_a_module_that_needs_ros() -> None:
    report = _import_without_ros(("sequence_ai_ros.commands.joint_output",))
    failed = report["failed"]
    assert isinstance(failed, dict) and "sequence_ai_ros.commands.joint_output" in failed


def test_the_ground_floor_is_a_ros_free_room_and_the_rule_covers_most_of_the_node() -> None:
    assert f"{NODE}.core" in ROOMS
    assert len(ROS_FREE) >= 20


def test_every_listed_room_and_module_exists() -> None:
    for room in ROOMS:
        assert (ROOT.joinpath(*room.split(".")) / "__init__.py").is_file(), room
        assert _room_modules(room), f"{room} holds no module"
    for name in MIXED_ROOM_MODULES:
        path = ROOT.joinpath(*name.split(".")).with_suffix(".py")
        assert path.is_file(), f"{name}: no {path.relative_to(ROOT)}"
        assert name.rpartition(".")[0] not in ROOMS, f"{name}: its room is listed whole"
