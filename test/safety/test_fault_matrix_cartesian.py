"""The fault matrix for an end-effector model through the node's `act` goal.

sim-stateless-ee-delta with config/sim-stateless-ee-delta.yaml: unitless TwistStamped to
Servo's `delta_twist_cmds`, the pose from `ee_pose`, a light Cartesian arm (support/ee_harness.py).
Each cell checks what the joint rows check: the ending, one hold (a zero twist; the same zero
sent again while idle counts once), no invalid command published (a twist not finite, outside
[-1, 1] or not in command_frame; a gripper value outside [0, 1]), nothing left running, and
that the next goal completes.
"""

from __future__ import annotations

import math
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest
from action_msgs.msg import GoalStatus
from rclpy.executors import SingleThreadedExecutor
from support.config_files import config_parameters
from support.ee_harness import BASE_FRAME, EeArm, Twist
from support.gateway_fixture import run_gateway
from support.node_harness import ArmHarness
from support.ros_support import NodeSystem, key_file_for
from support.safety_support import (
    CARTESIAN_CELLS,
    CARTESIAN_SHARED,
    CARTESIAN_SIDE,
    CELLS,
    Cell,
    MatrixRow,
    NodeCell,
    new_threads,
    record,
)
from support.waiting import wait_for

GOAL_GUARD_S = 60.0
DEADLINE_GOAL_S = 2.0
NEXT_GOAL_ACTIONS = 16


@dataclass
class EeSystem:
    gw: Any
    nodes: NodeSystem
    arm: ArmHarness
    ee: EeArm


def _parameters(base_url: str, key_file: str) -> dict[str, Any]:
    # As every node test's harness does: the shared machine may delay a frame.
    return config_parameters("sim-stateless-ee-delta", base_url=base_url, api_key_file=key_file,
                             max_image_age_s=1.0, max_pose_age_s=1.0)


@pytest.fixture(scope="module")
def ee_system(safety_ros_context: Any, tmp_path_factory: Any) -> Iterator[EeSystem]:
    with run_gateway() as gw:
        nodes = NodeSystem(safety_ros_context, "safety_ee")
        key_file = key_file_for(tmp_path_factory.mktemp("key"), gw.api_key)
        node, arm = nodes.start(**_parameters(gw.url, key_file))
        ee = EeArm(node.get_namespace(), safety_ros_context)
        executor = SingleThreadedExecutor(context=safety_ros_context)
        executor.add_node(ee)
        spinner = threading.Thread(target=executor.spin, name="safety-ee-arm", daemon=True)
        spinner.start()
        try:
            arm.configure_and_activate()
            yield EeSystem(gw, nodes, arm, ee)
        finally:
            nodes.close()
            executor.shutdown(timeout_sec=5.0)
            spinner.join(timeout=5.0)
            ee.destroy_node()


def _moving(twist: Twist) -> bool:
    return not twist.is_zero


def _invalid(ee: EeArm, start: int, gripper_start: int) -> int:
    bad = [
        t for t in ee.twists_seen()[start:]
        if t.frame_id != BASE_FRAME or t.stamp_s <= 0
        or not all(math.isfinite(v) and abs(v) <= 1.0 for v in t.values)
    ]
    grippers = [g for values in ee.gripper[gripper_start:] for g in values
                if not (math.isfinite(g) and 0.0 <= g <= 1.0)]
    return len(bad) + len(grippers)


def _holds(ee: EeArm, start: int, next_start: int) -> int:
    """Groups of zero twists from `start` up to the next goal's first moving twist."""
    twists = ee.twists_seen()
    stop = next((i for i in range(next_start, len(twists)) if _moving(twists[i])), len(twists))
    window = twists[start:stop]
    return sum(1 for i, t in enumerate(window) if t.is_zero and (i == 0 or _moving(window[i - 1])))


def _pose_fresh(arm: ArmHarness) -> bool:
    try:
        return float((arm.node_status() or {}).get("ee_pose_age_s", "")) < 0.5
    except ValueError:
        return False


