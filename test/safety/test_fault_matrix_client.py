"""The fault matrix through ``Policy.run``: every cell ends as documented, holds once, acts on
nothing invalid, leaves no thread or process behind, and the same Policy runs fine afterwards.

``CELLS`` are shared with the node's matrix (the catalogue's rate and horizon and 429 among
them); ``CLIENT_CELLS`` are more faults the client itself refuses or bounds: other chunk fields
that disagree with the catalogue, an oversized body, a body trickled past ``timeout_s``."""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator
from typing import Any

import pytest
from support.gateway_fixture import run_gateway
from support.policy_support import Robot, open_policy
from support.safety_support import (
    CELLS,
    PATIENCE_S,
    Cell,
    child_pids,
    invalid_rows,
    new_threads,
    record,
)
from support.waiting import wait_for

from sequence_ai import InvalidResponse, Unavailable

SIDE = "client run()"
ACTION_DIM = 8
# Fast playback keeps each cell short; the runway is then 8 / 60 s.
CONTROL_HZ = 60.0
# Hang guards only: every cell ends long before these through its own fault.
MAX_ACTIONS = 600
MAX_SECONDS_GUARD = 60.0
# stall_forever and trickle must be ended by max_seconds, well after the first chunk played.
STALL_FOREVER_MAX_SECONDS = 1.5
# The trickle cell's whole-request deadline: short, so the cell is; far above a real request
# to the local gateway.
TRICKLE_TIMEOUT_S = 2.0
CLIENT_ONLY = "(client only)"


def _client_cell(name: str, fault: str, error: type[BaseException], kind: str,
                 **kwargs: Any) -> Cell:
    return Cell(name, fault, error, f"raised:{error.__name__}", CLIENT_ONLY,
                lambda gw: gw.inject(kind, **kwargs))


def _chunk_says(name: str, field: str, value: Any, catalogue: Any) -> Cell:
    return _client_cell(name, f"chunk says {field} {value!r} (catalogue {catalogue!r})",
                        InvalidResponse, "chunk_fields", fields={field: value})


# chunk_rate, rows_over_horizon and status_429 run on both sides (safety_support.CELLS).
CLIENT_CELLS: tuple[Cell, ...] = (
    _chunk_says("chunk_open_loop_horizon", "open_loop_horizon", 15, 8),
    _chunk_says("chunk_no_open_loop_horizon", "open_loop_horizon", None, 8),
    _chunk_says("chunk_action_space", "action_space", "joint_absolute", "joint_delta"),
    _chunk_says("chunk_action_dim", "action_dim", 7, 8),
    _client_cell("rows_huge", "20,000-row chunk, about 3 MB (body cap 2 MiB)",
                 InvalidResponse, "rows", rows=20_000),
    _client_cell("trickle", f"body sent a byte every 0.5 s (timeout_s {TRICKLE_TIMEOUT_S:g})",
                 Unavailable, "trickle", seconds=0.5),
    _client_cell("endless_headers", "a header line sent a byte every 0.05 s, never ended "
                 f"(timeout_s {TRICKLE_TIMEOUT_S:g})", Unavailable, "endless_headers"),
    _client_cell("interim", "102 Processing every 0.05 s, never a final answer "
                 f"(timeout_s {TRICKLE_TIMEOUT_S:g})", Unavailable, "interim"),
)
# Connection options a cell needs beyond the matrix's own: the whole-exchange deadline ends
# these cells.
CONNECT: dict[str, dict[str, float]] = {
    name: {"timeout_s": TRICKLE_TIMEOUT_S} for name in ("trickle", "endless_headers", "interim")
}


@pytest.fixture(scope="module")
def matrix_gateway() -> Iterator[Any]:
    with run_gateway() as handle:
        yield handle


def _ending(cell: Cell) -> dict[str, Any]:
    if cell.ends_at_deadline:
        return {"max_seconds": STALL_FOREVER_MAX_SECONDS}
    return {"max_seconds": MAX_SECONDS_GUARD}


def _fetches_since(before: list[threading.Thread]) -> list[threading.Thread]:
    return [t for t in new_threads(before) if t.name.startswith("sequence_ai-fetch")]


@pytest.mark.slow  # over half a second of wall time
@pytest.mark.parametrize("cell", CELLS, ids=[c.name for c in CELLS])
def test_client_fault_cell(matrix_gateway: Any, cell: Cell) -> None:
    run_cell(matrix_gateway, cell)


@pytest.mark.slow  # over half a second of wall time
@pytest.mark.parametrize("cell", CLIENT_CELLS, ids=[c.name for c in CLIENT_CELLS])
def test_client_only_fault_cell(matrix_gateway: Any, cell: Cell) -> None:
    run_cell(matrix_gateway, cell)


