"""Reliability round 4, node side (issue 33 items 1, 2, 4, 6 and the vanished client): a
joint_limits_file that blocks, explodes, recurses or contradicts itself never holds the
executor nor kills the node; a hand-over that finds its run ended runs afresh; a dry run sends
nothing while idle; a goal whose action client left the graph ends held. Each test is a row of
the fault matrix (GUARD_CELLS)."""

from __future__ import annotations

import contextlib
import os
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from action_msgs.msg import GoalStatus
from lifecycle_msgs.msg import Transition
from node.process.test_node_enable import set_enabled
from rclpy.executors import MultiThreadedExecutor, SingleThreadedExecutor
from rclpy.node import Node
from rclpy.parameter import Parameter
from support.gateway_fixture import run_gateway
from support.node_harness import JOINTS, SAG, ArmHarness, node_parameters
from support.ros_support import (
    EXECUTOR_THREADS,
    NodeSystem,
    Running,
    hold_events,
    holds_until_next_goal,
    key_file_for,
    wait_first_step,
)
from support.safety_support import (
    GUARD_CELLS,
    GUARD_SIDE,
    MatrixRow,
    invalid_arm_commands,
    jumps,
    new_threads,
    record,
)
from support.waiting import wait_for

from sequence_ai_lab.demo.planner import ActClient
from sequence_ai_ros.node import SequenceAiNode

GOAL_S = 30.0
NEXT_GOAL_ACTIONS = 16
MAX_STEP = 0.25
# Far above what the test policy moves: these limits never refuse a step.
ROOMY = "{has_velocity_limits: true, max_velocity: 50.0}"
# The limits the recursive edit must leave in force: the test policy's steps are faster.
SLOW_JOINT_LIMITS = "{has_velocity_limits: true, max_velocity: 0.5}"
KEPT = "stay in force"


@pytest.fixture(scope="module")
def gw() -> Iterator[Any]:
    with run_gateway() as handle:
        yield handle


@contextlib.contextmanager
def _node(
    context: Any, gw: Any, directory: Path, prefix: str, **changes: Any
) -> Iterator[tuple[SequenceAiNode, ArmHarness, NodeSystem]]:
    nodes = NodeSystem(context, prefix)
    try:
        node, arm = nodes.start(
            **node_parameters(gw.url, key_file_for(directory, gw.api_key), **changes)
        )
        yield node, arm, nodes
    finally:
        nodes.close()
        gw.clear_faults()


def _limits_file(path: Path, entry: str) -> str:
    path.write_text(
        "joint_limits:\n" + "".join(f"  {joint}: {entry}\n" for joint in JOINTS),
        encoding="utf-8",
    )
    return str(path)


class _Row:
    """One guard cell's matrix row, from before its fault to a goal after it."""

    def __init__(self, name: str, arm: ArmHarness, nodes: NodeSystem) -> None:
        (cell,) = [c for c in GUARD_CELLS if c.name == name]
        self.cell = cell
        self.row: MatrixRow = record(GUARD_SIDE, cell, cell.expected)
        self._arm, self._nodes = arm, nodes
        self._threads = threading.enumerate()
        self.start = arm.command_count()

    def settle(self, observed: str, *, goal_ran: bool) -> None:
        """Fill in the row — steps published since the fault, holds (the cell's goals', or
        every command when nothing may move), threads left, a goal on the node made active —
        and assert it."""
        arm, row = self._arm, self.row
        row.observed = observed
        commands = arm.commands_since(self.start)
        row.invalid_steps = len(invalid_arm_commands([c.values for c in commands])) + len(
            jumps(commands, MAX_STEP, SAG)
        )
        ignore = self._nodes.pool_prefixes()
        wait_for(lambda: not new_threads(self._threads, ignore), what="the cell's threads to end")
        row.leaked = len(new_threads(self._threads, ignore))
        state = arm.state()
        if state == "unconfigured":
            arm.configure_and_activate()
        elif state == "inactive":
            arm.activate()
        next_start = arm.command_count()
        if not goal_ran and row.holds < 0:
            row.holds = next_start - self.start
        handle, _ = arm.send_goal("the goal after the fault", GOAL_S, NEXT_GOAL_ACTIONS)
        status, result = arm.result(handle)
        row.next_run = result.reason
        if goal_ran:
            row.holds = holds_until_next_goal(arm, self.start, next_start)
        assert row.observed == row.expected
        assert row.holds == row.expected_holds and row.invalid_steps == 0 and row.leaked == 0
        assert status == GoalStatus.STATUS_SUCCEEDED and row.next_run == "completed"


