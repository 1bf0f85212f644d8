"""The fault matrix for the end-effector models through the node's `act` goal.

Each space runs its catalogue model with its own config/ file against a light Cartesian arm
(support/ee_harness.py), the pose from `ee_pose`:

- ee_delta: sim-stateless-ee-delta, unitless TwistStamped to Servo's `delta_twist_cmds`; a hold
  is a zero twist, an invalid command a twist not finite, outside [-1, 1] or not in
  command_frame.
- ee_absolute: sim-ee-absolute-reach, PoseStamped targets to a Cartesian controller; the arm
  settles a little below each target, so a hold (the measured pose) differs from every policy
  target; an invalid command a target not finite, outside the workspace box or not in
  command_frame. In `pose_stops` the arm's driver hangs (no pose, no motion).

In `pose_stops` that goal's max_pose_age_s is 0.1 s (the fixture's is 1 s).

Each cell checks what the joint rows check: the ending, one hold (the same hold sent again
while idle counts once), no invalid command published (nor a gripper value outside [0, 1]),
nothing left running, and that the next goal completes.
"""

from __future__ import annotations

import math
import threading
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from functools import cached_property
from typing import Any

import pytest
from action_msgs.msg import GoalStatus
from rclpy.executors import SingleThreadedExecutor
from support.config_files import config_parameters
from support.ee_harness import BASE_FRAME, EeArm, Target, Twist
from support.gateway_fixture import run_gateway
from support.node_harness import ArmHarness
from support.ros_support import NodeSystem, key_file_for
from support.safety_support import (
    CARTESIAN_CELLS,
    CARTESIAN_SHARED,
    CARTESIAN_SIDES,
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
# ee_absolute: how far below a target the test arm settles (the model steps 0.02 m).
SAG_M = 0.004

Command = Twist | Target


@dataclass(frozen=True)
class Space:
    """How one end-effector space's commands are told apart at the test arm."""

    name: str
    config: str

    @cached_property
    def workspace(self) -> tuple[list[float], list[float]]:
        """The box its config/ file commands the end effector within."""
        values = config_parameters(self.config)
        return values["workspace_min"], values["workspace_max"]

    @property
    def side(self) -> str:
        return CARTESIAN_SIDES[self.name]

    def commands(self, ee: EeArm) -> Sequence[Command]:
        return ee.twists_seen() if self.name == "ee_delta" else ee.targets_seen()

    def holds(self, ee: EeArm, commands: Sequence[Command]) -> list[bool]:
        """Which commands are holds: a zero twist; a pose target at a pose the arm settled at,
        or — only in the trailing run, where a goal's stop is — the last target sent again (the
        hold where no fresh pose is; earlier, a policy standing at its target repeats too)."""
        if self.name == "ee_delta":
            return [isinstance(c, Twist) and c.is_zero for c in commands]
        held = [isinstance(c, Target) and ee.is_hold(c) for c in commands]
        i = len(commands) - 1
        while i > 0 and (held[i] or commands[i].vector == commands[i - 1].vector):
            held[i] = True
            i -= 1
        return held

    def is_invalid(self, command: Command) -> bool:
        if command.frame_id != BASE_FRAME:
            return True
        if isinstance(command, Twist):
            return command.stamp_s <= 0 or not all(
                math.isfinite(v) and abs(v) <= 1.0 for v in command.values
            )
        lo, hi = self.workspace
        xyz = command.vector[:3]
        return not all(math.isfinite(v) for v in command.vector) or not all(
            a <= v <= b for v, a, b in zip(xyz, lo, hi)
        )


SPACES = (
    Space("ee_delta", "sim-stateless-ee-delta"),
    Space("ee_absolute", "sim-ee-absolute-reach"),
)


@dataclass
class EeSystem:
    space: Space
    gw: Any
    nodes: NodeSystem
    arm: ArmHarness
    ee: EeArm

    def commands(self) -> Sequence[Command]:
        return self.space.commands(self.ee)

    def holds(self) -> list[bool]:
        return self.space.holds(self.ee, self.commands())


def _parameters(space: Space, base_url: str, key_file: str) -> dict[str, Any]:
    # As every node test's harness does: the shared machine may delay a frame.
    return config_parameters(space.config, base_url=base_url, api_key_file=key_file,
                             max_image_age_s=1.0, max_pose_age_s=1.0, max_state_age_s=1.0)


@pytest.fixture(scope="module", params=SPACES, ids=lambda s: s.name)
def ee_system(
    request: pytest.FixtureRequest, safety_ros_context: Any, tmp_path_factory: Any
) -> Iterator[EeSystem]:
    space: Space = request.param
    with run_gateway() as gw:
        nodes = NodeSystem(safety_ros_context, f"safety_{space.name}")
        key_file = key_file_for(tmp_path_factory.mktemp("key"), gw.api_key)
        node, arm = nodes.start(**_parameters(space, gw.url, key_file))
        ee = EeArm(node.get_namespace(), safety_ros_context,
                   sag_m=SAG_M if space.name == "ee_absolute" else 0.0)
        executor = SingleThreadedExecutor(context=safety_ros_context)
        executor.add_node(ee)
        spinner = threading.Thread(target=executor.spin, name="safety-ee-arm", daemon=True)
        spinner.start()
        try:
            arm.configure_and_activate()
            yield EeSystem(space, gw, nodes, arm, ee)
        finally:
            nodes.close()
            executor.shutdown(timeout_sec=5.0)
            spinner.join(timeout=5.0)
            ee.destroy_node()


def _invalid(system: EeSystem, start: int, gripper_start: int) -> int:
    bad = [c for c in system.commands()[start:] if system.space.is_invalid(c)]
    grippers = [g for values in system.ee.gripper[gripper_start:] for g in values
                if not (math.isfinite(g) and 0.0 <= g <= 1.0)]
    return len(bad) + len(grippers)


def _holds(system: EeSystem, starts: Sequence[int], next_start: int) -> int:
    """The goals sent at command counts `starts` that ended held: each goal's commands run from
    its first moving one to the next goal's, and end in a hold. A velocity arm's zero twists
    while it waits for a late chunk come before its motion resumes: they are not its stop."""
    held = system.space.holds(system.ee, system.commands()[:next_start])

    def next_index(start: int, hold: bool) -> int:
        return next((i for i in range(start, len(held)) if held[i] == hold), len(held))

    # A goal goes on stepping until the newer one sent at `start` preempts it: the newer
    # goal's commands begin after the first hold from there, not at `start`.
    firsts = [next_index(starts[0], False),
              *(next_index(next_index(s, True), False) for s in starts[1:])]
    ends = [*firsts[1:], len(held)]
    return sum(1 for first, end in zip(firsts, ends) if end > first and held[end - 1])


def _held(system: EeSystem) -> bool:
    held = system.holds()
    return bool(held) and held[-1]


def _pose_fresh(arm: ArmHarness) -> bool:
    try:
        return float((arm.node_status() or {}).get("ee_pose_age_s", "")) < 0.5
    except ValueError:
        return False


def _moved(system: EeSystem, start: int) -> bool:
    return not all(system.holds()[start:])


def _settle(row: MatrixRow, system: EeSystem, starts: Sequence[int], gripper_start: int,
            threads: list[threading.Thread]) -> None:
    """Fill in the row from the commands of the goals sent at `starts`, the threads and the
    next goal; assert it."""
    arm = system.arm
    row.invalid_steps = _invalid(system, starts[0], gripper_start)
    ignore = system.nodes.pool_prefixes()
    wait_for(lambda: not new_threads(threads, ignore), what="threads of the goal to end")
    row.leaked = len(new_threads(threads, ignore))
    next_start = len(system.commands())
    handle, _ = arm.send_goal("push the block left again", GOAL_GUARD_S, NEXT_GOAL_ACTIONS)
    status, result = arm.result(handle)
    row.next_run = result.reason
    row.holds = _holds(system, starts, next_start)
    assert row.observed == row.expected, result.message
    assert row.holds == row.expected_holds and row.invalid_steps == 0 and row.leaked == 0
    assert status == GoalStatus.STATUS_SUCCEEDED and result.actions == NEXT_GOAL_ACTIONS, (
        result.message
    )


def _goal(system: EeSystem, cell: Cell | NodeCell, max_seconds: float) -> tuple[Any, int, int]:
    """A goal that has moved the arm: (its handle, the command and gripper counts before it)."""
    start, gripper_start = len(system.commands()), len(system.ee.gripper)
    handle, _ = system.arm.send_goal(f"ee matrix {cell.name}", max_seconds)
    assert handle.accepted
    wait_for(lambda: _moved(system, start), what="the goal's first moving command")
    return handle, start, gripper_start


@pytest.mark.parametrize("cell", [c for c in CELLS if c.name in CARTESIAN_SHARED],
                         ids=lambda c: c.name)
def test_ee_fault_cell(ee_system: EeSystem, cell: Cell) -> None:
    row = record(ee_system.space.side, cell, cell.node_reason)
    threads = threading.enumerate()
    max_seconds = DEADLINE_GOAL_S if cell.ends_at_deadline else GOAL_GUARD_S
    try:
        handle, start, gripper_start = _goal(ee_system, cell, max_seconds)
        cell.inject(ee_system.gw)
        status, result = ee_system.arm.result(handle)
    finally:
        cell.recover(ee_system.gw)
    row.observed = result.reason
    wait_for(lambda: _held(ee_system), what="the hold")
    assert status == (GoalStatus.STATUS_SUCCEEDED if cell.error is None
                      else GoalStatus.STATUS_ABORTED), result.message
    _settle(row, ee_system, [start], gripper_start, threads)


@pytest.mark.parametrize("cell", CARTESIAN_CELLS, ids=lambda c: c.name)
def test_ee_node_cell(ee_system: EeSystem, cell: NodeCell) -> None:
    ee, arm = ee_system.ee, ee_system.arm
    row = record(ee_system.space.side, cell, cell.expected)
    threads = threading.enumerate()
    if cell.name == "pose_stops":
        # The goal runs on the last pose seen until it is max_pose_age_s old: the fixture's
        # 1 s would let a step after a wait for a late chunk be checked against a pose the
        # targets have left behind (validate, not stale_input). This goal's is 0.1 s.
        assert all(r.successful for r in arm.set_parameters(max_pose_age_s=0.1))
    handle, start, gripper_start = _goal(ee_system, cell, GOAL_GUARD_S)
    starts = [start]
    if cell.name == "pose_stops":
        # A pose target's arm hangs with its driver (no pose, no motion); a twist's goes on.
        ee.publish_pose = False
        ee.follow = ee_system.space.name == "ee_delta"
        try:
            status, result = arm.result(handle)
        finally:
            ee.publish_pose = ee.follow = True
            arm.set_parameters(max_pose_age_s=1.0)
        assert "ee_pose" in result.message and "max_pose_age_s" in result.message
        wait_for(lambda: _pose_fresh(arm), what="/diagnostics showing a fresh pose again")
    elif cell.name == "canceled":
        handle.cancel()
        status, result = arm.result(handle)
        assert status == GoalStatus.STATUS_CANCELED
    else:  # preempted: a newer goal takes over at once and completes
        starts.append(len(ee_system.commands()))
        newer, _ = arm.send_goal("ee matrix newer goal", GOAL_GUARD_S, NEXT_GOAL_ACTIONS)
        status, result = arm.result(handle)
        newer_status, newer_result = arm.result(newer)
        assert newer_status == GoalStatus.STATUS_SUCCEEDED, newer_result.message
    row.observed = result.reason
    wait_for(lambda: _held(ee_system), what="the hold")
    _settle(row, ee_system, starts, gripper_start, threads)
