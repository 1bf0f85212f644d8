"""The fault matrix through the node's `act` goal: the goal ends with the documented reason,
the arm gets exactly one hold (or, where nothing is provably still, none), nothing invalid is
published, nothing is left running, and the next goal succeeds.

Besides the cells it shares with the client, the node has rows of its own: the arm moves while
the node waits, joint states or a camera stop while a chunk plays, a velocity arm is preempted.
"""

from __future__ import annotations

import contextlib
import math
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import pytest
from action_msgs.msg import GoalStatus
from lifecycle_msgs.msg import Transition
from node.process.test_node_enable import HEARTBEAT, Heartbeat, set_enabled
from rclpy.action import ActionClient
from rclpy.qos import QoSProfile
from std_msgs.msg import Float64MultiArray
from support.gateway_fixture import run_gateway
from support.node_harness import JOINTS, SAG, ArmHarness, node_parameters
from support.ros_support import (
    NodeSystem,
    hold_events,
    holds_until_next_goal,
    key_file_for,
    wait_first_step,
)
from support.safety_support import (
    CELLS,
    NODE_CELLS,
    NODE_FAULT_CELLS,
    Cell,
    MatrixRow,
    NodeCell,
    child_pids,
    invalid_arm_commands,
    jumps,
    new_threads,
    record,
)
from support.waiting import wait_for

from sequence_ai_interfaces.action import Act
from sequence_ai_ros.core.freshness import StaleObservation
from sequence_ai_ros.node import SequenceAiNode

# Starts processes or ROS nodes: `-m "not slow"` leaves it out.
pytestmark = pytest.mark.slow

SIDE = "node act goal"
# Hang guards; each cell ends through its own fault first.
GOAL_GUARD_S = 60.0
# stall_runway: long enough that the stalled request is not the last one the goal needs.
RUNWAY_GOAL_ACTIONS = 40
DEADLINE_GOAL_S = 2.0
NEXT_GOAL_ACTIONS = 16
MAX_STEP = 0.25
# The arm is pushed this far while the node waits: more than max_step.
PUSH_RAD = 0.6
STALE_PUSH_RAD = 1.0
# sim-droid-absolute-reach (cosmos3's row, rows reaching a hashed target) plays its whole 32-row
# chunk (2.1 s at 15 Hz) without a request when prefetch is off: the only check on the inputs
# while it plays is the node's own.
LONG_CHUNK_MODEL = "sim-droid-absolute-reach"
LONG_CHUNK_ROWS = 32
LONG_CHUNK_VIEWS = ["exterior_1", "exterior_2", "wrist_left"]
LONG_CHUNK_MAX_AGE_S = 0.5
DEAD_CAMERA = "wrist_left"
VELOCITY_TOPIC = "forward_velocity_controller/commands"


# A node cell's goal: (status, result, words its result message must contain).
Outcome = tuple[int, Any, tuple[str, ...]]


@dataclass
class System:
    """One node and its test arm on the matrix's gateway."""

    gw: Any
    nodes: NodeSystem
    node: SequenceAiNode
    arm: ArmHarness


@pytest.fixture(scope="module")
def matrix_gateway() -> Iterator[Any]:
    with run_gateway() as gw:
        yield gw


@contextlib.contextmanager
def _active(context: Any, gw: Any, directory: Any, prefix: str, **changes: Any) -> Iterator[System]:
    """A configured, active node with the matrix's parameters plus ``changes``."""
    nodes = NodeSystem(context, prefix)
    try:
        node, arm = nodes.start(**node_parameters(gw.url, key_file_for(directory, gw.api_key),
                                                  **changes))
        arm.configure_and_activate()
        yield System(gw, nodes, node, arm)
    finally:
        nodes.close()


@pytest.fixture(scope="module")
def matrix_system(
    safety_ros_context: Any, tmp_path_factory: Any, matrix_gateway: Any
) -> Iterator[System]:
    with _active(safety_ros_context, matrix_gateway, tmp_path_factory.mktemp("key"),
                 "safety_matrix") as system:
        yield system


