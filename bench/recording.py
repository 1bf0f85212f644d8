"""Section 9: what recording episodes costs the node under a robot's sensor load."""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bench.common import PI05, Context, log
from bench.report import Section, Table
from bench.stats import Summary, fmt

VIEWS = ("exterior_1", "wrist_left")
FPS = 30.0
LATENCY_MS = 200.0
PERIOD_MS = 1000.0 / 15
COMMAND_TOPIC = "forward_position_controller/commands"
MODES = ("off", "goals")


@dataclass
class Run:
    """One goal with `record` off or goals: node CPU share, command times, result, files."""

    cpu: float = 0.0
    commands: list[float] = field(default_factory=list)
    result: Any = None
    wall_s: float = 0.0
    files: list[Path] = field(default_factory=list)


def _goal(ctx: Context, mode: str, goal_s: float, folder: Path) -> Run:
    from bench.ros_rig import (
        RosProbe,
        cpu_seconds,
        start_command_timer,
        start_robot,
        stop_command_timer,
        stop_robots,
        unique_namespace,
    )

    run = Run()
    probe = RosProbe()
    robots = []
    timer = None
    times = Path()
    try:
        namespace = unique_namespace(f"recording_{mode}")
        log(f"recording ({mode}): starting sim_robot (light feed) and the node")
        # config/droid.yaml says off; a bare `off` on a command line is YAML for false.
        overrides = {"record": mode, "record_dir": str(folder)} if mode != "off" else {}
        robot = start_robot(ctx, namespace, model=PI05, views=VIEWS, fps=FPS,
                            node_overrides=overrides)
        robots.append(robot)
        timer, times = start_command_timer(ctx, namespace, COMMAND_TOPIC)
        probe.wait_for_joint_states(robot)
        time.sleep(2.0)
        node = robot.pid(f"{namespace}-node")
        log(f"recording ({mode}): {goal_s:g} s goal")
        before, t0 = cpu_seconds(node), time.monotonic()
        goal = probe.send_goal(robot, "put the cup in the sink", goal_s)
        run.result = goal.result(goal_s + 60.0)[1]
        run.wall_s = time.monotonic() - t0
        run.cpu = (cpu_seconds(node) - before) / run.wall_s
    finally:
        if timer is not None:
            run.commands = [float(c["t"]) for c in stop_command_timer(timer, times)]
        stop_robots(robots)
        probe.close()
    run.files = sorted(folder.glob("*.mcap"))
    return run


def _periods(run: Run) -> list[float]:
    """Command intervals (ms) between the goal's steps, as received (the first and last
    border the start and the hold)."""
    times = run.commands
    return [(b - a) * 1000 for a, b in list(zip(times, times[1:]))[1:-1]]


def _cell(summary: Summary) -> str:
    return " / ".join(fmt(v, 1) for v in (summary.median, summary.p99, summary.max))


def _open_and_summarise(path: Path) -> tuple[float, int]:
    """Seconds to read one episode whole and print its `show` summary; its message count."""
    from sequence_ai_lab.episodes.reader import read
    from sequence_ai_lab.episodes.tools import show_text

    t0 = time.perf_counter()
    episode = read(path)
    show_text(episode)
    return time.perf_counter() - t0, len(episode.messages)


def run(ctx: Context) -> Section:
    goal_s = ctx.pick(60.0, 4.0)
    section = Section(
        "recording",
        "Recording episodes",
        intro=(
            f"The node_e2e rig (sim_robot's light feed: 2 × 1280×720 rgb8 at {FPS:g} Hz, joint "
            f"states at 100 Hz; config/droid.yaml; gateway latency median {LATENCY_MS / 1000:g} "
            f"s) with one `act` goal of {goal_s:g} s, once with `record: off` and once with "
            "`record: goals` (the defaults otherwise: record_cameras_hz 0, a 4096-message "
            "queue). CPU is the node process's user+system time over the goal, as a share of "
            "one core; commands are timed where they arrive (bench/command_timer.py). The "
            "episode is then opened with the project's reader and summarised as `show` does."
        ),
    )
    try:
        import bench.ros_rig  # noqa: F401 - needs the ROS workspace
    except ImportError as exc:
        section.notes.append(f"not measured: {exc} (needs the ROS workspace: make setup)")
        return section
    ctx.latency(LATENCY_MS)
    runs = {mode: _goal(ctx, mode, goal_s, ctx.log_dir / f"episodes-{mode}") for mode in MODES}
    recorded = runs["goals"]
    periods = {mode: Summary.of(_periods(r)) for mode, r in runs.items()}
    rows = [
        ["node CPU during the goal", *(f"{r.cpu * 100:.1f} %" for r in runs.values()),
         "goals ≤ off + 3 points"],
        ["command period as received: p50 / p99 / max (ms)",
         *(_cell(periods[m]) for m in MODES), "p99 within 2 ms"],
        ["goal result", *(f"{r.result.reason}: {r.result.actions} actions, "
                          f"{r.result.chunks} chunks, {r.result.underruns} underruns"
                          for r in runs.values()), ""],
    ]
    if len(recorded.files) == 1:
        from sequence_ai_lab.episodes.reader import read

        path = recorded.files[0]
        summary = read(path, messages=False).summary
        size = path.stat().st_size
        elapsed = float(summary.get("elapsed_s", "nan"))
        open_s, messages = _open_and_summarise(path)
        rows += [
            ["episode file", "none", f"{size / 1e6:.2f} MB, {messages} messages", ""],
            ["bytes per second of goal", "", f"{size / elapsed / 1e3:.1f} kB/s", ""],
            ["time to open and summarise the episode", "",
             f"{open_s:.2f} s ({elapsed:.0f} s of goal)", ""],
            ["messages dropped by the writer", "", summary.get("dropped", "?"), "0"],
        ]
    else:
        section.notes.append(f"record: goals left {len(recorded.files)} files; expected 1")
    section.tables.append(Table(
        f"One {goal_s:g} s goal under the camera load, record off and goals",
        ["figure", "record: off", "record: goals", "target"], rows, ctx.command("recording"),
        note=(
            "The recorder's hooks only queue messages; the writer thread serialises, writes "
            "and compresses (zstd) and flushes every 0.5 s. The file holds the JPEGs sent "
            "(two 320×180 views per request), each chunk, every command and feedback."
        ),
    ))
    return section
