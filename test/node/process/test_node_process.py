"""The node as its own process, configured by `--ros-args --params-file` like `ros2 run`."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from action_msgs.msg import GoalStatus
from lifecycle_msgs.msg import Transition
from support.node_harness import GRIPPER, JOINTS, ArmHarness
from support.waiting import wait_for

# Starts processes or ROS nodes: `-m "not slow"` leaves it out.
pytestmark = pytest.mark.slow

NAMESPACE = "/process_robot"


def _yaml_list(values: list[str]) -> str:
    return "[" + ", ".join(f'"{v}"' for v in values) + "]"


def _write_params(path: Path, base_url: str, key_file: str) -> None:
    # The layout `ros2 launch` and config/droid.yaml use: the node's full name, ros__parameters.
    path.write_text(
        f"{NAMESPACE}/sequence_ai:\n"
        "  ros__parameters:\n"
        '    model: "pi05-droid"\n'
        f'    base_url: "{base_url}"\n'
        f'    api_key_file: "{key_file}"\n'
        f"    camera_views: {_yaml_list(['exterior_1', 'wrist_left'])}\n"
        "    camera_topics: "
        f"{_yaml_list(['cameras/exterior_1/image_raw', 'cameras/wrist_left/image_raw'])}\n"
        f"    camera_transports: {_yaml_list(['raw', 'raw'])}\n"
        f"    joint_names: {_yaml_list(JOINTS)}\n"
        f'    gripper_joint: "{GRIPPER}"\n'
        "    max_state_age_s: 1.0\n"
        "    max_image_age_s: 1.0\n"
        "    smooth_seam: 2\n",
        encoding="utf-8",
    )


def _held(arm: ArmHarness, start: int) -> bool:
    """A hold since `start`: at a measured pose, or (the arm measured too far behind its
    target, docs/safety.md) the last target sent again."""
    commands = arm.commands_since(start)
    return bool(arm.holds(start)) or any(
        a.values == b.values for a, b in zip(commands, commands[1:])
    )


@pytest.fixture
def node_process(tmp_path: Path, gateway: Any, key_file: str) -> Iterator[subprocess.Popen]:
    params = tmp_path / "node.yaml"
    _write_params(params, gateway.url, key_file)
    log = (tmp_path / "node.log").open("w")
    process = subprocess.Popen(
        [
            sys.executable, "-m", "sequence_ai_ros.node",
            "--ros-args", "--params-file", str(params), "-r", f"__ns:={NAMESPACE}",
        ],
        stdout=log,
        stderr=subprocess.STDOUT,
        # conftest.py put the test domain and loopback discovery into this environment.
        env=dict(os.environ),
    )
    yield process
    if process.poll() is None:
        process.kill()
        process.wait(timeout=10)
    log.close()


def test_node_process_runs_a_goal_from_a_params_file(
    node_process: subprocess.Popen, ros_context: Any, gateway: Any, tmp_path: Path
) -> None:
    from rclpy.executors import MultiThreadedExecutor

    arm = ArmHarness(NAMESPACE, ros_context)
    executor = MultiThreadedExecutor(num_threads=4, context=ros_context)
    executor.add_node(arm)
    spinner = threading.Thread(target=executor.spin, daemon=True)
    spinner.start()
    try:
        assert arm.state() == "unconfigured"
        # The act server exists before configure: a goal is rejected at once, with the reason.
        rejected, _ = arm.send_goal("pick up the cup", max_seconds=5.0)
        assert not rejected.accepted
        wait_for(
            lambda: "rejected: the node is unconfigured" in arm.log_text(),
            what="the rejection's reason in /rosout",
        )
        values = arm.all_parameter_values()
        assert values["smooth_seam"].integer_value == 2
        assert list(values["joint_names"].string_array_value) == JOINTS
        arm.configure_and_activate()

        # One chunk's worth: this test is about the process, the goal tests cover seams.
        handle, _ = arm.send_goal("pick up the cup", max_seconds=30.0, max_actions=8)
        assert handle.accepted
        status, result = arm.result(handle)
        assert (status, result.reason) == (GoalStatus.STATUS_SUCCEEDED, "completed"), result.message
        assert result.actions == 8
        # The hold and the result travel on different channels: either may arrive first.
        wait_for(lambda: _held(arm, 0), what="the hold after the goal")

        # SIGINT ends the process cleanly, holding any running goal first and sending its
        # result before the server goes away.
        running, _ = arm.send_goal("pick up the cup", max_seconds=30.0)
        assert running.accepted
        start = arm.command_count()
        wait_for(lambda: arm.command_count() >= start + 3, what="the second goal moving")
        node_process.send_signal(signal.SIGINT)
        status, result = arm.result(running)
        assert (status, result.reason) == (GoalStatus.STATUS_ABORTED, "interrupted")
        assert "node shut down" in result.message, result.message
        assert node_process.wait(timeout=20) == 0
        wait_for(lambda: _held(arm, start), what="the hold on shutdown")
    finally:
        executor.shutdown(timeout_sec=10.0)
        arm.destroy_node()
        spinner.join(timeout=10.0)
    output = (tmp_path / "node.log").read_text()
    assert gateway.api_key not in output


@pytest.fixture
def arm_on_process(ros_context: Any) -> Iterator[ArmHarness]:
    from rclpy.executors import MultiThreadedExecutor

    arm = ArmHarness(NAMESPACE, ros_context)
    executor = MultiThreadedExecutor(num_threads=4, context=ros_context)
    executor.add_node(arm)
    spinner = threading.Thread(target=executor.spin, daemon=True)
    spinner.start()
    yield arm
    executor.shutdown(timeout_sec=10.0)
    arm.destroy_node()
    spinner.join(timeout=10.0)


def test_lifecycle_shutdown_mid_goal_sends_the_result_then_sigterm_exits(
    node_process: subprocess.Popen, arm_on_process: ArmHarness
) -> None:
    arm = arm_on_process
    arm.configure_and_activate()
    running, _ = arm.send_goal("pick up the cup", max_seconds=30.0)
    assert running.accepted
    start = arm.command_count()
    wait_for(lambda: arm.command_count() >= start + 3, what="the goal moving")
    assert arm.transition(Transition.TRANSITION_ACTIVE_SHUTDOWN)

    status, result = arm.result(running)
    assert (status, result.reason) == (GoalStatus.STATUS_ABORTED, "interrupted")
    assert "node shut down" in result.message, result.message
    wait_for(lambda: arm.holds(start), what="the hold on shutdown")
    assert arm.state() == "finalized"
    # Finalized, the process waits to be stopped; SIGTERM ends it cleanly.
    node_process.send_signal(signal.SIGTERM)
    assert node_process.wait(timeout=20) == 0


def test_a_node_that_fails_logs_why_and_exits_non_zero(tmp_path: Path) -> None:
    log = tmp_path / "node.log"
    with log.open("w") as out:
        code = subprocess.run(
            # A remap rcl cannot parse: rclpy.init raises.
            [sys.executable, "-m", "sequence_ai_ros.node", "--ros-args", "-r", "__node:=bad-name"],
            stdout=out, stderr=subprocess.STDOUT, env=dict(os.environ), timeout=60,
        ).returncode
    text = log.read_text()
    assert code == 1, text
    assert "the node failed" in text and "bad-name" in text, text