def _moving(arm: ArmHarness, instruction: str, max_seconds: float = GOAL_S) -> Any:
    start = arm.command_count()
    handle, _ = arm.send_goal(instruction, max_seconds)
    assert handle.accepted
    wait_first_step(arm, start)
    return handle


# ----- 1. a joint_limits_file that blocks -----


def test_a_fifo_limits_file_never_stops_enable_or_cancel(
    safety_ros_context: Any, gw: Any, tmp_path: Path
) -> None:
    """Without the bounds the FIFO is opened on the executor, which then answers nothing."""
    path = tmp_path / "joint_limits.yaml"
    limits = _limits_file(path, ROOMY)
    with _node(safety_ros_context, gw, tmp_path, "limits_fifo", joint_limits_file=limits) as (
        _, arm, nodes,
    ):
        arm.configure_and_activate()
        row = _Row("limits_fifo", arm, nodes)
        first = _moving(arm, "a goal while the limits file turns into a FIFO")
        path.unlink()
        os.mkfifo(path)
        wait_for(lambda: "is a FIFO" in arm.log_text() and KEPT in arm.log_text(),
                 what="the watch's warning about the FIFO")
        # Set live: refused with the reason, before anything is opened.
        other = tmp_path / "other.fifo"
        os.mkfifo(other)
        (result,) = arm.set_parameters(joint_limits_file=str(other))
        assert not result.successful and "is a FIFO" in result.reason, result.reason
        # ~/enable is answered and ends the goal, held.
        set_enabled(arm, False)
        status, ended = arm.result(first)
        assert status == GoalStatus.STATUS_ABORTED and ended.reason == "disabled", ended.message
        set_enabled(arm, True)
        # A cancel is answered too, and its goal ends held.
        second = _moving(arm, "a goal cancelled while the limits file is a FIFO")
        assert second.cancel().return_code == 0
        status, ended = arm.result(second)
        assert status == GoalStatus.STATUS_CANCELED, ended.message
        # The limits read before stay in force until the file is a file again.
        _limits_file_replaced(path, ROOMY)
        row.settle("~/enable and cancel answered; FIFO refused; limits kept", goal_ran=True)


def _limits_file_replaced(path: Path, entry: str) -> None:
    path.unlink()
    _limits_file(path, entry)


def test_an_alias_bomb_at_configure_is_refused_at_once(
    safety_ros_context: Any, gw: Any, tmp_path: Path
) -> None:
    """Nine levels of nine aliases: without the bounds, configure walks 9^9 mappings."""
    levels = ["a0: &a0 {" + ", ".join(f"k{i}: 1" for i in range(9)) + "}"]
    for level in range(1, 10):
        inner = ", ".join(f"k{i}: *a{level - 1}" for i in range(9))
        levels.append(f"a{level}: &a{level} {{{inner}}}")
    bomb = tmp_path / "bomb.yaml"
    bomb.write_text("\n".join(levels) + "\nrobot: *a9\n", encoding="utf-8")
    assert bomb.stat().st_size < 1024
    with _node(safety_ros_context, gw, tmp_path, "limits_bomb", joint_limits_file=str(bomb),
               configure_timeout_s=5.0) as (_, arm, nodes):
        row = _Row("limits_alias_bomb", arm, nodes)
        assert not arm.transition(Transition.TRANSITION_CONFIGURE)
        assert arm.state() == "unconfigured"
        text = wait_for(lambda: "configure failed" in arm.log_text() and arm.log_text(),
                        what="the configure error")
        assert "uses a YAML anchor or alias" in text and str(bomb) in text, text
        (result,) = arm.set_parameters(joint_limits_file="")
        assert result.successful
        row.settle("configure failed naming the alias", goal_ran=False)


# ----- 2. a self-referencing edit, and contradicting limits -----


def test_a_recursive_edit_keeps_the_node_and_its_limits(
    safety_ros_context: Any, gw: Any, tmp_path: Path
) -> None:
    """Without the bounds the edit's RecursionError ends the node within a second."""
    path = tmp_path / "joint_limits.yaml"
    limits = _limits_file(path, SLOW_JOINT_LIMITS)
    with _node(safety_ros_context, gw, tmp_path, "limits_recursive",
               joint_limits_file=limits) as (node, arm, nodes):
        arm.configure_and_activate()
        row = _Row("limits_recursive_edit", arm, nodes)
        path.write_text("robot: &a\n  ros__parameters: *a\n", encoding="utf-8")
        wait_for(lambda: "anchor or alias" in arm.log_text() and KEPT in arm.log_text(),
                 what="the warning about the edit")
        # Alive, on the limits read before: the test policy's steps exceed 0.5 rad/s.
        handle, _ = arm.send_goal("a goal after the recursive edit", GOAL_S)
        status, ended = arm.result(handle)
        assert status == GoalStatus.STATUS_ABORTED and ended.reason == "validate", ended.message
        assert "max_velocity 0.5000" in ended.message, ended.message
        assert node.health.snapshot().lifecycle == "active"
        (result,) = arm.set_parameters(joint_limits_file="")
        assert result.successful
        row.settle("node alive; old limits kept (goal validate on them)", goal_ran=True)