@pytest.fixture(scope="module")
def deadman_system(
    safety_ros_context: Any, tmp_path_factory: Any, matrix_gateway: Any
) -> Iterator[System]:
    with _active(
        safety_ros_context, matrix_gateway, tmp_path_factory.mktemp("key"), "safety_deadman",
        enable_topic=HEARTBEAT, enable_timeout_s=1.0,
    ) as system:
        yield system


@pytest.fixture(scope="module")
def long_chunk_system(
    safety_ros_context: Any, tmp_path_factory: Any, matrix_gateway: Any
) -> Iterator[System]:
    with _active(
        safety_ros_context, matrix_gateway, tmp_path_factory.mktemp("key"), "safety_long",
        model=LONG_CHUNK_MODEL, camera_views=LONG_CHUNK_VIEWS,
        camera_topics=[f"cameras/{view}/image_raw" for view in LONG_CHUNK_VIEWS],
        camera_transports=["raw"] * len(LONG_CHUNK_VIEWS), prefetch=False,
        max_state_age_s=LONG_CHUNK_MAX_AGE_S, max_image_age_s=LONG_CHUNK_MAX_AGE_S,
    ) as system:
        yield system


@pytest.fixture(scope="module")
def velocity_system(
    safety_ros_context: Any, tmp_path_factory: Any, matrix_gateway: Any
) -> Iterator[tuple[System, list[tuple[float, ...]]]]:
    with _active(
        safety_ros_context, matrix_gateway, tmp_path_factory.mktemp("key"), "safety_velocity",
        command_interface="velocity", command_topic=VELOCITY_TOPIC, hold_between_goals=False,
    ) as system:
        velocities: list[tuple[float, ...]] = []
        system.arm.create_subscription(
            Float64MultiArray, VELOCITY_TOPIC, lambda msg: velocities.append(tuple(msg.data)),
            10,
        )
        yield system, velocities


# ----- what every cell records -----


class _Before:
    """What a cell compares with afterwards: threads, children, the arm's command counts."""

    def __init__(self, arm: ArmHarness) -> None:
        self.threads = threading.enumerate()
        self.children = child_pids()
        self.commands = arm.command_count()
        self.grippers = len(arm.gripper_commands)


def _settle(
    row: MatrixRow, system: System, before: _Before, instruction: str,
    holds: Callable[[int], int] | None = None,
) -> tuple[int, Any]:
    """Fill in the row's invalid steps, leaks, next goal and holds; return the next goal's
    (status, result)."""
    arm, nodes = system.arm, system.nodes
    commands = arm.commands_since(before.commands)
    bad_grippers = [g for g in arm.gripper_commands[before.grippers:] if g not in (0.0, 1.0)]
    row.invalid_steps = (
        len(invalid_arm_commands([c.values for c in commands]))
        + len(jumps(commands, MAX_STEP, SAG)) + len(bad_grippers)
    )
    ignore = nodes.pool_prefixes()
    wait_for(lambda: not new_threads(before.threads, ignore)
             and child_pids() <= before.children, what="threads of the goal to end")
    leaked = new_threads(before.threads, ignore)
    row.leaked = len(leaked) + len(child_pids() - before.children)
    next_start = arm.command_count()
    next_handle, _ = arm.send_goal(instruction, GOAL_GUARD_S, NEXT_GOAL_ACTIONS)
    next_status, next_result = arm.result(next_handle)
    row.next_run = next_result.reason
    row.holds = (
        holds(next_start) if holds is not None
        else holds_until_next_goal(arm, before.commands, next_start)
    )
    return next_status, next_result


def _assert_row(row: MatrixRow, next_status: int, next_result: Any) -> None:
    assert row.holds == row.expected_holds
    assert row.invalid_steps == 0
    assert row.leaked == 0
    assert next_status == GoalStatus.STATUS_SUCCEEDED and row.next_run == "completed"
    assert next_result.actions == NEXT_GOAL_ACTIONS


# ----- the cells shared with the client, and gateway faults only the node runs -----


