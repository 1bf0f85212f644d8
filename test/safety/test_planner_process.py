"""A planner killed mid-goal leaves the arm held (issue 33 item 3): the VLM planner, its own
process, gets SIGTERM while its step's goal moves the arm; it cancels the goal and waits for the
result before it exits 0, so nothing but the hold reaches the arm after it is gone. Recorded as
the `planner_killed` row of the fault matrix."""

from __future__ import annotations

import signal
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from action_msgs.msg import GoalStatus
from support.gateway_fixture import run_gateway
from support.node_harness import node_parameters
from support.planner_support import GoalWatch, moving, moving_after_the_hold, planner_process
from support.ros_domains import SAFETY_TESTS, domain
from support.ros_support import NodeSystem, holds_until_next_goal, key_file_for
from support.safety_support import LIFECYCLE_CELLS, LIFECYCLE_SIDE, invalid_arm_commands, record
from support.waiting import wait_for

EXIT_GUARD_S = 30.0
NEXT_GOAL_ACTIONS = 16
MOVING_COMMANDS = 5


@pytest.fixture
def gw() -> Iterator[Any]:
    with run_gateway() as handle:
        yield handle


def test_a_planner_killed_mid_goal_leaves_the_arm_held_before_it_exits(
    safety_ros_context: Any, gw: Any, tmp_path: Path
) -> None:
    (cell,) = [c for c in LIFECYCLE_CELLS if c.name == "planner_killed"]
    row = record(LIFECYCLE_SIDE, cell, cell.expected)
    key_file = key_file_for(tmp_path, gw.api_key)
    nodes = NodeSystem(safety_ros_context, "planner_killed")
    process = None
    try:
        _, arm = nodes.start(**node_parameters(gw.url, key_file))
        arm.configure_and_activate()
        goals = GoalWatch(arm, "act")
        start = arm.command_count()
        log = tmp_path / "planner.log"
        process = planner_process(arm, gw, key_file, log, domain(SAFETY_TESTS))
        wait_for(lambda: len(moving(arm, start)) >= MOVING_COMMANDS, what="the arm moving")
        process.send_signal(signal.SIGTERM)
        code = process.wait(timeout=EXIT_GUARD_S)
        exited = arm.command_count()
        canceled = wait_for(lambda: goals.with_status(GoalStatus.STATUS_CANCELED),
                            what="the canceled goal")  # fmt: skip
        # The node's idle hold, republished after the exit: nothing moves after the hold, and
        # the planner had the goal's result (the hold came first) before it exited.
        wait_for(lambda: arm.command_count() > exited, what="a command after the exit")
        text = log.read_text()
        ended_first = "ended: canceled" in text and "Traceback" not in text
        if code == 0 and canceled and ended_first and moving_after_the_hold(arm, start) == []:
            row.observed = cell.expected
        row.invalid_steps = len(invalid_arm_commands([c.values for c in arm.commands_since(0)]))
        row.leaked = int(process.poll() is None)
        next_start = arm.command_count()
        handle, _ = arm.send_goal("the goal after the planner", EXIT_GUARD_S, NEXT_GOAL_ACTIONS)
        status, result = arm.result(handle)
        row.next_run = result.reason
        row.holds = holds_until_next_goal(arm, start, next_start)
        assert row.observed == row.expected, text
        assert row.holds == row.expected_holds and row.invalid_steps == 0 and row.leaked == 0
        assert status == GoalStatus.STATUS_SUCCEEDED and row.next_run == "completed"
    finally:
        if process is not None and process.poll() is None:
            process.kill()
            process.wait(timeout=10)
        nodes.close()