def test_min_position_above_max_position_is_refused_naming_joint_field_and_value(
    safety_ros_context: Any, gw: Any, tmp_path: Path
) -> None:
    path = tmp_path / "joint_limits.yaml"
    limits = _limits_file(path, "{has_position_limits: false, min_position: 2.0, "
                                "max_position: 1.0}")
    with _node(safety_ros_context, gw, tmp_path, "limits_inverted",
               joint_limits_file=limits) as (_, arm, nodes):
        row = _Row("limits_min_over_max", arm, nodes)
        assert not arm.transition(Transition.TRANSITION_CONFIGURE)
        text = wait_for(lambda: "configure failed" in arm.log_text() and arm.log_text(),
                        what="the configure error")
        assert (f"joint_limits.{JOINTS[0]}.min_position=2.0 is above "
                f"joint_limits.{JOINTS[0]}.max_position=1.0") in text, text
        (result,) = arm.set_parameters(joint_limits_file="")
        assert result.successful
        row.settle("configure failed naming joint, field and value", goal_ran=False)


# ----- 4. a hand-over as the running goal ends -----


def _late(policy: Any, took: bool | None) -> Callable[..., bool]:
    """`Policy.hand_over` reaching the run only once it has ended: the real call (which finds
    no run: false), or, `took` set, a call that says `took` and changes nothing (it came as
    the run passed its last check)."""
    real = policy.hand_over

    def hand_over(instruction: str, *, max_seconds: float) -> bool:
        wait_for(lambda: policy._loop is None, what="the running goal's run to end")
        if took is None:
            return bool(real(instruction, max_seconds=max_seconds))
        return took

    return hand_over


@pytest.mark.parametrize("took", [None, True], ids=["found_no_run", "came_too_late"])
def test_a_hand_over_as_the_running_goal_ends_runs_afresh(
    safety_ros_context: Any, gw: Any, tmp_path: Path, took: bool | None
) -> None:
    """Without the check the new goal reports success having played nothing."""
    with _node(safety_ros_context, gw, tmp_path, "late_handover") as (node, arm, nodes):
        arm.configure_and_activate()
        if took is None:
            row: _Row | None = _Row("late_handover", arm, nodes)
        else:
            row = None
        policy = node._configured_parts().policy
        policy.hand_over = _late(policy, took)
        first = _moving(arm, "a goal about to end", max_seconds=2.0)
        second, _ = arm.send_goal("the step handed over as it ends", 5.0, handover=True)
        assert second.accepted
        status, ended = arm.result(first)
        assert status == GoalStatus.STATUS_SUCCEEDED and ended.reason == "handed_over"
        status, result = arm.result(second)
        assert status == GoalStatus.STATUS_SUCCEEDED, result.message
        assert result.actions > 0, result.message
        assert "runs afresh" in arm.log_text()
        if row is not None:
            row.settle("handed_over; the new goal ran afresh", goal_ran=True)


# ----- 6. a dry run sends nothing while idle -----


