"""Shared pieces of the safety suite: the fault cells, leak checks and the matrix record.

The client and node helpers (``support.policy_support``, ``support.node_harness``) are imported,
not copied; what lives here is only what both fault matrices and the churn tests share.
"""

from __future__ import annotations

import math
import os
import threading
from collections.abc import Callable, Iterable, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from sequence_ai import (
    AuthError,
    InvalidResponse,
    OutOfCredit,
    RateLimited,
    SequencesError,
    Unavailable,
)
from sequence_ai_gateway.models.catalogue import PANDA_LOWER, PANDA_UPPER

# Generous bound for waiting on a condition: a hang guard, never a measurement.
PATIENCE_S = 30.0
# Longer than a whole pi05 chunk at either rate the matrices play (15 rows: 1.0 s at 15 Hz):
# the loop plays rows past the open-loop horizon while it waits, and after a slow first request
# the next one is sent as its chunk is installed, so at 1.0 s the stall could end just in time.
STALL_BEYOND_RUNWAY_S = 1.5
# A body sent one byte per this many seconds never completes within a cell's run.
TRICKLE_BYTE_S = 0.5
# The stacked_encoding cell's decoded size: far past the body cap, small enough that a client
# without a decode cap survives to fail the cell.
BOMB_BYTES = 256 << 20
# Threads the test process runs for the in-process gateway (server loop and its executor).
GATEWAY_THREAD_PREFIXES = ("gateway:", "asyncio_")


@dataclass(frozen=True)
class Cell:
    """One row of the fault matrix: how the fault is caused and what each side must report."""

    name: str
    fault: str
    error: type[BaseException] | None
    client_reason: str
    node_reason: str
    inject: Callable[[Any], None]
    recover: Callable[[Any], None] = field(default=lambda gw: gw.clear_faults())
    # The fault never lets the run end by itself: it is given a short max_seconds.
    ends_at_deadline: bool = False


def _status(code: int) -> Callable[[Any], None]:
    return lambda gw: gw.inject("status", status=code)


def _fault(kind: str, **kwargs: Any) -> Callable[[Any], None]:
    return lambda gw: gw.inject(kind, **kwargs)


def _restart(gw: Any) -> None:
    gw.restart()
    gw.clear_faults()


def _raised(error: type[BaseException]) -> str:
    return f"raised:{error.__name__}"