def _goal_bounds(cell: Cell) -> tuple[float, int]:
    if cell.ends_at_deadline:
        return DEADLINE_GOAL_S, 0
    if cell.name == "stall_runway":
        return GOAL_GUARD_S, RUNWAY_GOAL_ACTIONS
    return GOAL_GUARD_S, 0


@pytest.mark.parametrize(
    "cell", CELLS + NODE_FAULT_CELLS, ids=[c.name for c in CELLS + NODE_FAULT_CELLS]
)
def test_node_fault_cell(matrix_system: System, cell: Cell) -> None:
    gw, arm = matrix_system.gw, matrix_system.arm
    row = record(SIDE, cell, cell.node_reason)
    before = _Before(arm)
    max_seconds, max_actions = _goal_bounds(cell)

    try:
        handle, _ = arm.send_goal(f"safety matrix {cell.name}", max_seconds, max_actions)
        assert handle.accepted
        wait_first_step(arm, before.commands)
        cell.inject(gw)
        status, result = arm.result(handle)
    finally:
        cell.recover(gw)
    row.observed = result.reason
    wait_for(lambda: arm.holds(before.commands), what="the hold after the goal")
    next_status, next_result = _settle(row, matrix_system, before, f"after {cell.name}")

    assert row.observed == cell.node_reason, result.message
    if cell.error is None:
        assert status == GoalStatus.STATUS_SUCCEEDED
    else:
        assert status == GoalStatus.STATUS_ABORTED
        assert result.stopped_early and cell.error.__name__ in result.message
    _assert_row(row, next_status, next_result)
    if cell.name == "stall_runway":
        assert result.underruns >= 1 and result.actions == RUNWAY_GOAL_ACTIONS


# ----- the node's own cells -----


def _push(system: System, joint: int, size: float) -> None:
    """Push one joint toward the middle of its range, and wait until the node measures it."""
    arm, node = system.arm, system.node
    delta = -size if arm.positions[joint] > 0.0 else size
    arm.move_joint(joint, delta)
    target = arm.positions[joint]
    wait_for(lambda: _measures(node, joint, target),
             what=f"the node to measure {JOINTS[joint]} at {target:.3f}")


def _measures(node: SequenceAiNode, joint: int, value: float) -> bool:
    try:
        return abs(node._configured.cache.joints(10.0).positions[joint] - value) < 1e-9
    except StaleObservation:
        return False


def _joints_stale(node: SequenceAiNode, max_age_s: float) -> bool:
    try:
        node._configured.cache.joints(max_age_s)
    except StaleObservation:
        return True
    return False


def _first_request_stalls(system: System, cell: NodeCell) -> Outcome:
    gw, arm = system.gw, system.arm
    acts = gw.counters()["requests"]["act"]
    gw.inject("stall", seconds=None)
    try:
        handle, _ = arm.send_goal(f"safety matrix {cell.name}", GOAL_GUARD_S,
                                  RUNWAY_GOAL_ACTIONS)
        assert handle.accepted
        wait_for(lambda: gw.counters()["requests"]["act"] > acts, what="the stalled request")
        _push(system, 4, PUSH_RAD)
    finally:
        gw.clear_faults()
    return (*arm.result(handle), ("max_step",))


def _underrun(system: System, cell: NodeCell) -> Outcome:
    gw, arm = system.gw, system.arm
    start = arm.command_count()
    handle, feedback = arm.send_goal(f"safety matrix {cell.name}", GOAL_GUARD_S,
                                     RUNWAY_GOAL_ACTIONS)
    assert handle.accepted
    try:
        wait_first_step(arm, start)
        gw.inject("stall", seconds=None)
        wait_for(lambda: any(f.status == "waiting" for f in feedback),
                 what="the goal to wait for the stalled chunk")
        _push(system, 0, PUSH_RAD)
    finally:
        gw.clear_faults()
    return (*arm.result(handle), ("max_step",))


