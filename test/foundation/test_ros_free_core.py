"""The node's domain core imports without ROS: the goal state machine and the stop policy, the
gate and its rules, limits, trajectory building, geometry, model fit and the plain values they
share. Imported in a fresh interpreter where rclpy, the interfaces and every *_msgs package
raise ImportError, as on a machine without ROS."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

ROS_FREE = (
    "sequence_ai_ros.goals.driver",
    "sequence_ai_ros.goals.goal_state",
    "sequence_ai_ros.goals.instruction",
    "sequence_ai_ros.goals.runner",
    "sequence_ai_ros.goals.stop_policy",
    "sequence_ai_ros.goals.takeover",
    "sequence_ai_ros.safety.gate",
    "sequence_ai_ros.safety.joint_rules",
    "sequence_ai_ros.safety.joint_limits",
    "sequence_ai_ros.safety.cartesian_rules",
    "sequence_ai_ros.safety.cartesian_space",
    "sequence_ai_ros.commands.kinds",
    "sequence_ai_ros.commands.chunk_trajectory",
    "sequence_ai_ros.inputs.freshness",
    "sequence_ai_ros.inputs.readings",
    "sequence_ai_ros.geometry.pose_math",
    "sequence_ai_ros.geometry.command_frame",
    "sequence_ai_ros.params.node_config",
    "sequence_ai_ros.params.model_fit",
    "sequence_ai_ros.params.launch",
    "sequence_ai_ros.bringup.api_key_source",
)

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
        assert name.split(".")[1] not in ("sim", "demo"), name