CELLS: tuple[Cell, ...] = (
    Cell("stall_runway", f"request stalls {STALL_BEYOND_RUNWAY_S:g} s (> runway)", None,
         "until", "completed",
         _fault("stall", seconds=STALL_BEYOND_RUNWAY_S)),
    Cell("stall_forever", "request stalls until cleared", None, "timeout", "timeout",
         _fault("stall", seconds=None), ends_at_deadline=True),
    Cell("reset", "connection reset mid-response", Unavailable,
         _raised(Unavailable), _raised(Unavailable), _fault("reset")),
    Cell("status_500", "HTTP 500", SequencesError,
         _raised(SequencesError), _raised(SequencesError), _status(500)),
    Cell("status_503", "HTTP 503, plain detail", Unavailable,
         _raised(Unavailable), _raised(Unavailable), _status(503)),
    Cell("status_504", "HTTP 504", Unavailable,
         _raised(Unavailable), _raised(Unavailable), _status(504)),
    Cell("warming", "model goes cold mid-run (503 warming_up)", Unavailable,
         _raised(Unavailable), _raised(Unavailable), _fault("warming", seconds=1.0)),
    Cell("malformed", "200 with invalid JSON", InvalidResponse,
         _raised(InvalidResponse), _raised(InvalidResponse), _fault("malformed")),
    Cell("nan", "NaN in a step", InvalidResponse,
         _raised(InvalidResponse), _raised(InvalidResponse), _fault("nan")),
    Cell("inf", "inf in a step", InvalidResponse,
         _raised(InvalidResponse), _raised(InvalidResponse), _fault("inf")),
    Cell("wrong_dim", "steps one wider than action_dim", InvalidResponse,
         _raised(InvalidResponse), _raised(InvalidResponse), _fault("wrong_dim")),
    Cell("empty", "zero steps", InvalidResponse,
         _raised(InvalidResponse), _raised(InvalidResponse), _fault("empty")),
    Cell("status_401", "HTTP 401 mid-run", AuthError,
         _raised(AuthError), _raised(AuthError), _status(401)),
    Cell("status_402", "HTTP 402 mid-run", OutOfCredit,
         _raised(OutOfCredit), _raised(OutOfCredit), _status(402)),
    Cell("status_429", "HTTP 429 mid-run, Retry-After 1 s", RateLimited,
         _raised(RateLimited), _raised(RateLimited), _fault("status", status=429, seconds=1.0)),
    # The catalogue sets the rate and the horizon, whatever a chunk says (pi05-droid: 15 Hz,
    # action_horizon 15).
    Cell("chunk_rate", "chunk says control_frequency_hz 1000.0 (catalogue 15.0)",
         InvalidResponse, _raised(InvalidResponse), _raised(InvalidResponse),
         _fault("chunk_fields", fields={"control_frequency_hz": 1000.0})),
    Cell("rows_over_horizon", "16-row chunk (catalogue action_horizon 15)", InvalidResponse,
         _raised(InvalidResponse), _raised(InvalidResponse), _fault("rows", rows=16)),
    Cell("killed", "gateway killed mid-run, then restarted", Unavailable,
         _raised(Unavailable), _raised(Unavailable), lambda gw: gw.kill(), _restart),
    Cell("stacked_encoding", f"Content-Encoding gzip x3 of {BOMB_BYTES >> 20} MiB of zeros",
         InvalidResponse, _raised(InvalidResponse), _raised(InvalidResponse),
         _fault("stacked_encoding", fields={"decoded_bytes": BOMB_BYTES})),
    Cell("wrong_model", "answer names another model", InvalidResponse,
         _raised(InvalidResponse), _raised(InvalidResponse), _fault("wrong_model")),
    Cell("huge_int", "a step value of 10**400", InvalidResponse,
         _raised(InvalidResponse), _raised(InvalidResponse), _fault("huge_int")),
)
NODE_ONLY = "(node only)"
# Gateway faults only the node's matrix runs: the client's has its own version of each
# (trickle: a Transport whose short timeout_s ends the request; a node's connection keeps the
# default, so its goal is ended by max_seconds and the request must not outlive it).
NODE_FAULT_CELLS: tuple[Cell, ...] = (
    Cell("trickle", f"body sent one byte every {TRICKLE_BYTE_S:g} s (goal max_seconds 2)", None,
         NODE_ONLY, "timeout", _fault("trickle", seconds=TRICKLE_BYTE_S),
         ends_at_deadline=True),
    # The goal ends by max_seconds; its request (default timeout) is abandoned with it.
    Cell("endless_headers", "a header line sent a byte every 0.05 s, never ended "
         "(goal max_seconds 2)", None, NODE_ONLY, "timeout", _fault("endless_headers"),
         ends_at_deadline=True),
    Cell("interim", "102 Processing every 0.05 s, never a final answer (goal max_seconds 2)",
         None, NODE_ONLY, "timeout", _fault("interim"), ends_at_deadline=True),
)


@dataclass(frozen=True)
class NodeCell:
    """A row of the matrix only the node has: a sensor, the arm or a second goal misbehaves.

    ``holds`` is how many hold commands the row expects: 0 where no command is provably still
    (no fresh joint state), 2 where two goals end.
    """

    name: str
    fault: str
    expected: str
    holds: int = 1
    # What the run after the fault must end in: a goal's reason, or a tool's or a call's answer.
    next_expected: str = "completed"


