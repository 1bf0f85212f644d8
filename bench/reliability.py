"""Reliability: the node's threads and sockets before and after a goal flood against a
stalling gateway, and after activate/deactivate cycles against a readiness check that never
answers (issue 25: both leaked one thread and one connection per request); the VLM planner
killed mid-goal, and the commands the arm gets after its death (issue 33: it left its goal
running)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from urllib.parse import urlsplit

from bench.common import PI05, Context, log
from bench.report import Section, Table
from bench.ros_rig import (
    Robot,
    RosProbe,
    Watch,
    log_robot,
    start_robot,
    stop_robots,
    unique_namespace,
)

VIEWS = ("exterior_1", "wrist_left")
# The node ends an abandoned request within half a second; counted after this settle.
SETTLE_S = 1.0
# Long enough that a goal's stalled first request is still open when the next goal arrives.
GOAL_MAX_SECONDS = 60.0
# The killed planner's steps: bounds how long a goal it leaves behind (SIGKILL) runs on.
PLANNER_STEP_S = 6.0
# The planner is killed once its step's goal has sent the arm this many commands, and the arm
# watched this long after (the idle hold repeats at 1 Hz).
MOTION_MOVING_COMMANDS = 10
AFTER_EXIT_S = 3.0
PLANNER_TASK = "put the cup on the blue block"


def _threads(pid: int) -> int:
    with open(f"/proc/{pid}/status", encoding="ascii") as handle:
        for line in handle:
            if line.startswith("Threads:"):
                return int(line.split()[1])
    raise RuntimeError(f"/proc/{pid}/status has no Threads line")


def _socket_inodes(pid: int) -> set[str]:
    inodes = set()
    for fd in os.listdir(f"/proc/{pid}/fd"):
        try:
            target = os.readlink(f"/proc/{pid}/fd/{fd}")
        except OSError:
            continue
        if target.startswith("socket:["):
            inodes.add(target[8:-1])
    return inodes


def _tcp_to(port: int, inodes: set[str]) -> int:
    """How many of ``inodes`` are TCP connections to ``port`` (/proc/net/tcp, tcp6)."""
    count = 0
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            with open(table, encoding="ascii") as handle:
                next(handle)
                for line in handle:
                    fields = line.split()
                    remote_port = int(fields[2].rsplit(":", 1)[1], 16)
                    if remote_port == port and fields[9] in inodes:
                        count += 1
        except OSError:
            continue
    return count


def _counts(pid: int, port: int) -> tuple[int, int, int]:
    """(threads, sockets, TCP connections to the gateway) of the node process."""
    inodes = _socket_inodes(pid)
    return _threads(pid), len(inodes), _tcp_to(port, inodes)


def _row(case: str, before: tuple[int, int, int], after: tuple[int, int, int],
         extra: str) -> list[str]:
    return [case, *(f"{b} → {a}" for b, a in zip(before, after)), extra]


def _flood(ctx: Context, probe: RosProbe, robot: Robot, pid: int, port: int,
           goals: int) -> list[str]:
    ctx.gateway.inject("stall", seconds=None, count=goals * 4)
    time.sleep(SETTLE_S)
    before = _counts(pid, port)
    # One action client for the flood (RosProbe.send_goal makes one per goal, each with its
    # own status and feedback subscriptions: hundreds of them slow the bench, not the node).
    act = probe.planner.act(robot.topic("act"))
    runs = [act.send(f"flood goal {i}", GOAL_MAX_SECONDS) for i in range(goals)]
    peak = _counts(pid, port)
    reasons = [run.result(GOAL_MAX_SECONDS * 2)[1].reason for run in runs]
    answered = len(reasons)
    # Still stalling: a request the node did not close would still be open now.
    time.sleep(SETTLE_S)
    after = _counts(pid, port)
    ctx.gateway.clear_faults()
    log(f"flood: {answered}/{goals} answered; before {before}, peak {peak}, after {after}")
    return _row(f"{goals} goals, every request stalled", before, after,
                f"{answered}/{goals} goals answered (last: {reasons[-1]}); right after "
                f"sending: {peak[0]} threads, {peak[2]} gateway connections")


def _cycles(ctx: Context, probe: RosProbe, robot: Robot, namespace: str, pid: int, port: int,
            cycles: int) -> tuple[list[str], list[float]]:
    from sequence_ai_ros.params.launch import node_path

    lifecycle = probe.planner.lifecycle(node_path(namespace))
    ctx.gateway.inject("ready_stall", seconds=None, count=cycles * 10)
    if not lifecycle.transition("deactivate"):
        raise RuntimeError("deactivate failed")
    time.sleep(SETTLE_S)
    before = _counts(pid, port)
    deactivations = []
    for _ in range(cycles):
        if not lifecycle.transition("activate"):
            raise RuntimeError("activate failed")
        started = time.monotonic()
        if not lifecycle.transition("deactivate"):
            raise RuntimeError("deactivate failed")
        deactivations.append(time.monotonic() - started)
    time.sleep(SETTLE_S)
    after = _counts(pid, port)
    ctx.gateway.clear_faults()
    log(f"cycles: before {before}, after {after}, deactivate s {deactivations}")
    worst = max(deactivations) * 1000.0
    return _row(f"{cycles} activate/deactivate cycles, readiness never answers", before, after,
                f"deactivate request → reply: max {worst:.0f} ms"), deactivations


def _held_after(watch: Watch, since: float) -> tuple[list[tuple[float, list[float]]], float]:
    """Commands after ``since`` that are not the final hold, and when the final hold began
    (the first of the unbroken run of commands equal to the last one)."""
    commands = list(watch.commands)
    held = commands[-1][1]
    start = len(commands) - 1
    while start > 0 and commands[start - 1][1] == held:
        start -= 1
    moving = [c for c in commands if c[0] > since and c[1] != held]
    return moving, commands[start][0]


def _planner_killed(ctx: Context, probe: RosProbe, robot: Robot, watch: Watch,
                    signum: signal.Signals) -> list[str]:
    """The VLM planner as its own process, killed by ``signum`` once its step moves the arm:
    how it exits and what the arm is sent after."""
    arguments = [f"task:={PLANNER_TASK}", f"base_url:={ctx.gateway.url}",
                 f"step_seconds:={PLANNER_STEP_S}", "task_seconds:=120.0"]
    log_path = ctx.log_dir / f"vlm_planner-{signum.name}.log"
    started = len(watch.commands)
    with log_path.open("w") as out:
        process = subprocess.Popen(
            [sys.executable, "-m", "sequence_ai_ros.vlm_planner", "--ros-args",
             "-r", f"__ns:=/{robot.namespace}", *(x for a in arguments for x in ("-p", a))],
            stdout=out, stderr=subprocess.STDOUT,
            env={**os.environ, "SEQUENCES_API_KEY": ctx.gateway.api_key},
        )  # fmt: skip
    try:
        deadline = time.monotonic() + 60.0
        # Polled: the arm's commands arrive on the probe's thread.
        while len(watch.commands) - started < MOTION_MOVING_COMMANDS:
            if time.monotonic() > deadline or process.poll() is not None:
                raise RuntimeError(f"the planner's step never moved the arm: see {log_path}")
            time.sleep(0.05)
        process.send_signal(signum)
        code = process.wait(timeout=30.0)
        exited = time.monotonic()
    finally:
        if process.poll() is None:
            process.kill()
            process.wait(timeout=10.0)
    time.sleep(AFTER_EXIT_S + (PLANNER_STEP_S if signum is signal.SIGKILL else 0.0))
    moving, held_t = _held_after(watch, exited)
    text = log_path.read_text(encoding="utf-8", errors="replace")
    log(f"planner {signum.name}: exit {code}, {len(moving)} moving commands after, "
        f"held {1000 * (held_t - exited):+.0f} ms from the exit")
    return [f"{signum.name} mid-goal", str(code), "yes" if "Traceback" in text else "no",
            str(len(moving)), f"{1000 * (held_t - exited):+.0f} ms"]


def run(ctx: Context) -> Section:
    goals, cycles = ctx.pick(500, 50), ctx.pick(10, 3)
    section = Section(
        "reliability",
        "Reliability: threads and sockets after floods and cycles",
        intro=(
            "The node process (config/droid.yaml, pi05-droid, sim_robot's light feed) counted "
            "from /proc: threads (`/proc/PID/status`), sockets (`/proc/PID/fd`, DDS's included) "
            "and TCP connections to the gateway (`/proc/net/tcp`), before and "
            f"{SETTLE_S:g} s after. *Flood*: every `/v1/act` request stalls "
            f"(`inject('stall', seconds=None)`) while {goals} goals arrive back to back, each "
            "preempting the one before; counted after the last result, the stall still on. "
            f"*Cycles*: `GET /v1/act/ready` never answers (`inject('ready_stall')`) while the "
            f"node is activated and deactivated {cycles} times."
        ),
    )
    ctx.latency(50.0, 0.0)
    namespace = unique_namespace("reliability")
    probe = RosProbe()
    robots = []
    port = urlsplit(ctx.gateway.url).port or 80
    try:
        robot = start_robot(ctx, namespace, model=PI05, views=VIEWS)
        robots.append(robot)
        log_robot(robot)
        probe.wait_for_joint_states(robot)
        pid = robot.pid(f"{namespace}-node")
        rows = [_flood(ctx, probe, robot, pid, port, goals)]
        watch = probe.watch(robot)
        killed = [_planner_killed(ctx, probe, robot, watch, s)
                  for s in (signal.SIGINT, signal.SIGTERM, signal.SIGKILL)]
        row, _ = _cycles(ctx, probe, robot, namespace, pid, port, cycles)
        rows.append(row)
    finally:
        ctx.gateway.clear_faults()
        stop_robots(robots)
        probe.close()
    section.tables.append(Table(
        "Node process: before → after",
        ["case", "threads", "sockets", "gateway TCP connections", "also"],
        rows,
        ctx.command("reliability"),
    ))
    section.tables.append(Table(
        "The VLM planner killed mid-goal",
        ["case", "planner exit code", "traceback", "moving commands after its exit",
         "arm held (from its exit)"],
        killed,
        ctx.command("reliability"),
        note=(
            "`python -m sequence_ai_ros.vlm_planner` on this node, its first step's goal moving "
            f"the arm ({MOTION_MOVING_COMMANDS} commands), then the signal. Counted from the "
            "node's command topic: commands after the planner process ended that are not the "
            "hold the arm stays at; a negative time means the arm was held before the planner "
            "exited (it cancels its goal and waits for the result). SIGKILL leaves it no say: "
            f"the goal runs to its max_seconds ({PLANNER_STEP_S:g} s) unless the node ends "
            "goals whose client has gone."
        ),
    ))
    return section
