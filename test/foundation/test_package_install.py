"""The colcon install space holds what ROS tooling looks for: index marker, share/, scripts."""

from __future__ import annotations

import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
from ament_index_python.packages import (
    PackageNotFoundError,
    get_package_prefix,
    get_package_share_directory,
)

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = "sequence_ai_ros"
SCRIPTS = ("sequence_ai_node", "sim_robot", "sequence-ai-gateway", "sequence-ai")


def share_of(package: str) -> Path:
    try:
        return Path(get_package_share_directory(package))
    except PackageNotFoundError:
        pytest.fail(f"{package} is not in the ament index: run `make setup` (colcon build)")


def test_share_holds_package_xml_launch_and_config() -> None:
    share = share_of(PACKAGE)
    assert (share / "package.xml").read_text() == (ROOT / "package.xml").read_text()
    assert (share / "launch").is_dir()
    assert (share / "config").is_dir()
    for source in sorted(ROOT.glob("launch/*.launch.py")) + sorted(ROOT.glob("config/*.yaml")):
        installed = share / source.parent.name / source.name
        assert installed.is_file(), f"{installed} missing: rebuild with `make setup`"


def test_ament_index_marker_is_installed() -> None:
    prefix = Path(get_package_prefix(PACKAGE))
    assert (prefix / "share/ament_index/resource_index/packages" / PACKAGE).is_file()


def test_console_scripts_are_where_ros2_run_looks() -> None:
    libexec = Path(get_package_prefix(PACKAGE)) / "lib" / PACKAGE
    missing = [name for name in SCRIPTS if not (libexec / name).is_file()]
    assert not missing, f"not in {libexec}: {missing}"


def test_interface_package_installs_the_act_action() -> None:
    installed = share_of("sequence_ai_interfaces") / "action" / "Act.action"
    assert installed.read_text() == (ROOT / "interfaces/action/Act.action").read_text()


def test_package_xml_declares_an_ament_python_package_with_its_runtime_dependencies() -> None:
    manifest = ET.parse(ROOT / "package.xml").getroot()
    assert manifest.get("format") == "3"
    assert manifest.findtext("name") == PACKAGE
    assert manifest.findtext("export/build_type") == "ament_python"
    exec_depends = {element.text for element in manifest.findall("exec_depend")}
    assert exec_depends >= {
        "rclpy", "sensor_msgs", "std_msgs", "trajectory_msgs", "lifecycle_msgs",
        "diagnostic_msgs", "sequence_ai_interfaces", "python3-httpx", "python3-numpy",
        "python3-pil",
    }
    assert "python3-pytest" in {element.text for element in manifest.findall("test_depend")}