NODE_CELLS: tuple[NodeCell, ...] = (
    NodeCell("arm_moved_first_request", "arm pushed 0.6 rad while the first request stalls",
             "validate"),
    NodeCell("arm_moved_in_underrun", "arm pushed 0.6 rad during an underrun", "validate"),
    NodeCell("stale_joints_at_start", "joint_states stop and the arm moves 1 rad, then a goal",
             "stale_input", holds=0),
    NodeCell("joints_stop_mid_chunk", "joint_states stop while a 32-row chunk plays",
             "stale_input"),
    NodeCell("camera_dies_mid_chunk", "a camera stops while a 32-row chunk plays",
             "stale_input"),
    NodeCell("goal_burst", "50 goals in one second, every result asked for at once",
             "49 preempted, then completed"),
    NodeCell("shutdown_mid_goal", "lifecycle shutdown while a goal moves the arm; the next "
             "goal goes to a new node", "interrupted"),
    NodeCell("disabled_mid_goal", "~/enable false while a goal moves the arm", "disabled"),
    NodeCell("deadman_lapses", "the enable heartbeat stops while a goal moves the arm",
             "deadman"),
    NodeCell("joint_too_fast", "a joint's max_velocity (0.5 rad/s) below the policy's steps, "
             "all within max_step", "validate"),
    NodeCell("velocity_preempted", "velocity arm, hold_between_goals false: goal preempted, the "
             "new goal cancelled in its first request", "preempted, then interrupted", holds=2),
)

# The node's rows outside a goal's run: its lifecycle and what reaches it before a goal moves.
# Holds count the hold commands of the cell's goal (0 where no goal may move the arm: nothing
# at all may be published while the fault lasts).
LIFECYCLE_SIDE = "node lifecycle"
LIFECYCLE_CELLS: tuple[NodeCell, ...] = (
    NodeCell("catalogue_rate", "catalogue says control_hz 1000 (max_control_hz 50)",
             "configure failed naming 1000 Hz and max_control_hz 50 Hz", holds=0),
    NodeCell("readiness_silent", "readiness check never answers; 3 activate/deactivate cycles",
             "WARN timed out; no readiness thread left", holds=0),
    NodeCell("bad_transition", "cleanup, id 99 and configure sent to the node while a goal "
             "runs", "3 refused; goal completed", holds=1),
    NodeCell("long_instruction", "a 64 000-character goal, then one of invisible characters",
             "2 rejected; neither logged whole", holds=0),
    NodeCell("two_line_key", "API key file of two lines", "configure failed; the key nowhere",
             holds=0),
    NodeCell("catalogue_silent", "catalogue never answers (the node's own process): get_state "
             "and SIGTERM while configure waits", "configure failed within configure_timeout_s; "
             "get_state answered configuring; exit 0", holds=0),
    NodeCell("planner_killed", "the VLM planner process gets SIGTERM while its step's goal "
             "moves the arm", "goal canceled and held before the planner's exit 0"),
)

# The node's guards against what a file, a late hand-over, a dry run or a vanished client may do
# (issue 33): ~/enable, cancel and the lifecycle stay answered, nothing moves that should not.
# Holds count the cell's goals' holds (0: nothing at all may reach the arm during the fault).
GUARD_SIDE = "node guards"
GUARD_CELLS: tuple[NodeCell, ...] = (
    NodeCell("limits_fifo", "joint_limits_file replaced by a FIFO while a goal runs, then the "
             "parameter set to a FIFO", "~/enable and cancel answered; FIFO refused; limits "
             "kept", holds=2),
    NodeCell("limits_alias_bomb", "joint_limits_file of nested YAML aliases (under 1 kB, "
             "9^9 mappings to walk) at configure", "configure failed naming the alias", holds=0),
    NodeCell("limits_recursive_edit", "joint_limits_file edited into self-referencing YAML on "
             "an active node", "node alive; old limits kept (goal validate on them)"),
    NodeCell("limits_min_over_max", "joint_limits_file with min_position 2.0 above "
             "max_position 1.0 (has_position_limits false) at configure",
             "configure failed naming joint, field and value", holds=0),
    NodeCell("late_handover", "a hand-over that finds the running goal's run ended",
             "handed_over; the new goal ran afresh", holds=2),
    NodeCell("dry_run_idle", "dry_run set true on an idle node that republishes its hold",
             "nothing on the command topics", holds=0),
    NodeCell("client_vanished", "the action client destroyed while its goal moves the arm "
             "(end_goal_without_client_s 0.5)", "goal ended held"),
)

