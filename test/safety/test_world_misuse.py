"""Reliability round 5 in the simulated world (issue 41 items 1, 2 and 9), each a row of the
fault matrix: perturbations off the table refused, an unstable physics step a fault of the trial
with the arm held (never MuJoCo's reset), a cup only high no success, pending perturbations
bounded. The world is stepped without ROS."""

from __future__ import annotations

import threading
from collections.abc import Iterator

import numpy as np
import pytest
from support.safety_support import (
    WORLD_CELLS,
    WORLD_SIDE,
    MatrixRow,
    new_threads,
    record,
)

pytest.importorskip("mujoco")

from sequence_ai_lab.robots.sim_robot.world import MAX_PENDING, World, WorldOptions  # noqa: E402

MAX_STEP_RAD = 0.25  # the node's default max_step
SAMPLE_S = 0.01


@pytest.fixture(scope="module")
def world() -> Iterator[World]:
    yield World(WorldOptions(layout_seed=5))


def _row(name: str) -> MatrixRow:
    (cell,) = [c for c in WORLD_CELLS if c.name == name]
    return record(WORLD_SIDE, cell, cell.expected)


def _jumps(world: World, seconds: float) -> int:
    """Samples (every 10 ms, no command sent) where a joint moved more than max_step."""
    count, last = 0, world.q
    for _ in range(round(seconds / SAMPLE_S)):
        world.advance(SAMPLE_S)
        count += int(np.max(np.abs(world.q - last)) > MAX_STEP_RAD)
        last = world.q
    return count


def _next_trial(world: World) -> str:
    trial = world.trial
    world.reset()
    world.advance(0.2)
    state = world.state()
    sound = state.trial == trial + 1 and not state.fault and state.quantities["fault"] == 0.0
    return "trial ran" if sound else f"trial {state.trial}, fault {state.fault!r}"


def test_perturbations_off_the_table_are_refused_naming_the_bound(world: World) -> None:
    row = _row("perturb_far")
    world.reset()
    threads = threading.enumerate()
    said = []
    for offset in ((2.0e10, 0.0, 0.0), (0.0, 0.0, 10.0)):
        try:
            said.append(f"accepted: {world.perturb('cup', np.array(offset), 0.0)}")
        except ValueError as err:
            said.append(str(err))
    named = "table's workspace, x in [0.2, 0.9] m" in said[0] and "expected 0 to 0.1 m" in said[1]
    row.observed = "both refused naming the bound" if named else "; ".join(said)
    row.holds = 0  # nothing was commanded and nothing faulted
    row.invalid_steps = _jumps(world, 0.3)
    row.leaked = len(new_threads(threads))
    row.next_run = _next_trial(world)
    assert row.verdict == "pass", row


def test_an_unstable_step_is_a_fault_of_the_trial_with_the_arm_held(world: World) -> None:
    row = _row("unstable_step")
    world.reset()
    world.advance(0.1)
    threads = threading.enumerate()
    held = world.q
    physics = world.physics
    assert physics is not None
    physics.data.qpos[physics.index.cup_qpos] = 2.0e10
    row.invalid_steps = _jumps(world, 0.3)
    state = world.state()
    faulted = "unstable" in state.fault and state.quantities["fault"] == 1.0
    still = "trial fault on ~/task_state; the world stood still"
    row.observed = still if faulted else f"fault {state.fault!r}"
    row.holds = int(np.max(np.abs(world.q - held)) < 1e-3)
    row.leaked = len(new_threads(threads))
    row.next_run = _next_trial(world)
    assert row.verdict == "pass", row


def test_a_cup_only_high_is_no_success(world: World) -> None:
    row = _row("lift_only")
    world.reset()
    threads = threading.enumerate()
    physics = world.physics
    assert physics is not None
    physics.data.qpos[physics.index.cup_qpos + 2] = 10.0
    row.invalid_steps = _jumps(world, 1.2)
    state = world.state()
    row.observed = "no success while it fell" if not state.success else (
        f"success at {state.success_s:.2f} s"
    )
    row.holds = 0
    row.leaked = len(new_threads(threads))
    row.next_run = _next_trial(world)
    assert row.verdict == "pass", row


def test_pending_perturbations_are_bounded(world: World) -> None:
    row = _row("pending_flood")
    world.reset()
    threads = threading.enumerate()
    for k in range(MAX_PENDING):
        world.perturb("block", np.array([0.0, 0.0, 0.0]), 50.0 + k)
    try:
        world.perturb("block", np.array([0.0, 0.0, 0.0]), 60.0)
        row.observed = f"the {MAX_PENDING + 1}st accepted"
    except ValueError as err:
        row.observed = (
            f"the {MAX_PENDING + 1}st refused naming {MAX_PENDING}"
            if f"at most {MAX_PENDING}" in str(err)
            else str(err)
        )
    row.holds = 0
    row.invalid_steps = _jumps(world, 0.1)
    row.leaked = len(new_threads(threads))
    row.next_run = _next_trial(world)
    assert row.verdict == "pass", row