def _stale_at_start(system: System, cell: NodeCell) -> Outcome:
    arm, node = system.arm, system.node
    arm.publish_joints = False
    try:
        wait_for(lambda: _joints_stale(node, 1.0), what="the node's joint state to go stale")
        # The arm moves on while the node's newest joint state stays behind.
        arm.move_joint(2, -STALE_PUSH_RAD if arm.positions[2] > 0.0 else STALE_PUSH_RAD)
        handle, _ = arm.send_goal(f"safety matrix {cell.name}", GOAL_GUARD_S)
        assert handle.accepted
        status, result = arm.result(handle)
    finally:
        arm.publish_joints = True
    wait_for(lambda: not _joints_stale(node, 1.0), what="fresh joint states again")
    return status, result, ("joint_states", "could not be held")


def _input_stops_mid_chunk(
    system: System, cell: NodeCell, stop: Callable[[], object], resume: Callable[[], object]
) -> tuple[int, Any]:
    """A one-chunk goal whose input ``stop``s after its first command (``resume`` after)."""
    arm = system.arm
    start = arm.command_count()
    handle, _ = arm.send_goal(f"safety matrix {cell.name}", GOAL_GUARD_S, LONG_CHUNK_ROWS)
    assert handle.accepted
    try:
        wait_first_step(arm, start)
        stop()
        return arm.result(handle)
    finally:
        resume()


def _joints_stop(system: System, cell: NodeCell) -> Outcome:
    arm, node = system.arm, system.node
    status, result = _input_stops_mid_chunk(
        system, cell, lambda: setattr(arm, "publish_joints", False),
        lambda: setattr(arm, "publish_joints", True),
    )
    wait_for(lambda: not _joints_stale(node, LONG_CHUNK_MAX_AGE_S), what="fresh joint states")
    return status, result, ("joint_states", "max_state_age_s")


def _camera_dies(system: System, cell: NodeCell) -> Outcome:
    arm, node = system.arm, system.node
    status, result = _input_stops_mid_chunk(
        system, cell, lambda: arm.paused_views.add(DEAD_CAMERA),
        lambda: arm.paused_views.discard(DEAD_CAMERA),
    )
    wait_for(lambda: (node._configured.cache.ages()[DEAD_CAMERA] or 10.0) < LONG_CHUNK_MAX_AGE_S,
             what="the camera again")
    return status, result, (f"camera {DEAD_CAMERA}", "max_image_age_s")


def _moving(system: System, cell: NodeCell) -> Any:
    """A goal whose first step reached the arm."""
    arm = system.arm
    start = arm.command_count()
    handle, _ = arm.send_goal(f"safety matrix {cell.name}", GOAL_GUARD_S)
    assert handle.accepted
    wait_first_step(arm, start)
    return handle


def _disabled_mid_goal(system: System, cell: NodeCell) -> Outcome:
    handle = _moving(system, cell)
    set_enabled(system.arm, False)
    try:
        return (*system.arm.result(handle), ("motion disabled by ~/enable",))
    finally:
        set_enabled(system.arm, True)


def _deadman_lapses(system: System, cell: NodeCell) -> Outcome:
    arm, node = system.arm, system.node
    deadman = Heartbeat(arm)
    deadman.hold()
    wait_for(lambda: node._enable.blocked() is None, what="the heartbeat")
    handle = _moving(system, cell)
    deadman.release()
    status, result = arm.result(handle)
    # The next goal (the row's) runs with the deadman held again.
    deadman.hold()
    wait_for(lambda: node._enable.blocked() is None, what="the heartbeat")
    return status, result, ("enable_timeout_s",)


def _joint_too_fast(system: System, cell: NodeCell) -> Outcome:
    arm = system.arm
    limit = {f"joint_limits.{JOINTS[0]}.has_velocity_limits": True,
             f"joint_limits.{JOINTS[0]}.max_velocity": 0.5}
    assert all(r.successful for r in arm.set_parameters(**limit))
    try:
        handle, _ = arm.send_goal(f"safety matrix {cell.name}", GOAL_GUARD_S)
        assert handle.accepted
        return (*arm.result(handle), (JOINTS[0], "max_velocity 0.5000"))
    finally:
        arm.set_parameters(**{f"joint_limits.{JOINTS[0]}.has_velocity_limits": False})


