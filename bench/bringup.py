"""Section bringup: what the bring-up safety features cost and how fast they stop the arm.

The gate's cost per step with the Panda's joint limits on against off (a policy step; a 15-row
chunk's trajectory, per row), in this process with a no-op output. Then a simulated robot and
its node with a heartbeat deadman (`enable_topic`): the time from `~/enable false`, and from
the moment the heartbeat's timeout runs out, to the first hold command a light receiver
(bench/command_timer.py, a controller's role) gets. Target: within one control period.
"""

from __future__ import annotations

import json
import math
import os
import signal
import subprocess
import sys
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from bench.command_modes import ArmMessage, stop_command
from bench.common import PI05, Context, NullOutput, droid_parameters, log
from bench.report import Section, Table
from bench.stats import Summary, fmt

PERIOD_S = 1.0 / 15.0
HOME = (0.0, -0.6, 0.0, -2.2, 0.0, 1.6, 0.8)
# Rows sway ±0.3 rad over 4 s: 0.47 rad/s and 0.74 rad/s² at most, within every Panda limit.
SWAY_RAD = 0.3
SWAY_STEPS = 60
HEARTBEAT = "bench_deadman"
HEARTBEAT_PERIOD_S = 0.05
# Longer than a beat can be late on a loaded machine; the figure is timeout → hold.
ENABLE_TIMEOUT_S = 1.0
VIEWS = ("exterior_1", "wrist_left")
INSTRUCTION = "pick up the cup"
# After a stop: the hold, and nothing but its republish, arrives within this.
AFTER_STOP_S = 1.5


# ----- the gate's cost (no ROS) -----


class _Arm:
    """Fresh joints (where the test puts them) and fresh cameras."""

    def __init__(self) -> None:
        self.positions = list(HOME)

    def joints(self, max_age_s: float) -> Any:
        from sequence_ai_ros.core.readings import JointSnapshot

        return JointSnapshot(list(self.positions), [0.0], 0.0, "")

    def ages(self) -> Mapping[str, float | None]:
        return {view: 0.0 for view in VIEWS}


def _rules(limits_on: bool) -> Any:
    """The gate's rules from config/droid.yaml, its speed limits switched on or off."""
    from sequence_ai_ros.core.joint_limits import resolve
    from sequence_ai_ros.core.node_config import NodeConfig
    from sequence_ai_ros.params.spec_table import SPECS
    from sequence_ai_ros.safety.gate import MotionRules

    params = droid_parameters()
    table = params["joint_limits"]
    for entry in table.values():
        entry["has_velocity_limits"] = entry["has_acceleration_limits"] = limits_on
    named = {k: v for k, v in params.items() if k in SPECS}
    config = NodeConfig.from_values({
        **{n: s.default for n, s in SPECS.items()}, **named,
        "joint_limits": resolve(params["joint_names"], {}, table),
    })
    return MotionRules.from_config(config)