def run_cell(gw: Any, cell: Cell) -> None:
    """Run one cell's fault through ``Policy.run``, record its row, assert the row passes."""
    row = record(SIDE, cell, cell.client_reason)
    threads_before = threading.enumerate()
    children_before = child_pids()
    robot = Robot(instruction=f"safety matrix {cell.name}")
    lock = threading.Lock()

    def on_chunk(prediction: Any) -> None:
        robot.on_chunk(prediction)
        # The fault hits the request after the first chunk: the run is moving when it fails.
        with lock:
            if len(robot.chunks) == 1:
                cell.inject(gw)

    options = robot.callbacks()
    options["on_chunk"] = on_chunk
    if cell.name == "stall_runway":
        # Ends once the stalled chunk and the one after it arrived: the run survived the gap.
        options["until"] = lambda: len(robot.chunks) >= 3
    options.update(_ending(cell))

    error: BaseException | None = None
    recovered = False
    policy = open_policy(gw, control_hz=CONTROL_HZ, **CONNECT.get(cell.name, {}))
    try:
        try:
            outcome = policy.run(robot.observe, robot.act, max_actions=MAX_ACTIONS, **options)
        except Exception as exc:  # noqa: BLE001 - the class is what the cell checks
            error = exc
            outcome = getattr(exc, "outcome", None)
        row.observed = outcome.reason if outcome is not None else f"no outcome ({error!r})"
        row.holds = robot.holds
        row.invalid_steps = len(invalid_rows(robot.acts, ACTION_DIM))
        # A request the run abandoned ends by itself (its timeout is bounded by the run's).
        assert wait_for(lambda: not _fetches_since(threads_before), timeout_s=PATIENCE_S)
        cell.recover(gw)
        recovered = True

        next_robot = Robot(instruction=f"after {cell.name}")
        try:
            # After a mid-run warming the next run waits the load out before its first step.
            with pytest.warns(UserWarning, match="loading") if cell.name == "warming" else (
                contextlib.nullcontext()
            ):
                after = policy.run(next_robot.observe, next_robot.act, max_actions=16,
                                   **next_robot.callbacks())
            row.next_run = after.reason
        except Exception as exc:  # noqa: BLE001 - recorded, then asserted below
            row.next_run = f"raised:{type(exc).__name__}"
    finally:
        policy.close()
        if not recovered:
            # Leave the shared gateway usable for the other cells whatever failed here.
            cell.recover(gw)
    # A leak is recorded in the row below, not raised here.
    with contextlib.suppress(AssertionError):
        wait_for(lambda: not new_threads(threads_before) and child_pids() <= children_before)
    leaked = new_threads(threads_before)
    row.leaked = len(leaked) + len(child_pids() - children_before)

    if cell.error is None:
        assert error is None, repr(error)
    else:
        assert type(error) is cell.error, repr(error)
        assert outcome is not None and outcome.stopped_early
    assert row.observed == cell.client_reason
    assert row.holds == 1
    assert row.invalid_steps == 0 and robot.acts, robot.acts
    assert row.leaked == 0, leaked
    assert row.next_run == "completed"
    if cell.name == "stall_runway":
        assert outcome.underruns >= 1 and len(robot.chunks) >= 3
    if cell.name == "warming":
        assert error.warming and error.retry_after_s is not None
    if cell.name in ("status_503", "status_504", "reset", "killed"):
        # Only a warming 503 may be waited out; these say "stop".
        assert not error.warming


@pytest.mark.slow
def test_a_killed_gateway_process_leaves_nothing_behind() -> None:
    """The kill cell against a gateway in its own process: killed for real, then restarted."""
    children_before = child_pids()
    threads_before = threading.enumerate()
    with run_gateway(subprocess=True) as gw:
        assert len(child_pids() - children_before) == 1
        robot = Robot()

        def on_chunk(prediction: Any) -> None:
            robot.on_chunk(prediction)
            if len(robot.chunks) == 1:
                gw.kill()

        options = dict(robot.callbacks(), on_chunk=on_chunk)
        with open_policy(gw, control_hz=CONTROL_HZ) as policy:
            with pytest.raises(Unavailable) as raised:
                policy.run(robot.observe, robot.act, max_actions=MAX_ACTIONS,
                           max_seconds=MAX_SECONDS_GUARD, **options)
            assert raised.value.outcome.reason == "raised:Unavailable" and robot.holds == 1
            assert child_pids() <= children_before
            gw.restart()
            after = policy.run(robot.observe, robot.act, max_actions=16, **robot.callbacks())
            assert after.reason == "completed"
    assert wait_for(lambda: child_pids() <= children_before and not new_threads(threads_before))
