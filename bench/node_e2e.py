"""Section 6: the node under a robot's sensor load: CPU, frame age, command period, staleness."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bench.common import PI05, Context, log
from bench.plots import cdf
from bench.report import Section, Table
from bench.stats import Summary, fmt

VIEWS = ("exterior_1", "wrist_left")
FPS = 30.0
LATENCY_MS = 200.0
PERIOD_MS = 1000.0 / 15
ROOT = Path(__file__).resolve().parent.parent
COMMAND_TOPIC = "forward_position_controller/commands"
FEEDS = {"raw": "2 × 1280×720 rgb8 Image", "compressed": "2 × 1280×720 JPEG CompressedImage"}


@dataclass
class Measured:
    """One feed's run: CPU shares (of one core) per process, and what the node recorded."""

    cpu: dict[str, dict[str, float]] = field(default_factory=dict)  # window → process → share
    commands: list[float] = field(default_factory=list)
    result: Any = None
    record: dict[str, Any] = field(default_factory=dict)
    floor_rates: dict[str, float] = field(default_factory=dict)
    goal_wall_s: float = 0.0


def _cpu(pids: dict[str, int]) -> dict[str, float]:
    from bench.ros_rig import cpu_seconds

    return {name: cpu_seconds(pid) for name, pid in pids.items()}


def _shares(before: dict[str, float], after: dict[str, float], wall: float) -> dict[str, float]:
    return {name: (after[name] - before[name]) / wall for name in before}


def _start_floor(ctx: Context, namespace: str, transport: str) -> tuple[subprocess.Popen, Path]:
    counts = ctx.log_dir / f"{namespace}-floor-counts.json"
    log_file = (ctx.log_dir / f"{namespace}-floor.log").open("w")
    process = subprocess.Popen(
        [sys.executable, str(ROOT / "bench" / "floor_subscriber.py"), str(counts),
         f"/{namespace}", transport, *VIEWS],
        stdout=log_file, stderr=subprocess.STDOUT, env=dict(os.environ),
    )
    log_file.close()
    return process, counts


