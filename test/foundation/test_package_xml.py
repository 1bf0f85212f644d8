"""package.xml declares every import of what ships, so `rosdep install` brings it (AST walk)."""

from __future__ import annotations

import sys
import xml.etree.ElementTree as ET
from collections.abc import Callable

from foundation.test_import_graph import GATEWAY, GRAPH, LAB, ROOT, _shipped, _within

# Imports that name no dependency: this package's own modules, and its interface package
# (built from interfaces/ next to it, declared like any other).
OWN = {"sequence_ai", "sequence_ai_ros", "sequence_ai_gateway", "sequence_ai_lab"}
# The rosdep key of each imported distribution that is not a ROS package of the same name.
ROSDEP_KEYS = {
    "numpy": "python3-numpy",
    "PIL": "python3-pil",
    "httpx": "python3-httpx",
    "msgpack": "python3-msgpack",
    "fastapi": "python3-fastapi",
    "uvicorn": "python3-uvicorn",
    "pydantic": "python3-pydantic",
    # apt's python3-fastapi depends on python3-starlette, which has no rosdep key of its own.
    "starlette": "python3-fastapi",
    "yaml": "python3-yaml",
    "matplotlib": "python3-matplotlib",
    "cryptography": "python3-cryptography",
}
# Imported only for an option no launch uses (the gateway's --tls; --platform's wire contract,
# sequence-base, on PyPI only): pip, not rosdep. The
# episode recorder (record: goals) and its tools: setup.py's `episodes` extra, from pip (no
# jammy package); the node runs without them and says so when asked to record.
# `export-lerobot` runs in an environment of its own (make lerobot-venv): lerobot, and rosbags
# to decode the messages where rclpy is missing.
# zstandard comes with mcap; the episode tools name its error only where it imports.
# sim_robot's physics world: MuJoCo (setup.py's `sim` extra, pip only, no rosdep key;
# physics:=kinematic runs without it).
OPTIONAL = {"trustme", "sequence_base", "mcap", "matplotlib", "lerobot", "rosbags", "zstandard",
            "mujoco"}


def _keys(which: Callable[[str], bool]) -> set[str]:
    """The rosdep keys of what the modules `which` selects import (import graph of the source)."""
    modules = {t.split(".")[0] for name in GRAPH if which(name) for t in GRAPH[name]}
    modules -= OWN | OPTIONAL | set(sys.stdlib_module_names) | {"__future__"}
    return {ROSDEP_KEYS.get(module, module) for module in modules}


def _declared(kind: str) -> set[str]:
    manifest = ET.parse(ROOT / "package.xml").getroot()
    return {element.text or "" for element in manifest.findall(kind)}


def test_exec_depends_are_exactly_what_the_node_client_launch_and_sim_import() -> None:
    # sim:=true starts sim_robot and the local gateway, so their imports are run-time needs too.
    def run_time(name: str) -> bool:
        return _shipped(name) or _within(name, f"{LAB}.robots") or _within(name, GATEWAY)

    assert _declared("exec_depend") == _keys(run_time)


def test_what_the_demo_and_tests_need_is_a_test_depend() -> None:
    demo = _keys(lambda name: _within(name, f"{LAB}.demo"))
    needed = (demo - _declared("exec_depend")) | {"python3-pytest"}
    assert needed <= _declared("test_depend")
    assert not _declared("test_depend") & _declared("exec_depend")


def test_the_interface_package_is_declared_for_the_action_type() -> None:
    assert "sequence_ai_interfaces" in _declared("exec_depend")