def test_a_dry_run_sends_no_idle_hold(
    safety_ros_context: Any, gw: Any, tmp_path: Path
) -> None:
    """Without the check the idle hold goes to the arm's topic while dry_run is true."""
    with _node(safety_ros_context, gw, tmp_path, "dry_idle", hold_republish_hz=10.0) as (
        node, arm, nodes,
    ):
        arm.configure_and_activate()
        start = arm.command_count()
        handle, _ = arm.send_goal("a real goal, then a dry idle node", GOAL_S, 8)
        status, result = arm.result(handle)
        assert status == GoalStatus.STATUS_SUCCEEDED, result.message
        wait_for(lambda: hold_events(arm, start), what="the goal's hold")
        gate = node._configured_parts().gate
        calls: list[bool] = []
        republish = gate.republish_hold

        def counted(rules: Any) -> None:
            calls.append(rules.dry_run)
            republish(rules)

        gate.republish_hold = counted
        # Republished while dry_run is false: to the arm.
        sent = arm.command_count()
        wait_for(lambda: arm.command_count() > sent, what="the idle hold republished")
        (result,) = arm.set_parameters(dry_run=True)
        assert result.successful
        wait_for(lambda: any(calls), what="an idle republish with dry_run true")
        row = _Row("dry_run_idle", arm, nodes)
        gripper, trajectories, mark = (
            len(arm.gripper_commands), len(arm.trajectories_since(0)), len(calls))
        wait_for(lambda: len(calls) >= mark + 3, what="three more idle republishes")
        # Every message on the command topics while dry_run was true.
        row.row.holds = len(arm.commands_since(row.start)) + (
            len(arm.gripper_commands) - gripper) + (len(arm.trajectories_since(0)) - trajectories)
        assert row.row.holds == 0
        (result,) = arm.set_parameters(dry_run=False)
        assert result.successful
        resumed = arm.command_count()
        wait_for(lambda: arm.command_count() > resumed, what="the idle hold once dry_run is off")
        row.settle("nothing on the command topics", goal_ran=False)


# ----- the safety net for a vanished action client -----


@contextlib.contextmanager
def _node_without_arm_client(
    context: Any, gw: Any, directory: Path, prefix: str, **changes: Any
) -> Iterator[tuple[SequenceAiNode, ArmHarness, NodeSystem]]:
    """A node and its test arm whose action client is destroyed before anything spins (one
    destroyed while its executor spins can end rclpy 7.1.5's executor): the planner that
    vanishes is then the only action client."""
    namespace = f"/{prefix}_{os.getpid()}"
    values = node_parameters(gw.url, key_file_for(directory, gw.api_key), **changes)
    node = SequenceAiNode(
        namespace=namespace, context=context,
        parameter_overrides=[Parameter(k, value=v) for k, v in values.items()],
    )
    arm = ArmHarness(namespace, context)
    arm.act.destroy()
    executor = SingleThreadedExecutor(context=context)
    executor.add_node(node)
    arm_executor = MultiThreadedExecutor(num_threads=EXECUTOR_THREADS, context=context)
    arm_executor.add_node(arm)
    spinners = (
        threading.Thread(target=executor.spin, daemon=True),
        threading.Thread(target=arm_executor.spin, daemon=True),
    )
    nodes = NodeSystem(context, prefix)
    nodes.running.append(Running(node, arm, executor, arm_executor, spinners))
    for spinner in spinners:
        spinner.start()
    try:
        yield node, arm, nodes
    finally:
        nodes.close()
        gw.clear_faults()


def test_a_goal_whose_action_client_left_the_graph_ends_held(
    safety_ros_context: Any, gw: Any, tmp_path: Path
) -> None:
    """Without the safety net the goal runs on to its max_seconds (ROS 2's semantics)."""
    with _node_without_arm_client(safety_ros_context, gw, tmp_path, "client_gone",
                                  end_goal_without_client_s=0.5) as (node, arm, nodes):
        arm.configure_and_activate()
        row = _Row("client_vanished", arm, nodes)
        namespace = arm.get_namespace()
        planner = Node("vanishing_planner", namespace=namespace, context=safety_ros_context)
        planner_executor = SingleThreadedExecutor(context=safety_ros_context)
        planner_executor.add_node(planner)
        spinner = threading.Thread(target=planner_executor.spin, daemon=True)
        spinner.start()
        client = ActClient(planner, f"{namespace}/act")
        # The node must have seen the client in the graph (its feedback subscription) to know it.
        feedback = f"{namespace}/act/_action/feedback"
        wait_for(lambda: node.count_subscribers(feedback) == 1, what="the planner in the graph")
        start = arm.command_count()
        goal = client.send("a goal whose client goes away", GOAL_S)
        assert goal.accepted
        wait_first_step(arm, start)
        # The planner goes: its executor stopped, then its action client (rclpy's destroy_node
        # leaves it) and its node destroyed.
        planner_executor.shutdown(timeout_sec=10.0)
        spinner.join(timeout=10.0)
        client.destroy()
        planner.destroy_node()
        text = wait_for(lambda: "every action client" in arm.log_text() and arm.log_text(),
                        what="the goal ended for its vanished client")
        assert "end_goal_without_client_s" in text
        wait_for(lambda: hold_events(arm, row.start), what="the goal's hold")
        arm.act = ActClient(arm, f"{namespace}/act")
        row.settle("goal ended held", goal_ran=True)