def _measure(ctx: Context, transport: str, idle_s: float, goal_s: float) -> Measured:
    from bench.ros_rig import (
        RosProbe,
        start_command_timer,
        start_robot,
        stop_command_timer,
        stop_robots,
        unique_namespace,
    )

    measured = Measured()
    probe = RosProbe()
    robots = []
    floor: subprocess.Popen | None = None
    timer: subprocess.Popen | None = None
    counts = times = Path()
    try:
        namespace = unique_namespace(f"e2e_{transport}")
        log(f"node e2e ({transport}): starting sim_robot (light feed), the node, the floor")
        robot = start_robot(ctx, namespace, model=PI05, views=VIEWS, transport=transport, fps=FPS)
        robots.append(robot)
        floor, counts = _start_floor(ctx, namespace, transport)
        timer, times = start_command_timer(ctx, namespace, COMMAND_TOPIC)
        probe.wait_for_joint_states(robot)
        time.sleep(2.0)
        pids = {
            "node": robot.pid(f"{namespace}-node"),
            "floor": floor.pid,
            "sim_robot": robot.pid(f"{namespace}-sim_robot"),
        }
        log(f"node e2e ({transport}): idle CPU over {idle_s:g} s")
        before, t0 = _cpu(pids), time.monotonic()
        time.sleep(idle_s)
        measured.cpu["idle"] = _shares(before, _cpu(pids), time.monotonic() - t0)
        log(f"node e2e ({transport}): {goal_s:g} s goal")
        before, t0 = _cpu(pids), time.monotonic()
        goal = probe.send_goal(robot, "put the cup in the sink", goal_s)
        measured.result = goal.result(goal_s + 60.0)[1]
        measured.goal_wall_s = time.monotonic() - t0
        measured.cpu["goal"] = _shares(before, _cpu(pids), measured.goal_wall_s)
    finally:
        if floor is not None:
            floor.send_signal(signal.SIGINT)
            floor.wait(timeout=20)
        if timer is not None:
            measured.commands = [float(c["t"]) for c in stop_command_timer(timer, times)]
        stop_robots(robots)
        probe.close()
    measured.record = robot.probe_record()
    try:
        measured.floor_rates = json.loads(counts.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        pass
    return measured


def _periods(
    measured: Measured, times: list[float] | None = None
) -> tuple[list[float], list[float]]:
    """Command intervals (ms) between the goal's steps (`times`: as received by default): all
    of them, and those that span no wait for a late chunk (an underrun is the client's pacing,
    not the node's)."""
    times = measured.commands if times is None else times
    # The first and last commands border the start and the hold; periods are between steps.
    intervals = list(zip(times, times[1:]))[1:-1]
    ends = measured.record.get("underruns", [])
    clean = [(a, b) for a, b in intervals if not any(a < u <= b + 0.005 for u in ends)]
    return [(b - a) * 1000 for a, b in intervals], [(b - a) * 1000 for a, b in clean]


def _cell(summary: Summary, scale: float = 1.0, digits: int = 1) -> str:
    return " / ".join(
        fmt(v * scale, digits) for v in (summary.median, summary.p99, summary.max)
    )


def _percent(value: float | None) -> str:
    return "n/a" if value is None else f"{value * 100:.0f} %"


def _column(measured: Measured) -> dict[str, str]:
    record = measured.record
    requests = record.get("requests", [])
    received = Summary.of(a["since_receipt_s"][v] for a in requests for v in VIEWS
                          if v in a["since_receipt_s"])
    stamped = Summary.of(a["since_stamp_s"][v] for a in requests for v in VIEWS
                         if v in a["since_stamp_s"])
    observe = Summary.of(a["observe_s"] for a in requests)
    threads = sorted({a["thread"] for a in requests})
    every, clean = _periods(measured)
    published = _periods(measured, record.get("publishes", []))[1]
    result = measured.result
    stale = len(record.get("stale", [])) + int(str(result.reason) == "stale_input")
    rate = ", ".join(f"{v:.1f}" for v in measured.floor_rates.values())
    cpu = measured.cpu
    return {
        "node_idle": _percent(cpu.get("idle", {}).get("node")),
        "floor_idle": _percent(cpu.get("idle", {}).get("floor")),
        "node_goal": _percent(cpu.get("goal", {}).get("node")),
        "floor_goal": _percent(cpu.get("goal", {}).get("floor")),
        "sim_goal": _percent(cpu.get("goal", {}).get("sim_robot")),
        "age_received": _cell(received, 1000.0),
        "age_stamped": _cell(stamped, 1000.0),
        "period_clean": f"{_cell(Summary.of(clean))} ({len(clean)})",
        "period_all": f"{_cell(Summary.of(every))} ({len(every)})",
        "period_published": f"{_cell(Summary.of(published))} ({len(published)})",
        "underruns": f"{result.underruns} ({result.underrun_s:.2f} s)",
        "observe": f"{_cell(observe, 1000.0)} on {', '.join(threads) or 'n/a'}",
        "stale": str(stale),
        "result": f"{result.reason}: {result.actions} actions, {result.chunks} chunks",
        "floor_rate": rate or "n/a",
    }


ROWS = (
    ("node_idle", "node CPU, cameras streaming, no goal", "≤ 15 %"),
    ("floor_idle", "do-nothing subscriber taking every frame, same window", "(the floor)"),
    ("node_goal", "node CPU during the goal", "≤ 30 %"),
    ("floor_goal", "do-nothing subscriber, same window", "(the floor)"),
    ("sim_goal", "sim_robot (light feed) CPU during the goal", "(context)"),
    ("age_received", "frame age when a request takes it, since received: p50 / p99 / max (ms)",
     "p99 ≤ 67"),
    ("age_stamped", "same, since the frame's header stamp (includes DDS transport) (ms)", ""),
    ("period_clean", "command period as received, without an underrun: p50 / p99 / max (ms) (n)",
     "p99 ≤ 80, max ≤ 100"),
    ("period_all", "command period as received, every interval: p50 / p99 / max (ms) (n)",
     f"requested {PERIOD_MS:.1f}"),
    ("period_published", "command period at the node's publish call, without an underrun: "
     "p50 / p99 / max (ms) (n)", "the node's own timing"),
    ("underruns", "underruns (time waited for a late chunk)", ""),
    ("observe", "observe(): p50 / p99 / max (ms), thread", "off the driving thread"),
    ("stale", "StaleObservation (requests refused + goal ending)", "0"),
    ("result", "goal result", ""),
    ("floor_rate", "messages/s the do-nothing subscriber got (cameras…, joint_states)",
     "30, 30, 100"),
)


def run(ctx: Context) -> Section:
    goal_s = {"raw": ctx.pick(60.0, 4.0), "compressed": ctx.pick(30.0, 4.0)}
    idle_s = ctx.pick(10.0, 2.0)
    section = Section(
        "node_e2e",
        "The node under a robot's sensor load",
        intro=(
            f"`sim_robot` as the light camera feed (`camera_frames:=premade`: pre-made "
            f"1280×720 frames of {', '.join(VIEWS)} at exactly {FPS:g} Hz, joint states at "
            "100 Hz), so the load is the node's, not the renderer's; the node with "
            "config/droid.yaml unchanged (pi05-droid, prefetch on, max_image_age_s 0.5, "
            "max_state_age_s 0.25), started by the project's launcher module with the "
            "large-frames Fast DDS profile and brought up through its lifecycle; gateway "
            f"latency median {LATENCY_MS / 1000:g} s (lognormal, sigma 0.3); one `act` goal of "
            f"{goal_s['raw']:g} s (raw) and {goal_s['compressed']:g} s (JPEG). Beside the node, "
            "in the same run, a do-nothing subscriber (one `SingleThreadedExecutor`, callbacks "
            "that only count) takes every message of the same topics: the floor of taking every "
            "frame. CPU is user+system time from /proc/<pid>/stat over the window, as a share "
            "of one core. Commands are timed twice: where the node publishes them (a probe in "
            "its process) and where they arrive, in a process that only subscribes to them "
            "(bench/command_timer.py, a controller's role)."
        ),
    )
    try:
        import bench.ros_rig  # noqa: F401 - needs the ROS workspace
    except ImportError as exc:
        section.notes.append(f"not measured: {exc} (needs the ROS workspace: make setup)")
        return section
    ctx.latency(LATENCY_MS)
    columns = {}
    periods = {}
    for transport in FEEDS:
        measured = _measure(ctx, transport, idle_s, goal_s[transport])
        columns[transport] = _column(measured)
        periods[f"{FEEDS[transport]}: command interval"] = _periods(measured)[0]
    rows = [[label, *(columns[t][key] for t in FEEDS), target]
            for key, label, target in ROWS]
    section.tables.append(Table(
        "The node with two 1280×720 cameras at 30 Hz and joint states at 100 Hz",
        ["figure", *FEEDS.values(), "target (JPEG within 1.5×)"],
        rows, ctx.command("node_e2e"),
        note=(
            "Frame ages come from a probe wrapped around the node's observation path "
            "(bench/node_probe.py, in the node's own process): the age of each frame at the "
            "moment a request takes it. An interval that spans a wait for a late chunk (an "
            "underrun, the client's pacing) is left out of the first period row, and counted "
            "in the second."
        ),
    ))
    cdf(ctx.out_dir / "bench_node_commands.png", periods, xlabel="ms",
        title="Node under sensor load: command intervals as received",
        marks={f"period {PERIOD_MS:.1f} ms": PERIOD_MS})
    section.figures.append(("bench_node_commands.png",
                            "Command intervals received from the node, per camera feed."))
    return section