SCENARIOS: dict[str, tuple[str, Callable[[System, NodeCell], Outcome]]] = {
    "arm_moved_first_request": ("matrix_system", _first_request_stalls),
    "arm_moved_in_underrun": ("matrix_system", _underrun),
    "stale_joints_at_start": ("matrix_system", _stale_at_start),
    "joints_stop_mid_chunk": ("long_chunk_system", _joints_stop),
    "camera_dies_mid_chunk": ("long_chunk_system", _camera_dies),
    "disabled_mid_goal": ("matrix_system", _disabled_mid_goal),
    "deadman_lapses": ("deadman_system", _deadman_lapses),
    "joint_too_fast": ("matrix_system", _joint_too_fast),
}


@pytest.mark.parametrize(
    "cell", [c for c in NODE_CELLS if c.name in SCENARIOS], ids=lambda c: c.name
)
def test_node_only_cell(request: pytest.FixtureRequest, cell: NodeCell) -> None:
    fixture, scenario = SCENARIOS[cell.name]
    system: System = request.getfixturevalue(fixture)
    arm = system.arm
    row = record(SIDE, cell, cell.expected)
    before = _Before(arm)
    status, result, words = scenario(system, cell)
    row.observed = result.reason

    def holds(next_start: int) -> int:
        events = holds_until_next_goal(arm, before.commands, next_start)
        # A hold at the last target repeats the goal's last step.
        commands = arm.commands_since(before.commands)[: next_start - before.commands]
        measured = set(arm.holds(before.commands))
        at_target = [
            b for a, b in zip(commands, commands[1:])
            if a.values == b.values and a not in measured and b not in measured
        ]
        return events + min(1, len(at_target))

    if cell.holds:
        wait_for(lambda: holds(arm.command_count()) >= cell.holds, what="the hold after the goal")
    next_status, next_result = _settle(row, system, before, f"after {cell.name}", holds)
    assert row.observed == cell.expected, result.message
    assert status == GoalStatus.STATUS_ABORTED and result.stopped_early
    for word in words:
        assert word in result.message, result.message
    _assert_row(row, next_status, next_result)


def test_a_preempted_velocity_goal_and_a_cancelled_successor_both_end_in_zeros(
    velocity_system: tuple[System, list[tuple[float, ...]]],
) -> None:
    """With hold_between_goals false the preempted goal still stops a velocity arm: the next
    goal's first request can take up to startup_timeout_s, and a forward velocity controller
    applies the last velocity until then."""
    system, velocities = velocity_system
    gw, arm = system.gw, system.arm
    (cell,) = [c for c in NODE_CELLS if c.name == "velocity_preempted"]
    row = record(SIDE, cell, cell.expected)
    before = _Before(arm)
    first_velocity = len(velocities)
    first, _ = arm.send_goal(f"safety matrix {cell.name}", GOAL_GUARD_S)
    assert first.accepted
    wait_for(lambda: len(velocities) >= first_velocity + 3, what="the first goal's steps")
    acts = gw.counters()["requests"]["act"]
    # Two: the running goal's prefetch may take the first, the new goal's request the second.
    gw.inject("stall", seconds=None, count=2)
    try:
        second, _ = arm.send_goal(f"after {cell.name}", GOAL_GUARD_S)
        assert second.accepted
        first_status, first_result = arm.result(first)
        wait_for(lambda: gw.counters()["requests"]["act"] > acts, what="the stalled request")
        zero = wait_for(lambda: _zero_after_motion(velocities, first_velocity),
                        what="zero velocity after the preempted goal")
        cancelled_at = len(velocities)
        second.cancel()
        second_status, second_result = arm.result(second)
        wait_for(lambda: any(not any(v) for v in velocities[cancelled_at:]),
                 what="zero velocity after the cancelled goal")
    finally:
        gw.clear_faults()
    row.observed = f"{first_result.reason}, then {second_result.reason}"
    # One hold per goal end: the preempted goal's zero before the cancel, the cancelled one's
    # after it.
    ended = velocities[first_velocity:]
    row.holds = int(zero is not None) + int(any(not any(v) for v in velocities[cancelled_at:]))
    row.invalid_steps = sum(1 for v in ended if not all(math.isfinite(x) for x in v))
    ignore = system.nodes.pool_prefixes()
    wait_for(lambda: not new_threads(before.threads, ignore), what="threads of the goals to end")
    row.leaked = len(new_threads(before.threads, ignore)) + len(child_pids() - before.children)
    next_handle, _ = arm.send_goal(f"after {cell.name} again", GOAL_GUARD_S, NEXT_GOAL_ACTIONS)
    next_status, next_result = arm.result(next_handle)
    row.next_run = next_result.reason

    assert first_status == GoalStatus.STATUS_ABORTED
    assert second_status == GoalStatus.STATUS_CANCELED and second_result.actions == 0
    assert row.observed == cell.expected
    _assert_row(row, next_status, next_result)


