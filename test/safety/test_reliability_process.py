"""Reliability round 3, the node as its own process (main()'s executor): configure against a
catalogue that never answers fails within configure_timeout_s naming it, get_state and
/diagnostics are answered while configure waits (`configuring`: they have their own executor),
and the first SIGTERM sent meanwhile ends the node cleanly; the node started again configures
and completes a goal. Recorded as the `catalogue_silent` row of the fault matrix."""

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
from diagnostic_msgs.msg import DiagnosticArray
from lifecycle_msgs.msg import State, Transition
from lifecycle_msgs.srv import ChangeState, GetState
from rclpy.executors import SingleThreadedExecutor
from rclpy.node import Node
from support.gateway_fixture import run_gateway
from support.node_harness import GRIPPER, JOINTS, ArmHarness
from support.ros_domains import SAFETY_TESTS, domain
from support.ros_support import key_file_for
from support.safety_support import LIFECYCLE_CELLS, LIFECYCLE_SIDE, invalid_arm_commands, record
from support.waiting import wait_for

from sequence_ai_lab.demo.planner import call

# Starts processes or ROS nodes: `-m "not slow"` leaves it out.
pytestmark = pytest.mark.slow

NAMESPACE = "/stalled_catalogue"
# Short: the executor waits this long at most (the catalogue never answers).
CONFIGURE_TIMEOUT_S = 2.0
# A hang guard: without the bound the catalogue request would wait for ever.
EXIT_GUARD_S = 30.0
NEXT_GOAL_ACTIONS = 16


def _list(values: list[str]) -> str:
    return "[" + ", ".join(f'"{v}"' for v in values) + "]"


@pytest.fixture
def stalled_gateway() -> Iterator[Any]:
    with run_gateway() as gw:
        gw.inject("catalogue_stall", seconds=None, count=100)
        yield gw
        gw.clear_faults()


def _start(tmp_path: Path, gw: Any) -> tuple[subprocess.Popen, Path]:
    params = tmp_path / "node.yaml"
    params.write_text(
        f"{NAMESPACE}/sequence_ai:\n"
        "  ros__parameters:\n"
        f'    base_url: "{gw.url}"\n'
        f'    api_key_file: "{key_file_for(tmp_path, gw.api_key)}"\n'
        f"    camera_views: {_list(['exterior_1', 'wrist_left'])}\n"
        "    camera_topics: "
        f"{_list(['cameras/exterior_1/image_raw', 'cameras/wrist_left/image_raw'])}\n"
        f"    joint_names: {_list(JOINTS)}\n"
        f'    gripper_joint: "{GRIPPER}"\n'
        # As every node test's harness does: the shared machine may delay a frame.
        "    max_state_age_s: 1.0\n"
        "    max_image_age_s: 1.0\n"
        f"    configure_timeout_s: {CONFIGURE_TIMEOUT_S}\n",
        encoding="utf-8",
    )
    log = tmp_path / "node.log"
    with log.open("w") as out:
        process = subprocess.Popen(
            [sys.executable, "-m", "sequence_ai_ros.node", "--ros-args", "--params-file",
             str(params), "-r", f"__ns:={NAMESPACE}"],
            stdout=out, stderr=subprocess.STDOUT,
            env=dict(os.environ, ROS_DOMAIN_ID=str(domain(SAFETY_TESTS))),
        )
    return process, log


