"""The node's domain core imports without ROS: the goal state machine and the stop policy, the
gate and its rules, limits, trajectory building, geometry, model fit and the plain values they
share. Imported in a fresh interpreter where rclpy, the interfaces and every *_msgs package
raise ImportError, as on a machine without ROS. The list is mypy.ini's: the same modules are
type-checked strictly by `make lint`."""

from __future__ import annotations

import configparser
import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def _strictly_typed_core() -> tuple[str, ...]:
    """mypy.ini's `modules`: the core is listed once, for this check and for mypy's strict one."""
    config = configparser.ConfigParser()
    config.read_string((ROOT / "mypy.ini").read_text())
    return tuple(name.strip() for name in config["mypy"]["modules"].split(",") if name.strip())


ROS_FREE = _strictly_typed_core()

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
def test_the_domain_core_imports_with_rclpy_and_the_messages_absent() -> None:
    assert len(ROS_FREE) >= 20
    report = _import_without_ros(ROS_FREE)
    assert report == {"failed": {}, "ros": []}


@pytest.mark.slow
def test_the_check_can_fail_a_module_that_needs_ros() -> None:
    report = _import_without_ros(("sequence_ai_ros.commands.joint_output",))
    failed = report["failed"]
    assert isinstance(failed, dict) and "sequence_ai_ros.commands.joint_output" in failed


def test_every_listed_module_is_a_shipped_module_of_the_node() -> None:
    for name in ROS_FREE:
        path = ROOT.joinpath(*name.split(".")).with_suffix(".py")
        assert path.is_file(), f"{name}: no {path.relative_to(ROOT)}"
        assert name.startswith("sequence_ai_ros."), name
