"""Preflight against a working setup (the test arm: joint states, cameras, controllers, and the
local gateway) passes every check; each deliberately broken input gets its own ✗."""

from __future__ import annotations

import io
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from rclpy.executors import SingleThreadedExecutor
from support.node_harness import JOINTS, ArmHarness, node_parameters

from sequence_ai_ros.params import preflight


@pytest.fixture
def robot(ros_context: Any) -> Iterator[ArmHarness]:
    """The test arm alone (no node), in a namespace of its own."""
    arm = ArmHarness("/preflight_robot", ros_context)
    executor = SingleThreadedExecutor(context=ros_context)
    executor.add_node(arm)
    spinner = threading.Thread(target=executor.spin, daemon=True)
    spinner.start()
    yield arm
    executor.shutdown(timeout_sec=10.0)
    spinner.join(timeout=10.0)
    arm.destroy_node()


def _arguments(tmp_path: Path, values: dict[str, Any]) -> list[str]:
    path = tmp_path / "params.yaml"
    document = {"/**/sequence_ai": {"ros__parameters": values}}
    path.write_text(yaml.safe_dump(document), encoding="utf-8")
    return ["--ros-args", "--params-file", str(path), "-r", "__ns:=/preflight_robot"]


def _run(tmp_path: Path, values: dict[str, Any]) -> tuple[int, dict[str, str]]:
    """Preflight with `values` in a params file, as `ros2 run` passes it; (status, lines by
    check name)."""
    out = io.StringIO()
    status = preflight.main(["preflight", *_arguments(tmp_path, values)], out=out)
    lines = out.getvalue().splitlines()
    by_name = {line[2:].split(":", 1)[0]: line for line in lines[:-1]}
    return status, by_name


@pytest.mark.slow
def test_a_working_setup_passes_every_check(
    robot: ArmHarness, gateway: Any, key_file: str, tmp_path: Path
) -> None:
    status, lines = _run(tmp_path, node_parameters(gateway.url, key_file))
    assert status == 0, "\n".join(lines.values())
    assert set(lines) == {
        "parameters", "limits", "api key", "service", "model fit", "camera exterior_1",
        "camera wrist_left", "joint_states", "arm command", "gripper command", "tf",
    }
    assert all(line.startswith("✓") for line in lines.values()), lines
    assert "Hz, rgb8 320x180" in lines["camera wrist_left"]


@pytest.mark.slow
def test_each_broken_input_gets_its_own_cross(
    robot: ArmHarness, gateway: Any, key_file: str, tmp_path: Path
) -> None:
    broken = node_parameters(
        gateway.url, key_file,
        camera_topics=["cameras/exterior_1/image_raw", "cameras/nowhere/image_raw"],
        joint_names=[*JOINTS[:6], "panda_joint9"],
        command_topic="no_controller/commands",
        **{"joint_limits.panda_joint2.has_position_limits": True,
           "joint_limits.panda_joint2.min_position": 1.0,
           "joint_limits.panda_joint2.max_position": -1.0},
    )
    status, lines = _run(tmp_path, broken)
    assert status == 1
    crossed = {name for name, line in lines.items() if line.startswith("✗")}
    assert crossed == {"limits", "camera wrist_left", "joint_states", "arm command"}, lines
    assert ("joint_limits.panda_joint2.min_position=1.0 is above "
            "joint_limits.panda_joint2.max_position=-1.0") in lines["limits"]
    assert "cameras/nowhere/image_raw" in lines["camera wrist_left"]
    assert "missing ['panda_joint9']" in lines["joint_states"]
    assert "no_controller/commands: 0 subscriber(s)" in lines["arm command"]
    assert lines["camera exterior_1"].startswith("✓")


@pytest.mark.slow
def test_a_key_file_others_can_read_is_a_cross(
    robot: ArmHarness, gateway: Any, key_file: str, tmp_path: Path
) -> None:
    Path(key_file).chmod(0o644)
    status, lines = _run(tmp_path, node_parameters(gateway.url, key_file))
    assert status == 1
    assert lines["api key"].startswith("✗") and "chmod 600" in lines["api key"]


@pytest.mark.slow
def test_python_dash_m_runs_it_and_exits_by_the_result(
    robot: ArmHarness, gateway: Any, key_file: str, tmp_path: Path
) -> None:
    arguments = _arguments(tmp_path, node_parameters(gateway.url, key_file))
    done = subprocess.run(
        [sys.executable, "-m", "sequence_ai_ros.params.preflight", *arguments],
        capture_output=True, text=True, timeout=60, check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout.splitlines()[-1] == "preflight: 11 of 11 checks passed"


@pytest.mark.slow
def test_an_ee_delta_setup_checks_the_pose_and_servo_instead_of_joints_and_tf(
    ros_context: Any, gateway: Any, key_file: str, tmp_path: Path
) -> None:
    from support.ee_harness import EeArm

    ee = EeArm("/preflight_robot", ros_context)
    executor = SingleThreadedExecutor(context=ros_context)
    executor.add_node(ee)
    spinner = threading.Thread(target=executor.spin, daemon=True)
    spinner.start()
    config = Path(__file__).resolve().parents[3] / "config" / "sim-stateless-ee-delta.yaml"
    values = dict(yaml.safe_load(config.read_text(encoding="utf-8"))["/**/sequence_ai"][
        "ros__parameters"])
    values.update(base_url=gateway.url, api_key_file=key_file, max_image_age_s=1.0,
                  max_pose_age_s=1.0)
    try:
        status, lines = _run(tmp_path, values)
        assert status == 0, "\n".join(lines.values())
        assert set(lines) == {
            "parameters", "limits", "api key", "service", "model fit", "camera front",
            "joint_states", "twist command", "gripper command", "end-effector pose",
        }
        assert "not used" in lines["joint_states"]
        assert "at [0.500, 0.000, 0.400] m in panda_link0" in lines["end-effector pose"]
        ee.publish_pose = False
        status, lines = _run(tmp_path, values)
        assert status == 1 and lines["end-effector pose"].startswith("✗")
        assert "no PoseStamped" in lines["end-effector pose"]
    finally:
        executor.shutdown(timeout_sec=10.0)
        spinner.join(timeout=10.0)
        ee.destroy_node()