def _gate_cost(limits_on: bool, mode: str, steps: int) -> Summary:
    """Microseconds per row through the gate (check + publish, or one chunk's trajectory)."""
    from sequence_ai_ros.core.command_kinds import CommandMode, Interface
    from sequence_ai_ros.safety.gate import ArmGate

    now = [1000.0]
    arm = _Arm()
    gate = ArmGate(NullOutput(Interface.POSITION), arm, joints=7, period_s=PERIOD_S, log=_Quiet(),
                   mode=CommandMode(mode), clock=lambda: now[0])
    gate.begin_goal(_rules(limits_on))
    samples = []
    if mode == "step":
        for k in range(1, steps + 1):
            row = [*_sway(k), 0.0]
            t0 = time.perf_counter()
            assert gate.check(row) is None
            gate.publish(row)
            samples.append((time.perf_counter() - t0) * 1e6)
            now[0] += PERIOD_S
            arm.positions = row[:7]
    else:
        for chunk in range(max(1, steps // 15)):
            # Row k is due k periods after the chunk's first, two periods from now.
            rows = [[*_sway(chunk * 15 + k + 2), 0.0] for k in range(15)]
            t0 = time.perf_counter()
            assert gate.publish_chunk(rows, now[0] + 2 * PERIOD_S) is None
            samples.append((time.perf_counter() - t0) * 1e6 / len(rows))
            now[0] += 15 * PERIOD_S
            arm.positions = _sway(chunk * 15 + 15)
    gate.end_goal()
    return Summary.of(samples)


def _sway(k: int) -> list[float]:
    offset = SWAY_RAD * math.sin(2 * math.pi * k / SWAY_STEPS)
    return [h + offset for h in HOME]


class _Quiet:
    def warning(self, message: str) -> None:
        raise AssertionError(message)

    def error(self, message: str) -> None:
        raise AssertionError(message)


# ----- stop latency (ROS) -----


class _Deadman:
    """bench/heartbeat.py, started by `hold`, stopped by `release`."""

    def __init__(self, ctx: Context, topic: str) -> None:
        self._ctx = ctx
        self._topic = topic
        self._beats = ctx.log_dir / "heartbeat.json"
        self._process: subprocess.Popen | None = None

    def hold(self) -> None:
        self._process = subprocess.Popen(
            [sys.executable, str(Path(__file__).with_name("heartbeat.py")), str(self._beats),
             self._topic, str(HEARTBEAT_PERIOD_S)],
            env=dict(os.environ),
        )

    def release(self) -> float:
        """Stop beating; the monotonic time of the last beat sent."""
        if self._process is None:
            return math.nan
        self._process.send_signal(signal.SIGINT)
        self._process.wait(timeout=20)
        self._process = None
        return float(json.loads(self._beats.read_text(encoding="utf-8"))["last_beat"])


def _set_enabled(node: Any, service: str, value: bool) -> None:
    from std_srvs.srv import SetBool

    from sequence_ai_lab.demo.planner import wait_future

    client = node.create_client(SetBool, service)
    try:
        if not client.wait_for_service(timeout_sec=30.0):
            raise RuntimeError(f"{service} did not appear")
        wait_future(client.call_async(SetBool.Request(data=value)), 30.0, f"{service} {value}")
    finally:
        node.destroy_client(client)


def _wait_enabled(probe: Any, robot: Any, timeout_s: float = 60.0) -> None:
    """Until the node's /diagnostics say motion is enabled (the heartbeat arrives), and one
    more report after that."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        reports = probe.diagnostics_of(robot)
        if len(reports) >= 2 and all(r.get("motion") == "enabled" for r in reports[-2:]):
            return
        time.sleep(0.1)
    raise RuntimeError("the node never reported motion enabled: no heartbeat arrived")


def _wait_for_motion(goal: Any, timeout_s: float) -> None:
    deadline = time.monotonic() + timeout_s
    while not any(f.actions > 3 for f in list(goal.feedback)):
        if time.monotonic() > deadline:
            raise RuntimeError("the goal never moved the arm")
        time.sleep(0.02)


def _stop_latencies(ctx: Context, trials: int) -> tuple[dict[str, list[float]], dict[str, int]]:
    """Seconds from each trigger (disable; heartbeat deadline) to the first hold received."""
    from bench.ros_rig import (
        RosProbe,
        start_command_timer,
        start_robot,
        stop_command_timer,
        stop_robots,
        unique_namespace,
    )

    probe = RosProbe()
    robots = []
    timer: tuple[subprocess.Popen, Path] | None = None
    windows: dict[str, list[tuple[float, float]]] = {"disable": [], "deadman": []}
    other = {"disable": 0, "deadman": 0}
    namespace = unique_namespace("bringup")
    deadman = _Deadman(ctx, f"/{namespace}/{HEARTBEAT}")
    try:
        log("bringup: starting sim_robot (light feed) and the node with a heartbeat deadman")
        robot = start_robot(ctx, namespace, model=PI05, views=VIEWS, fps=15.0, node_overrides={
            "enable_topic": HEARTBEAT, "enable_timeout_s": str(ENABLE_TIMEOUT_S),
        })
        robots.append(robot)
        timer = start_command_timer(ctx, namespace, "forward_position_controller/commands")
        probe.wait_for_joint_states(robot)
        service = robot.topic("sequence_ai/enable")
        for kind in ("disable", "deadman"):
            for trial in range(trials):
                deadman.hold()
                _wait_enabled(probe, robot)
                goal = probe.send_goal(robot, INSTRUCTION, 60.0)
                if not goal.accepted:
                    raise RuntimeError("the goal was rejected (see the node's log)")
                _wait_for_motion(goal, 60.0)
                time.sleep(ctx.rng.uniform(0.0, 0.5))
                if kind == "disable":
                    at = time.monotonic()
                    _set_enabled(probe.node, service, False)
                else:
                    at = deadman.release() + ENABLE_TIMEOUT_S
                _, result = goal.result(60.0)
                log(f"bringup: {kind} trial {trial + 1}: {result.reason}")
                time.sleep(AFTER_STOP_S)
                # Only the trials this stop ended (a loaded machine can end one otherwise first).
                if result.reason == ("disabled" if kind == "disable" else "deadman"):
                    windows[kind].append((at, time.monotonic()))
                else:
                    other[kind] += 1
                if kind == "disable":
                    _set_enabled(probe.node, service, True)
                    deadman.release()
    finally:
        deadman.release()
        arm = [ArmMessage.of(r) for r in stop_command_timer(*timer)] if timer else []
        stop_robots(robots)
        probe.close()
    latencies: dict[str, list[float]] = {}
    for kind, spans in windows.items():
        stops = [stop_command(arm, w) for w in spans]
        latencies[kind] = [s - w[0] if s is not None else math.inf for s, w in zip(stops, spans)]
    return latencies, other


def _ms(summary: Summary) -> list[str]:
    return [str(summary.n), fmt(summary.median * 1e3, 1), fmt(summary.p99 * 1e3, 1),
            fmt(summary.max * 1e3, 1), fmt(summary.max / PERIOD_S, 2)]


def run(ctx: Context) -> Section:
    steps = ctx.pick(3000, 300)
    cost_rows = []
    for mode, path in (("step", "joint (a step: check + publish)"),
                       ("chunk", "trajectory (a 15-row chunk, per row)")):
        off, on = _gate_cost(False, mode, steps), _gate_cost(True, mode, steps)
        cost_rows.append([path, fmt(off.median, 1), fmt(off.p99, 1), fmt(on.median, 1),
                          fmt(on.p99, 1), fmt(on.median - off.median, 1)])
    latencies, other = _stop_latencies(ctx, ctx.pick(8, 2))
    stop_rows = [
        ["~/enable false → first hold", *_ms(Summary.of(latencies["disable"]))],
        [f"heartbeat timeout ({ENABLE_TIMEOUT_S:g} s after the last true) → first hold",
         *_ms(Summary.of(latencies["deadman"]))],
    ]
    command = ctx.command("bringup")
    return Section(
        "bringup",
        "bring-up: joint limits' cost, enable and deadman stop latency",
        intro=__doc__.split("\n\n", 1)[1].strip(),
        tables=[
            Table("The gate's cost per row, µs (7 joints; Panda limits of config/droid.yaml)",
                  ["path", "off p50", "off p99", "on p50", "on p99", "added p50"],
                  cost_rows, command),
            Table("Stop latency to the first hold command a light receiver gets, ms",
                  ["stop", "n", "p50", "p99", "max", "max / control period"], stop_rows, command,
                  note=f"control period {PERIOD_S * 1e3:.1f} ms (pi05-droid, 15 Hz); the "
                  f"heartbeat beats every {HEARTBEAT_PERIOD_S * 1e3:.0f} ms from a process of "
                  "its own (bench/heartbeat.py); the node's watcher looks twice a period. "
                  f"Trials another ending stopped first, left out: {other['disable']} disable, "
                  f"{other['deadman']} deadman."),
        ],
    )
