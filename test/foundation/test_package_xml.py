"""package.xml declares every import of what ships, so `rosdep install` brings it (AST walk)."""

from __future__ import annotations

import sys
import xml.etree.ElementTree as ET

from shipped_imports import ROOT, imports_of, shipped_ros_files, top_level

# Imports that name no dependency: this package's own modules, and its interface package
# (built from interfaces/ next to it, declared like any other).
OWN = {"sequence_ai", "sequence_ai_ros", "sequence_ai_gateway"}
# The rosdep key of each imported distribution that is not a ROS package of the same name.
ROSDEP_KEYS = {
    "numpy": "python3-numpy",
    "PIL": "python3-pil",
    "httpx": "python3-httpx",
    "fastapi": "python3-fastapi",
    "uvicorn": "python3-uvicorn",
    "pydantic": "python3-pydantic",
    # apt's python3-fastapi depends on python3-starlette, which has no rosdep key of its own.
    "starlette": "python3-fastapi",
    "yaml": "python3-yaml",
    "matplotlib": "python3-matplotlib",
}
# Imported only for an option no launch uses (the gateway's --tls): pip, not rosdep.
OPTIONAL = {"trustme"}


def _keys(paths: list) -> set[str]:
    modules = {top_level(name) for path in paths for name in imports_of(path)}
    modules -= OWN | OPTIONAL | set(sys.stdlib_module_names) | {"__future__"}
    return {ROSDEP_KEYS.get(module, module) for module in modules}


def _declared(kind: str) -> set[str]:
    manifest = ET.parse(ROOT / "package.xml").getroot()
    return {element.text or "" for element in manifest.findall(kind)}


def test_exec_depends_are_exactly_what_the_node_client_launch_and_sim_import() -> None:
    # sim:=true starts sim_robot and the local gateway, so their imports are run-time needs too.
    shipped = shipped_ros_files()
    shipped += sorted((ROOT / "sequence_ai").rglob("*.py"))
    shipped += sorted((ROOT / "sequence_ai_ros" / "sim").rglob("*.py"))
    shipped += sorted((ROOT / "sequence_ai_gateway").rglob("*.py"))
    assert _declared("exec_depend") == _keys(shipped)


def test_what_the_demo_and_tests_need_is_a_test_depend() -> None:
    demo = sorted((ROOT / "sequence_ai_ros" / "demo").rglob("*.py"))
    needed = (_keys(demo) - _declared("exec_depend")) | {"python3-pytest"}
    assert needed <= _declared("test_depend")
    assert not _declared("test_depend") & _declared("exec_depend")


def test_the_interface_package_is_declared_for_the_action_type() -> None:
    assert "sequence_ai_interfaces" in _declared("exec_depend")