# The rows of an end-effector model (sim-stateless-ee-delta: unitless twists to Servo): the
# shared cells whose fault is not about pi05-droid's rate, horizon or runway, and these. A hold
# is a zero twist; a preempted goal's and its successor's make two.
# The end-effector spaces' sides (test_fault_matrix_cartesian.py), each the shared cells and
# its own.
CARTESIAN_SIDES = {"ee_delta": "node ee_delta goal", "ee_absolute": "node ee_absolute goal"}
CARTESIAN_SHARED = ("stall_forever", "reset", "status_500", "status_503", "malformed", "nan",
                    "inf", "wrong_dim", "empty", "status_401", "wrong_model", "huge_int")
CARTESIAN_CELLS: tuple[NodeCell, ...] = (
    NodeCell("pose_stops", "ee_pose stops while commands play", "stale_input"),
    NodeCell("canceled", "cancel while commands play", "interrupted"),
    NodeCell("preempted", "a new goal while commands play; it completes", "preempted",
             holds=2),
)


# Issue 33's rows of what lies beside the arm: the files a recording leaves, what the episode
# tools make of a damaged file, what the gateway's training API accepts. A tool or an API call
# commands nothing (0 holds); the run after the fault is the same tool on a good episode
# ("exit 0") or a well-formed submit ("accepted").
FILES_SIDE = "recording and files"
FILES_CELLS: tuple[NodeCell, ...] = (
    NodeCell("foreign_mcap_pruned", "a user's 0000_my_precious_bag.mcap (1.2 MB) and two "
             "0.6 MB episodes in record_dir, record_max_mb 1.0; a goal is recorded",
             "user's file intact; 1 own episode pruned"),
    NodeCell("killed_recording", "a recording SIGKILLed mid-goal (no summary); a recorder "
             "starts on its folder", "repaired at start; opens in mcap and rosbags", holds=0,
             next_expected="exit 0"),
    NodeCell("unreadable_entries", "show, plot and list on a magic-only file, a corrupted "
             "chunk, zero bytes, a text file, a directory and a FIFO named *.mcap, a missing "
             "path", "one stderr line naming each, exit 1, no traceback", holds=0,
             next_expected="exit 0"),
)
TRAINING_SIDE = "gateway training API"
TRAINING_CELLS: tuple[NodeCell, ...] = (
    NodeCell("dataset_uri_1_9_mb", "100 submits with a 1.9 MB dataset URI",
             "100 x 422 naming dataset; 0 jobs kept", holds=0, next_expected="accepted"),
    NodeCell("base_model_300_chars", "a submit whose base_model is 326 characters",
             "422 naming base_model", holds=0, next_expected="accepted"),
    NodeCell("job_flood", "one submit past the key's 500 queued or running jobs",
             "429 naming the bound", holds=0, next_expected="accepted"),
    NodeCell("fifo_info_json", "a file:// dataset whose meta/info.json is a FIFO",
             "422 naming meta/info.json; /v1/health answered", holds=0,
             next_expected="accepted"),
    NodeCell("info_json_over_1_mb", "a file:// dataset whose meta/info.json is 1 MB + 1 byte",
             "422 naming meta/info.json and the bound", holds=0, next_expected="accepted"),
)