def test_get_state_answers_and_sigterm_ends_a_node_configuring_against_a_silent_catalogue(
    stalled_gateway: Any, safety_ros_context: Any, tmp_path: Path
) -> None:
    (cell,) = [c for c in LIFECYCLE_CELLS if c.name == "catalogue_silent"]
    row = record(LIFECYCLE_SIDE, cell, cell.expected)
    process, log = _start(tmp_path, stalled_gateway)
    client_node = Node("stalled_catalogue_client", context=safety_ros_context)
    # The robot's side: joint states and cameras out, every command the node sends recorded.
    arm = ArmHarness(NAMESPACE, safety_ros_context)
    # The node's lifecycle values as /diagnostics reports them, in order (the spinner's thread).
    lifecycles: list[str] = []

    def on_diagnostics(message: DiagnosticArray) -> None:
        for status in message.status:
            if NAMESPACE in status.name:
                lifecycles.extend(v.value for v in status.values if v.key == "lifecycle")

    client_node.create_subscription(DiagnosticArray, "/diagnostics", on_diagnostics, 10)
    executor = SingleThreadedExecutor(context=safety_ros_context)
    executor.add_node(client_node)
    executor.add_node(arm)
    spinner = threading.Thread(target=executor.spin, daemon=True)
    spinner.start()
    try:
        target = f"{NAMESPACE}/sequence_ai"
        change = client_node.create_client(ChangeState, f"{target}/change_state")
        get = client_node.create_client(GetState, f"{target}/get_state")
        assert change.wait_for_service(timeout_sec=EXIT_GUARD_S), log.read_text()
        assert get.wait_for_service(timeout_sec=EXIT_GUARD_S)
        # Answered first: the node has discovered this client before the configure. A reply
        # sent before the node's reply writer matched this client is lost: ask again.
        call(get, GetState.Request(), timeout_s=EXIT_GUARD_S, resend_s=1.0)
        configure = change.call_async(
            ChangeState.Request(transition=Transition(id=Transition.TRANSITION_CONFIGURE))
        )
        wait_for(lambda: stalled_gateway.counters()["requests"]["models"] >= 1,
                 what="configure's catalogue request")
        # Answered mid-configure: the state machine is `configuring` only inside on_configure.
        during = get.call_async(GetState.Request())
        answer = wait_for(lambda: during.done() and during.result(),
                          timeout_s=EXIT_GUARD_S, what="get_state while configuring")
        assert answer.current_state.id == State.TRANSITION_STATE_CONFIGURING, answer
        # Published mid-configure too: `configuring` is reported only inside on_configure.
        wait_for(lambda: "configuring" in lifecycles, timeout_s=EXIT_GUARD_S,
                 what="/diagnostics while configuring")
        # The first SIGTERM, sent while configure waits: honoured once it has returned.
        process.send_signal(signal.SIGTERM)
        reply = wait_for(lambda: configure.done() and configure.result(),
                         timeout_s=EXIT_GUARD_S, what="the configure reply")
        assert reply.success is False
        assert process.wait(timeout=EXIT_GUARD_S) == 0, log.read_text()
        text = log.read_text()
        assert f"timed out after {CONFIGURE_TIMEOUT_S:g}s" in text and "FATAL" not in text
        row.observed = cell.expected
        row.holds = arm.command_count()
        row.invalid_steps = len(invalid_arm_commands([c.values for c in arm.commands_since(0)]))
        row.leaked = int(process.poll() is None)
        # The next run: the node started again, the catalogue answering.
        stalled_gateway.clear_faults()
        (tmp_path / "next").mkdir()
        process, log = _start(tmp_path / "next", stalled_gateway)
        arm.configure_and_activate()
        handle, _ = arm.send_goal("after the silent catalogue", EXIT_GUARD_S, NEXT_GOAL_ACTIONS)
        status, result = arm.result(handle)
        row.next_run = result.reason
        process.send_signal(signal.SIGINT)
        assert process.wait(timeout=EXIT_GUARD_S) == 0, log.read_text()
        assert row.holds == row.expected_holds and row.invalid_steps == 0 and row.leaked == 0
        assert status == GoalStatus.STATUS_SUCCEEDED and row.next_run == "completed"
    finally:
        if process.poll() is None:
            process.kill()
            process.wait(timeout=10)
        executor.shutdown(timeout_sec=10.0)
        spinner.join(timeout=10.0)
        arm.destroy_node()
        client_node.destroy_node()
