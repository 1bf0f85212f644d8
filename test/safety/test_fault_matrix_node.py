"""The fault matrix through the node's `act` goal: the goal ends with the documented reason,
the arm gets exactly one hold, nothing invalid is published, nothing is left running, and the
next goal succeeds."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from typing import Any

import pytest
from action_msgs.msg import GoalStatus
from gateway_fixture import run_gateway
from lifecycle_msgs.msg import Transition
from node_harness import node_parameters, wait_for
from ros_support import NodeSystem, holds_until_next_goal, key_file_for, wait_commands
from safety_support import (
    CELLS,
    Cell,
    child_pids,
    invalid_arm_commands,
    new_threads,
    record,
)

SIDE = "node act goal"
# Hang guards; each cell ends through its own fault first.
GOAL_GUARD_S = 60.0
# stall_runway: long enough that the stalled request is not the last one the goal needs.
RUNWAY_GOAL_ACTIONS = 40
DEADLINE_GOAL_S = 2.0
NEXT_GOAL_ACTIONS = 16


@pytest.fixture(scope="module")
def matrix_system(safety_ros_context: Any, tmp_path_factory: Any) -> Iterator[tuple[Any, ...]]:
    with run_gateway() as gw:
        nodes = NodeSystem(safety_ros_context, "safety_matrix")
        try:
            key_file = key_file_for(tmp_path_factory.mktemp("key"), gw.api_key)
            _, arm = nodes.start(**node_parameters(gw.url, key_file))
            arm.configure_and_activate()
            yield gw, nodes, arm
        finally:
            nodes.close()


def _goal_bounds(cell: Cell) -> tuple[float, int]:
    if cell.ends_at_deadline:
        return DEADLINE_GOAL_S, 0
    if cell.name == "stall_runway":
        return GOAL_GUARD_S, RUNWAY_GOAL_ACTIONS
    return GOAL_GUARD_S, 0


@pytest.mark.parametrize("cell", CELLS, ids=[c.name for c in CELLS])
def test_node_fault_cell(matrix_system: tuple[Any, ...], cell: Cell) -> None:
    gw, nodes, arm = matrix_system
    row = record(SIDE, cell, cell.node_reason)
    threads_before = threading.enumerate()
    children_before = child_pids()
    start = arm.command_count()
    gripper_start = len(arm.gripper_commands)
    max_seconds, max_actions = _goal_bounds(cell)

    try:
        handle, _ = arm.send_goal(f"safety matrix {cell.name}", max_seconds, max_actions)
        assert handle.accepted
        wait_commands(arm, start + 1, "the goal's first command")
        cell.inject(gw)
        status, result = arm.result(handle)
    finally:
        cell.recover(gw)
    row.observed = result.reason
    wait_for(lambda: arm.holds(start), what="the hold after the goal")
    next_start = arm.command_count()
    commands = [c.values for c in arm.commands_since(start)]
    grippers = arm.gripper_commands[gripper_start:]
    bad_grippers = [g for g in grippers if g not in (0.0, 1.0)]
    row.invalid_steps = len(invalid_arm_commands(commands)) + len(bad_grippers)
    ignore = nodes.pool_prefixes()
    wait_for(lambda: not new_threads(threads_before, ignore) and child_pids() <= children_before,
             what="threads of the goal to end")
    leaked = new_threads(threads_before, ignore)
    row.leaked = len(leaked) + len(child_pids() - children_before)

    next_handle, _ = arm.send_goal(f"after {cell.name}", GOAL_GUARD_S, NEXT_GOAL_ACTIONS)
    next_status, next_result = arm.result(next_handle)
    row.next_run = next_result.reason
    row.holds = holds_until_next_goal(arm, start, next_start)

    assert row.observed == cell.node_reason, result.message
    if cell.error is None:
        assert status == GoalStatus.STATUS_SUCCEEDED
    else:
        assert status == GoalStatus.STATUS_ABORTED
        assert result.stopped_early and cell.error.__name__ in result.message
    assert row.holds == 1
    assert row.invalid_steps == 0, (commands, grippers)
    assert row.leaked == 0, leaked
    assert next_status == GoalStatus.STATUS_SUCCEEDED and row.next_run == "completed"
    assert next_result.actions == NEXT_GOAL_ACTIONS
    if cell.name == "stall_runway":
        assert result.underruns >= 1 and result.actions == RUNWAY_GOAL_ACTIONS


def test_deactivating_during_a_stalled_request_holds_and_returns(
    matrix_system: tuple[Any, ...],
) -> None:
    """A lifecycle stop must not wait for a request the service never answers."""
    gw, _, arm = matrix_system
    start = arm.command_count()
    handle, feedback = arm.send_goal("safety matrix deactivate", GOAL_GUARD_S)
    assert handle.accepted
    wait_commands(arm, start + 1, "the goal's first command")
    gw.inject("stall", seconds=None)
    try:
        wait_for(lambda: any(f.status == "waiting" for f in feedback),
                 what="the goal to wait for the stalled chunk")
        assert arm.transition(Transition.TRANSITION_DEACTIVATE)
        status, result = arm.result(handle)
    finally:
        gw.clear_faults()
    assert status == GoalStatus.STATUS_ABORTED and result.reason == "interrupted"
    wait_for(lambda: arm.holds(start), what="the hold")
    assert arm.commands_since(start)[-1] == arm.holds(start)[-1]
    assert arm.transition(Transition.TRANSITION_ACTIVATE)
    next_handle, _ = arm.send_goal("after deactivate", GOAL_GUARD_S, NEXT_GOAL_ACTIONS)
    assert arm.result(next_handle)[1].reason == "completed"


def test_cancelling_a_goal_whose_first_request_stalls(matrix_system: tuple[Any, ...]) -> None:
    """Nothing has played yet; the cancel still ends the goal at once, held where the arm is."""
    gw, _, arm = matrix_system
    start = arm.command_count()
    acts = gw.counters()["requests"]["act"]
    gw.inject("stall", seconds=None)
    try:
        handle, _ = arm.send_goal("safety matrix cancel while starting", GOAL_GUARD_S)
        assert handle.accepted
        wait_for(lambda: gw.counters()["requests"]["act"] > acts, what="the stalled request")
        handle.cancel()
        status, result = arm.result(handle)
    finally:
        gw.clear_faults()
    assert status == GoalStatus.STATUS_CANCELED and result.reason == "interrupted"
    assert result.actions == 0
    wait_for(lambda: arm.holds(start), what="the hold")
    assert arm.commands_since(start) == arm.holds(start)


def test_configuring_against_a_dead_gateway_fails_and_can_retry(
    matrix_system: tuple[Any, ...], tmp_path: Any
) -> None:
    gw, nodes, _ = matrix_system
    _, arm = nodes.start(**node_parameters(gw.url, key_file_for(tmp_path, gw.api_key)))
    gw.kill()
    try:
        assert not arm.transition(Transition.TRANSITION_CONFIGURE)
        assert arm.state() == "unconfigured"
    finally:
        gw.restart()
    arm.configure_and_activate()
    handle, _ = arm.send_goal("after a dead gateway", GOAL_GUARD_S, NEXT_GOAL_ACTIONS)
    assert arm.result(handle)[1].reason == "completed"