BURST = 50


def test_a_burst_of_goals_preempts_each_in_turn_and_answers_every_one(
    matrix_system: System,
) -> None:
    """Goals sent faster than any can run: each preempts the one before, every result reaches
    the planner that asked for all of them at once, and the arm ends held once after the last."""
    arm = matrix_system.arm
    (cell,) = [c for c in NODE_CELLS if c.name == "goal_burst"]
    row = record(SIDE, cell, cell.expected)
    before = _Before(arm)
    # A planner that fires a burst needs room for its replies (rclpy's default depth is 10).
    deep = QoSProfile(depth=BURST * 2)
    # Left to the harness node's end: rclpy 7.1.5's ActionClient.destroy() while that node's
    # executor spins can invalidate the handle it is adding to a wait set, ending the executor
    # (and every later goal's response with it).
    client = ActionClient(
        arm, Act, f"{arm.get_namespace()}/act", goal_service_qos_profile=deep,
        result_service_qos_profile=deep, cancel_service_qos_profile=deep,
    )
    assert client.wait_for_server(timeout_sec=30.0)
    sent = []
    for index in range(BURST):
        # Only the last is short enough to complete.
        goal = Act.Goal(instruction=f"safety matrix burst {index}", max_seconds=GOAL_GUARD_S,
                        max_actions=NEXT_GOAL_ACTIONS if index == BURST - 1 else 0)
        sent.append(client.send_goal_async(goal))
        time.sleep(1.0 / BURST)
    wait_for(lambda: all(f.done() for f in sent), what="every goal's response")
    handles = [f.result() for f in sent]
    assert all(h.accepted for h in handles)
    results = [h.get_result_async() for h in handles]
    wait_for(lambda: all(f.done() for f in results), timeout_s=2 * GOAL_GUARD_S,
             what=f"all {BURST} results")
    reasons = [f.result().result.reason for f in results]
    preempted = reasons[:-1].count("preempted")
    row.observed = f"{preempted} preempted, then {reasons[-1]}"

    def holds_after_the_last_step(next_start: int) -> int:
        # Each preempted goal that moved was held too; the row counts the end of the burst.
        commands = arm.commands_since(before.commands)[: next_start - before.commands]
        measured = {c.values for c in arm.holds(before.commands)}
        steps = [i for i, c in enumerate(commands) if c.values not in measured]
        last = before.commands + (steps[-1] + 1 if steps else 0)
        return holds_until_next_goal(arm, last, next_start)

    wait_for(lambda: holds_after_the_last_step(arm.command_count()) >= 1,
             what="the hold after the burst")
    next_status, next_result = _settle(
        row, matrix_system, before, "after goal_burst", holds_after_the_last_step
    )
    assert row.observed == cell.expected, reasons
    _assert_row(row, next_status, next_result)