def _moved(ee: EeArm, start: int) -> bool:
    return any(_moving(t) for t in ee.twists_seen()[start:])


def _settle(row: MatrixRow, system: EeSystem, start: int, gripper_start: int,
            threads: list[threading.Thread]) -> None:
    """Fill in the row from the twists since `start`, the threads and the next goal; assert it."""
    ee, arm = system.ee, system.arm
    row.invalid_steps = _invalid(ee, start, gripper_start)
    ignore = system.nodes.pool_prefixes()
    wait_for(lambda: not new_threads(threads, ignore), what="threads of the goal to end")
    row.leaked = len(new_threads(threads, ignore))
    next_start = len(ee.twists_seen())
    handle, _ = arm.send_goal("push the block left again", GOAL_GUARD_S, NEXT_GOAL_ACTIONS)
    status, result = arm.result(handle)
    row.next_run = result.reason
    row.holds = _holds(ee, start, next_start)
    assert row.observed == row.expected, result.message
    assert row.holds == row.expected_holds and row.invalid_steps == 0 and row.leaked == 0
    assert status == GoalStatus.STATUS_SUCCEEDED and result.actions == NEXT_GOAL_ACTIONS


def _goal(system: EeSystem, cell: Cell | NodeCell, max_seconds: float) -> tuple[Any, int, int]:
    """A goal that has moved the arm: (its handle, the twist and gripper counts before it)."""
    ee = system.ee
    start, gripper_start = len(ee.twists_seen()), len(ee.gripper)
    handle, _ = system.arm.send_goal(f"ee matrix {cell.name}", max_seconds)
    assert handle.accepted
    wait_for(lambda: _moved(ee, start), what="the goal's first twist")
    return handle, start, gripper_start


@pytest.mark.parametrize("cell", [c for c in CELLS if c.name in CARTESIAN_SHARED],
                         ids=lambda c: c.name)
def test_ee_fault_cell(ee_system: EeSystem, cell: Cell) -> None:
    row = record(CARTESIAN_SIDE, cell, cell.node_reason)
    threads = threading.enumerate()
    max_seconds = DEADLINE_GOAL_S if cell.ends_at_deadline else GOAL_GUARD_S
    try:
        handle, start, gripper_start = _goal(ee_system, cell, max_seconds)
        cell.inject(ee_system.gw)
        status, result = ee_system.arm.result(handle)
    finally:
        cell.recover(ee_system.gw)
    row.observed = result.reason
    wait_for(lambda: ee_system.ee.twists_seen()[-1].is_zero, what="the zero twist")
    assert status == (GoalStatus.STATUS_SUCCEEDED if cell.error is None
                      else GoalStatus.STATUS_ABORTED), result.message
    _settle(row, ee_system, start, gripper_start, threads)


@pytest.mark.parametrize("cell", CARTESIAN_CELLS, ids=lambda c: c.name)
def test_ee_node_cell(ee_system: EeSystem, cell: NodeCell) -> None:
    ee, arm = ee_system.ee, ee_system.arm
    row = record(CARTESIAN_SIDE, cell, cell.expected)
    threads = threading.enumerate()
    handle, start, gripper_start = _goal(ee_system, cell, GOAL_GUARD_S)
    if cell.name == "pose_stops":
        ee.publish_pose = False
        try:
            status, result = arm.result(handle)
        finally:
            ee.publish_pose = True
        assert "ee_pose" in result.message and "max_pose_age_s" in result.message
        wait_for(lambda: _pose_fresh(arm), what="/diagnostics showing a fresh pose again")
    elif cell.name == "canceled":
        handle.cancel()
        status, result = arm.result(handle)
        assert status == GoalStatus.STATUS_CANCELED
    else:  # preempted: the next goal of _settle takes over at once
        newer, _ = arm.send_goal("ee matrix newer goal", GOAL_GUARD_S, NEXT_GOAL_ACTIONS)
        status, result = arm.result(handle)
        arm.result(newer)
    row.observed = result.reason
    wait_for(lambda: ee.twists_seen()[-1].is_zero, what="the zero twist")
    _settle(row, ee_system, start, gripper_start, threads)