# Issue 41's rows of the simulated world under misuse (test_world_misuse.py, the world stepped
# without ROS): an invalid step is a joint moving more than max_step (0.25 rad) between two 10 ms
# samples with no command; a hold is the world standing still after its trial's fault; the run
# after the fault is the next trial ("trial ran": reset, no fault, judged).
WORLD_SIDE = "simulated world"
WORLD_CELLS: tuple[NodeCell, ...] = (
    NodeCell("perturb_far", "~/perturb of the cup by (2e10, 0, 0) m, then by (0, 0, 10) m",
             "both refused naming the bound", holds=0, next_expected="trial ran"),
    NodeCell("unstable_step", "a non-finite object state (the cup at x = 2e10 m) in a MuJoCo "
             "step", "trial fault on ~/task_state; the world stood still", holds=1,
             next_expected="trial ran"),
    NodeCell("lift_only", "the cup set 10 m above the table, the arm never moving",
             "no success while it fell", holds=0, next_expected="trial ran"),
    NodeCell("pending_flood", "101 perturbations pending in one trial",
             "the 101st refused naming 100", holds=0, next_expected="trial ran"),
)


# ----- leak checks -----


def is_gateway_thread(thread: threading.Thread) -> bool:
    return thread.name.startswith(GATEWAY_THREAD_PREFIXES)


def new_threads(
    before: Iterable[threading.Thread], ignore: Sequence[str] = ()
) -> list[threading.Thread]:
    """Live threads started since ``before`` that are not the gateway's or an ignored pool's."""
    known = set(before)
    return [
        t for t in threading.enumerate()
        if t not in known and t.is_alive() and not is_gateway_thread(t)
        and not t.name.startswith(tuple(ignore))
    ]


def child_pids() -> set[int]:
    """Live (non-zombie) child processes of this test process."""
    me = os.getpid()
    children = set()
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", encoding="ascii", errors="replace") as handle:
                # The command name is parenthesised and may hold spaces: split after it.
                fields = handle.read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[1]) == me and fields[0] != "Z":
            children.add(int(entry))
    return children


# ----- step checks -----


def invalid_rows(rows: Iterable[Sequence[float]], width: int) -> list[Sequence[float]]:
    """Rows handed to act that no chunk passing the client's checks could contain."""
    return [r for r in rows if len(r) != width or not all(math.isfinite(v) for v in r)]


def jumps(commands: Iterable[Any], max_step: float, sag: float) -> list[Any]:
    """Commands (``node_harness.Command``) more than ``max_step`` from where the arm was when
    they arrived; the test arm settles ``sag`` off each target, so that much more is allowed."""
    bound = max_step + sag + 1e-9
    return [
        c for c in commands
        if any(abs(v - m) > bound for v, m in zip(c.values, c.measured))
    ]


def invalid_arm_commands(commands: Iterable[Sequence[float]]) -> list[Sequence[float]]:
    """Published arm targets that are not 7 finite values inside the Panda limits."""
    bad = []
    for values in commands:
        if len(values) != len(PANDA_LOWER) or not all(math.isfinite(v) for v in values):
            bad.append(values)
        elif any(not lo <= v <= hi for v, lo, hi in zip(values, PANDA_LOWER, PANDA_UPPER)):
            bad.append(values)
    return bad


# ----- the matrix record -----


@dataclass
class MatrixRow:
    """What one cell produced; filled in before the cell's assertions so failures show too."""

    side: str
    cell: str
    fault: str
    expected: str
    observed: str = "(not reached)"
    holds: int = -1
    invalid_steps: int = -1
    leaked: int = -1
    next_run: str = "(not reached)"
    expected_holds: int = 1
    expected_next: str = "completed"

    @property
    def verdict(self) -> str:
        ok = (self.observed == self.expected and self.holds == self.expected_holds
              and self.invalid_steps == 0 and self.leaked == 0
              and self.next_run == self.expected_next)
        return "pass" if ok else "FAIL"

    def as_dict(self) -> dict[str, Any]:
        return dict(asdict(self), verdict=self.verdict)


ROWS: list[MatrixRow] = []


def record(side: str, cell: Cell | NodeCell, expected: str) -> MatrixRow:
    holds = cell.holds if isinstance(cell, NodeCell) else 1
    following = cell.next_expected if isinstance(cell, NodeCell) else "completed"
    row = MatrixRow(side=side, cell=cell.name, fault=cell.fault, expected=expected,
                    expected_holds=holds, expected_next=following)
    ROWS.append(row)
    return row