def test_a_node_shut_down_mid_goal_holds_the_arm_and_answers_the_goal(
    safety_ros_context: Any, tmp_path_factory: Any, matrix_gateway: Any
) -> None:
    (cell,) = [c for c in NODE_CELLS if c.name == "shutdown_mid_goal"]
    row = record(SIDE, cell, cell.expected)
    key_dir = tmp_path_factory.mktemp("key")
    with _active(safety_ros_context, matrix_gateway, key_dir, "safety_shutdown") as system:
        arm = system.arm
        before = _Before(arm)
        handle, _ = arm.send_goal(f"safety matrix {cell.name}", GOAL_GUARD_S)
        assert handle.accepted
        wait_first_step(arm, before.commands)
        assert arm.transition(Transition.TRANSITION_ACTIVE_SHUTDOWN)
        status, result = arm.result(handle)
        row.observed = result.reason
        wait_for(lambda: holds_until_next_goal(arm, before.commands, arm.command_count()),
                 what="the hold on shutdown")
        row.holds = holds_until_next_goal(arm, before.commands, arm.command_count())
        commands = arm.commands_since(before.commands)
        row.invalid_steps = (
            len(invalid_arm_commands([c.values for c in commands]))
            + len(jumps(commands, MAX_STEP, SAG))
        )
        assert arm.state() == "finalized"
        ignore = system.nodes.pool_prefixes()
        wait_for(lambda: not new_threads(before.threads, ignore)
                 and child_pids() <= before.children, what="the goal's threads to end")
        row.leaked = len(new_threads(before.threads, ignore)) + len(child_pids() - before.children)
    # A shut-down node runs nothing more: the next goal goes to a new node, same gateway.
    with _active(safety_ros_context, matrix_gateway, key_dir, "safety_restarted") as fresh:
        next_handle, _ = fresh.arm.send_goal(f"after {cell.name}", GOAL_GUARD_S,
                                             NEXT_GOAL_ACTIONS)
        next_status, next_result = fresh.arm.result(next_handle)
        row.next_run = next_result.reason

    assert status == GoalStatus.STATUS_ABORTED and result.stopped_early
    assert "node shut down" in result.message, result.message
    assert row.observed == cell.expected
    _assert_row(row, next_status, next_result)


def _zero_after_motion(velocities: list[tuple[float, ...]], start: int) -> int | None:
    """Index of the first zero command after the last moving one since ``start``."""
    moving = [i for i in range(start, len(velocities)) if any(velocities[i])]
    if not moving:
        return None
    return next((i for i in range(moving[-1] + 1, len(velocities))
                 if not any(velocities[i])), None)


# ----- lifecycle stops and configure -----


def test_deactivating_during_a_stalled_request_holds_and_returns(matrix_system: System) -> None:
    """A lifecycle stop must not wait for a request the service never answers."""
    gw, arm = matrix_system.gw, matrix_system.arm
    start = arm.command_count()
    handle, feedback = arm.send_goal("safety matrix deactivate", GOAL_GUARD_S)
    assert handle.accepted
    wait_first_step(arm, start)
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
    assert arm.commands_since(start)[-1].values == arm.holds(start)[-1].values
    assert arm.transition(Transition.TRANSITION_ACTIVATE)
    next_handle, _ = arm.send_goal("after deactivate", GOAL_GUARD_S, NEXT_GOAL_ACTIONS)
    assert arm.result(next_handle)[1].reason == "completed"


def test_cancelling_a_goal_whose_first_request_stalls(matrix_system: System) -> None:
    """Nothing has played yet; the cancel still ends the goal at once, held where the arm is."""
    gw, arm = matrix_system.gw, matrix_system.arm
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
    wait_for(lambda: hold_events(arm, start), what="the hold")
    # Commands first: a hold sent again meanwhile is in holds() taken after.
    commands = arm.commands_since(start)
    assert commands and all(c in arm.holds(start) for c in commands)


def test_configuring_against_a_dead_gateway_fails_and_can_retry(
    matrix_system: System, tmp_path: Any
) -> None:
    gw, nodes = matrix_system.gw, matrix_system.nodes
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
