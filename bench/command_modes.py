"""Section 7: the node's two command modes on the simulated arm under the camera load of section 6.

`step` (config/droid.yaml: one Float64MultiArray per control period, timed by the node's driving
thread) against `chunk` (config/droid_jtc.yaml: one timed JointTrajectory per chunk, played by
sim_robot's joint_trajectory_controller stand-in at its own 100 Hz tick).
"""

from __future__ import annotations

import math
import subprocess
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from bench.common import PI05, Context, log
from bench.node_e2e import COMMAND_TOPIC as STEP_TOPIC
from bench.node_e2e import FPS, LATENCY_MS, VIEWS
from bench.report import Section, Table
from bench.stats import Summary, fmt, ratio, times

if TYPE_CHECKING:
    from bench.ros_rig import Robot, RosProbe
    from sequence_ai_interfaces.action import Act
    from sequence_ai_lab.demo.planner import SentGoal

# command_mode → the launch argument `controller` whose parameters file gives that mode.
CONTROLLERS = {"step": "forward", "chunk": "joint_trajectory"}
CONFIGS = {"step": "config/droid.yaml", "chunk": "config/droid_jtc.yaml"}
INSTRUCTION = "put the cup in the sink"
# A measured joint velocity this small (rad/s) counts as standing still.
STILL_RAD_S = 1e-3
# Recorded after each cancelled goal's result: the hold, and one idle republish of it (1 Hz).
AFTER_STOP_S = 1.5
# Issue #15's target: chunk mode's largest seam |Δv| at most this share of step mode's.
SEAM_TARGET = 0.5


@dataclass(frozen=True)
class ArmMessage:
    """One arm command as a process that only receives them got it (bench/command_timer.py):
    arrival (monotonic), its values (step: the targets; chunk: every point's positions then
    velocities), whether it is a trajectory and whether that trajectory commands no motion
    (all points at one position, zero velocity) and, for a timed trajectory, when its first
    point is due (monotonic)."""

    t: float
    values: tuple[float, ...]
    trajectory: bool = False
    still: bool = False
    first_point: float = math.nan

    @classmethod
    def of(cls, record: dict[str, Any]) -> ArmMessage:
        return cls(
            float(record["t"]), tuple(record["values"]), bool(record.get("trajectory", False)),
            bool(record.get("still", False)), float(record.get("first_point", math.nan)),
        )


@dataclass
class Recording:
    """What the bench process received from one namespace, by stamps or on its monotonic
    clock; the arm's commands, timed by a process that only receives them."""

    arm: list[ArmMessage] = field(default_factory=list)
    # The trajectory controller's desired state, by its sample stamps (chunk mode only).
    reference: list[float] = field(default_factory=list)
    # joint_states: stamp, positions, velocities of the seven arm joints.
    joint_t: list[float] = field(default_factory=list)
    joint_q: list[list[float]] = field(default_factory=list)
    joint_v: list[list[float]] = field(default_factory=list)


@dataclass
class Measured:
    """One mode's run: the recording, the windows the bench drove, what the node recorded."""

    mode: str
    recording: Recording = field(default_factory=Recording)
    goal: tuple[float, float] = (0.0, 0.0)  # goal sent → result received
    cancels: list[tuple[float, float]] = field(default_factory=list)  # cancel → window end
    results: list[Act.Result] = field(default_factory=list)
    record: dict[str, Any] = field(default_factory=dict)


def _record(probe: RosProbe, robot: Robot) -> Recording:
    from rclpy.qos import QoSProfile, ReliabilityPolicy
    from sensor_msgs.msg import JointState

    from sequence_ai_lab.robots.shared.arm import JOINT_NAMES
    from sequence_ai_lab.robots.sim_robot.robot import REFERENCE_TOPIC

    recording = Recording()
    # Stamps are the ROS (system) clock of this machine; one offset maps them onto monotonic.
    offset = time.time() - time.monotonic()

    def stamp(msg: JointState) -> float:
        return msg.header.stamp.sec + msg.header.stamp.nanosec * 1e-9 - offset

    def on_joints(msg: JointState) -> None:
        index = [list(msg.name).index(name) for name in JOINT_NAMES]
        recording.joint_t.append(stamp(msg))
        recording.joint_q.append([msg.position[i] for i in index])
        recording.joint_v.append([msg.velocity[i] for i in index])

    qos = QoSProfile(depth=200, reliability=ReliabilityPolicy.RELIABLE)
    node = probe.node
    node.create_subscription(
        JointState, robot.topic(REFERENCE_TOPIC),
        lambda msg: recording.reference.append(stamp(msg)), qos,
    )  # fmt: skip
    node.create_subscription(JointState, robot.topic("joint_states"), on_joints, qos)
    return recording


def _wait_for_motion(goal: SentGoal, timeout_s: float) -> None:
    """Until the goal's feedback reports a step played (polled: feedback is a plain list)."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if any(f.actions > 0 for f in list(goal.feedback)):
            return
        time.sleep(0.02)
    raise RuntimeError(f"no step played within {timeout_s:g} s")


def _measure(ctx: Context, mode: str, goal_s: float, cancel_after_s: Sequence[float]) -> Measured:
    from bench.ros_rig import (
        RosProbe,
        start_command_timer,
        start_robot,
        stop_command_timer,
        stop_robots,
        unique_namespace,
    )
    from sequence_ai_lab.robots.sim_robot.robot import TRAJECTORY_TOPIC

    measured = Measured(mode)
    probe = RosProbe()
    robots: list[Robot] = []
    timer: tuple[subprocess.Popen, Path] | None = None
    try:
        namespace = unique_namespace(f"modes_{mode}")
        log(f"command modes ({mode}): starting sim_robot (light feed) and the node")
        robot = start_robot(
            ctx, namespace, model=PI05, views=VIEWS, fps=FPS, controller=CONTROLLERS[mode]
        )
        robots.append(robot)
        measured.recording = _record(probe, robot)
        topic, kind = (STEP_TOPIC, "step") if mode == "step" else (TRAJECTORY_TOPIC, "trajectory")
        timer = start_command_timer(ctx, namespace, topic, kind)
        probe.wait_for_joint_states(robot)
        time.sleep(2.0)
        log(f"command modes ({mode}): {goal_s:g} s goal")
        start = time.monotonic()
        goal = probe.send_goal(robot, INSTRUCTION, goal_s)
        measured.results.append(goal.result(goal_s + 60.0)[1])
        measured.goal = (start, time.monotonic())
        for after_s in cancel_after_s:
            time.sleep(1.0)
            log(f"command modes ({mode}): a goal cancelled {after_s:g} s into its motion")
            goal = probe.send_goal(robot, INSTRUCTION, goal_s)
            _wait_for_motion(goal, 60.0)
            time.sleep(after_s)
            cancel_at = time.monotonic()
            goal.cancel()
            measured.results.append(goal.result(60.0)[1])
            time.sleep(AFTER_STOP_S)
            measured.cancels.append((cancel_at, time.monotonic()))
    finally:
        if timer is not None:
            measured.recording.arm = [ArmMessage.of(r) for r in stop_command_timer(*timer)]
        stop_robots(robots)
        probe.close()
    measured.record = robot.probe_record()
    return measured


# ----- analysis (pure: no ROS) -----


def within(values: Sequence[float], window: tuple[float, float]) -> list[float]:
    return [t for t in values if window[0] <= t <= window[1]]


def intervals(stamps: Sequence[float], underruns: Sequence[float] = ()) -> list[float]:
    """Intervals (s) between consecutive stamps, without the first and last (the start and the
    hold border them) and without those spanning a wait for a late chunk (the client's pacing)."""
    pairs = list(zip(stamps, stamps[1:]))[1:-1]
    return [b - a for a, b in pairs if not any(a < u <= b + 0.005 for u in underruns)]


def rate_per_s(stamps: Sequence[float]) -> float:
    if len(stamps) < 2 or stamps[-1] <= stamps[0]:
        return math.nan
    return (len(stamps) - 1) / (stamps[-1] - stamps[0])


def _state_at(t: np.ndarray, q: np.ndarray, at: float) -> np.ndarray:
    """The last sample at or before `at`: a state is what the arm was, not a blend with a move
    that came later (a step command moves the simulated arm within one tick)."""
    return q[max(0, int(np.searchsorted(t, at, side="right")) - 1)]


def _mean_velocity(t: np.ndarray, q: np.ndarray, start: float, period_s: float) -> np.ndarray:
    return (_state_at(t, q, start + period_s) - _state_at(t, q, start)) / period_s


def seam_jumps(
    t: np.ndarray, q: np.ndarray, seams: Sequence[float], period_s: float
) -> list[float]:
    """Per seam s, the largest joint's |Δv| between the mean velocity over the control period
    before s and over the one after (rad/s). Averaging over a period compares the two modes at
    the rate both are commanded at, not at the simulation's tick."""
    jumps = []
    for s in seams:
        if s - period_s < t[0] or s + period_s > t[-1]:
            continue
        change = _mean_velocity(t, q, s, period_s) - _mean_velocity(t, q, s - period_s, period_s)
        jumps.append(float(np.max(np.abs(change))))
    return jumps


def seam_discontinuities(
    t: np.ndarray, q: np.ndarray, seams: Sequence[float], period_s: float
) -> list[float]:
    """Per seam, the part of its |Δv| (as in `seam_jumps`) that the motion's own acceleration
    does not explain: the change across the seam less the mean of the changes one period
    before and one after it (rad/s, largest joint). A steady acceleration measures zero, a
    velocity step its full height: a seam inside a fast start measures the seam, not the start."""
    out = []
    for s in seams:
        if s - 2 * period_s < t[0] or s + 2 * period_s > t[-1]:
            continue
        v = [_mean_velocity(t, q, s + k * period_s, period_s) for k in (-2, -1, 0, 1)]
        across, before, after = v[2] - v[1], v[1] - v[0], v[3] - v[2]
        out.append(float(np.max(np.abs(across - 0.5 * (before + after)))))
    return out


def rms_jerk(t: np.ndarray, v: np.ndarray) -> float:
    """RMS over samples of the joint-space norm of d²v/dt² (rad/s³), from the measured
    velocities at their sample stamps."""
    if len(t) < 4:
        return math.nan
    dt = np.diff(t)
    keep = dt > 0
    t_mid, accel = (t[1:] + t[:-1])[keep] / 2, (np.diff(v, axis=0)[keep].T / dt[keep]).T
    dt2 = np.diff(t_mid)
    keep2 = dt2 > 0
    jerk = (np.diff(accel, axis=0)[keep2].T / dt2[keep2]).T
    return float(np.sqrt(np.mean(np.sum(jerk**2, axis=1))))


def stop_command(arm: Sequence[ArmMessage], window: tuple[float, float]) -> float | None:
    """When, after the cancel at window[0], the arm was first commanded to stay still: the
    first command that every later one in the window repeats (the hold and its idle
    republish); a trajectory must also be still. None when there is none."""
    inside = [m for m in arm if window[0] <= m.t <= window[1]]
    for i, message in enumerate(inside):
        if message.trajectory and not message.still:
            continue
        if all(m.values == message.values for m in inside[i:]):
            return message.t
    return None


def node_stop(
    cancels: Sequence[float], holds: Sequence[float], window: tuple[float, float]
) -> float:
    """In the node's own times: from the first cancel it got in the window to the first hold it
    published after that (inf when it published none, NaN when no cancel reached it)."""
    got = within(cancels, window)
    if not got:
        return math.nan
    held = [h for h in within(holds, window) if h >= got[0]]
    return held[0] - got[0] if held else math.inf


def still_from(
    t: np.ndarray, v: np.ndarray, window: tuple[float, float], still: float = STILL_RAD_S
) -> float | None:
    """The first sample in the window from which every measured joint velocity stays within
    `still` until the window's end; None if the arm never settles in it."""
    inside = np.flatnonzero((t >= window[0]) & (t <= window[1]))
    moving = [i for i in inside if np.max(np.abs(v[i])) > still]
    if not len(inside):
        return None
    if not moving:
        return float(t[inside[0]])
    after = [i for i in inside if i > moving[-1]]
    return float(t[after[0]]) if after else None


# ----- the table -----


@dataclass
class Figures:
    """One mode's figures (seconds and rad units; the table scales them)."""

    commands_per_s: float
    python_steps: list[float]
    setpoints: list[float]
    ticks: list[float]
    seams: list[float]
    jumps: list[float]
    discontinuities: list[float]
    jerk: float
    stop_command: list[float]
    stop_measured: list[float]
    # Inside the node: its cancel callback → its hold published (s).
    stop_in_node: list[float]
    # Chunk mode: how long before its first point was due each trajectory arrived (s).
    leads: list[float] = field(default_factory=list)


def _lateness(values: Sequence[float]) -> Summary:
    """How far intervals run past their median (s): what a late beat adds to the next one."""
    summary = Summary.of(values)
    return Summary.of(v - summary.median for v in values)


def figures(measured: Measured, period_s: float) -> Figures:
    rec = measured.recording
    window = measured.goal
    underruns = measured.record.get("underruns", [])
    arm = [m for m in rec.arm if window[0] <= m.t <= window[1]]
    arm_times = [m.t for m in arm]
    t = np.array(rec.joint_t)
    q, v = np.array(rec.joint_q), np.array(rec.joint_v)
    motion = (arm_times[0], window[1]) if arm_times else window
    moving = (t >= motion[0]) & (t <= motion[1])
    # The node's own step times, from its publish calls (the bench process's arrival times
    # would add its own scheduling).
    python_steps = intervals(within(measured.record.get("publishes", []), window), underruns)
    if measured.mode == "step":
        setpoints = intervals(arm_times, underruns)
        # The first row of every chunk after the first is due at its seam.
        seams = [due for at, due, chunk in measured.record.get("installs", [])
                 if chunk > 1 and window[0] <= at <= window[1]]
    else:
        setpoints = intervals(within(rec.reference, motion))
        # Humble's controller takes a new trajectory over on receipt: each chunk's arrival.
        seams = [m.t for m in arm if not m.still][1:]
    stops = [(stop_command(rec.arm, w), still_from(t, v, w), w[0]) for w in measured.cancels]
    node_cancels = measured.record.get("cancels", [])
    holds = measured.record.get("holds", [])
    return Figures(
        commands_per_s=rate_per_s(arm_times),
        python_steps=python_steps,
        setpoints=setpoints,
        ticks=intervals(list(t[moving])),
        seams=seams,
        jumps=seam_jumps(t, q, seams, period_s),
        discontinuities=seam_discontinuities(t, q, seams, period_s),
        jerk=rms_jerk(t[moving], v[moving]),
        stop_command=[math.inf if c is None else c - at for c, _, at in stops],
        stop_measured=[math.inf if s is None else s - at for _, s, at in stops],
        stop_in_node=[node_stop(node_cancels, holds, w) for w in measured.cancels],
        leads=[m.first_point - m.t for m in arm if m.trajectory and not m.still],
    )


def _ms(summary: Summary, digits: int = 1) -> str:
    return " / ".join(fmt(x * 1000, digits) for x in (summary.median, summary.p99, summary.max))


def _met(ok: bool) -> str:
    return "yes" if ok else "**no**"


def table_rows(step: Figures, chunk: Figures, period_s: float) -> list[list[str]]:
    """[figure, step, chunk, chunk/step, target, met] for the section's table."""
    step_late, chunk_python = _lateness(step.python_steps), _lateness(chunk.python_steps)
    chunk_late, chunk_ticks = _lateness(chunk.setpoints), _lateness(chunk.ticks)
    step_jump, chunk_jump = Summary.of(step.jumps), Summary.of(chunk.jumps)
    step_cut = Summary.of(step.discontinuities)
    chunk_cut = Summary.of(chunk.discontinuities)
    step_stop, chunk_stop = Summary.of(step.stop_command), Summary.of(chunk.stop_command)
    # "Equals the controller's": the setpoints run late by no more than the controller's own
    # tick does (1 ms of scheduling slack), whatever the Python steps did.
    independent = chunk_late.p99 <= chunk_ticks.p99 + 0.001
    return [
        ["arm command messages per second during the goal", fmt(step.commands_per_s, 1),
         fmt(chunk.commands_per_s, 1), times(ratio(chunk.commands_per_s, step.commands_per_s)),
         "", ""],
        ["Python step interval (the node's publish calls; chunk mode: rows handed out, only "
         "their gripper value sent): p50 / p99 / max (ms)",
         _ms(Summary.of(step.python_steps)), _ms(Summary.of(chunk.python_steps)), "", "", ""],
        ["arm setpoint interval (step: the commands as a receiving process gets them; chunk: "
         "the controller's samples): p50 / p99 / max (ms)",
         _ms(Summary.of(step.setpoints)), _ms(Summary.of(chunk.setpoints)), "", "", ""],
        ["sim controller tick (joint_states stamps): p50 / p99 / max (ms)",
         _ms(Summary.of(step.ticks)), _ms(Summary.of(chunk.ticks)), "", "", ""],
        ["late Python step: how late its step ran, past the median interval: p99 / max (ms)",
         _late(step_late),
         _late(chunk_python), "", "", ""],
        ["… how late that made the arm's setpoints, past their median interval: p99 / max (ms)",
         _late(step_late),
         _late(chunk_late), "",
         f"chunk: the controller's own (tick p99 {fmt(chunk_ticks.p99 * 1000, 1)} ms)",
         _met(independent)],
        ["\\|Δv\\| of the measured joints across a seam (largest joint): p50 / p99 / max "
         "(rad/s) (seams)",
         f"{_jumps(step_jump)} ({step_jump.n})", f"{_jumps(chunk_jump)} ({chunk_jump.n})",
         times(ratio(chunk_jump.max, step_jump.max)), "", ""],
        ["… its velocity discontinuity: less the motion's own change either side: p50 / p99 / "
         "max (rad/s)",
         _jumps(step_cut), _jumps(chunk_cut), times(ratio(chunk_cut.max, step_cut.max)),
         f"chunk max ≤ {SEAM_TARGET:g}× step's",
         _met(chunk_cut.max <= SEAM_TARGET * step_cut.max)],
        ["chunk trajectories: first point due after arrival, min / p50 (ms); arrived after it "
         "was due (the controller jumps to the trajectory instead of joining it)", "n/a",
         f"{fmt(min(chunk.leads, default=math.nan) * 1000, 1)} / "
         f"{fmt(Summary.of(chunk.leads).median * 1000, 1)}; "
         f"{sum(lead < 0 for lead in chunk.leads)} of {len(chunk.leads)}", "", "", ""],
        ["RMS jerk of the measured joints during the goal (rad/s³)", fmt(step.jerk, 0),
         fmt(chunk.jerk, 0), times(ratio(chunk.jerk, step.jerk)), "", ""],
        ["stop in the node: its cancel callback → its hold published: p50 / max (ms)",
         _stop(Summary.of(step.stop_in_node)), _stop(Summary.of(chunk.stop_in_node)), "", "",
         ""],
        ["stop: cancel sent → first still command received: p50 / max (ms) (cancels)",
         f"{_stop(step_stop)} ({step_stop.n})", f"{_stop(chunk_stop)} ({chunk_stop.n})",
         times(ratio(chunk_stop.max, step_stop.max)),
         f"chunk ≤ one period ({fmt(period_s * 1000, 1)} ms)",
         _met(chunk_stop.max <= period_s)],
        ["stop: cancel → measured joints still (\\|v\\| ≤ "
         f"{STILL_RAD_S:g} rad/s): p50 / max (ms)",
         _stop(Summary.of(step.stop_measured)), _stop(Summary.of(chunk.stop_measured)), "", "",
         ""],
    ]


def _late(summary: Summary) -> str:
    return f"{fmt(summary.p99 * 1000, 1)} / {fmt(summary.max * 1000, 1)}"


def _jumps(summary: Summary) -> str:
    return " / ".join(fmt(x, 3) for x in (summary.median, summary.p99, summary.max))


def _stop(summary: Summary) -> str:
    return " / ".join(fmt(x * 1000, 1) for x in (summary.median, summary.max))


def _plot(path: Path, runs: dict[str, tuple[Measured, Figures]], period_s: float) -> None:
    """One joint's measured velocity over a few seconds of each mode's goal, seams marked."""
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(len(runs), 1, figsize=(11, 2.6 * len(runs) + 0.6), sharex=True)
    chunk_q = np.array(runs["chunk"][0].recording.joint_q)
    joint = int(np.argmax(np.ptp(chunk_q, axis=0))) if len(chunk_q) else 0
    for ax, (mode, (measured, figs)) in zip(axes, runs.items()):
        t = np.array(measured.recording.joint_t)
        v = np.array(measured.recording.joint_v)
        q = np.array(measured.recording.joint_q)
        arm = [m.t for m in measured.recording.arm if measured.goal[0] <= m.t <= measured.goal[1]]
        t0 = (arm[0] if arm else measured.goal[0]) + 2.0
        shown = (t >= t0) & (t <= t0 + 4.0)
        ax.plot(t[shown] - t0, v[shown, joint], color="tab:blue", lw=0.8,
                label="measured velocity (joint_states)")
        mean = [(_state_at(t, q, x)[joint] - _state_at(t, q, x - period_s)[joint]) / period_s
                for x in t[shown]]
        ax.plot(t[shown] - t0, mean, color="tab:orange", lw=1.6,
                label="mean over the preceding control period")
        seams = [s - t0 for s in figs.seams if t0 <= s <= t0 + 4.0]
        for i, s in enumerate(seams):
            ax.axvline(s, color="grey", ls="--", lw=1, label="seam" if i == 0 else None)
        ax.set_ylabel("rad/s")
        ax.set_title(f"{mode} mode ({CONFIGS[mode]}): panda_joint{joint + 1}", fontsize=9,
                     loc="left")
        ax.grid(alpha=0.3)
        ax.legend(loc="upper right", fontsize=7, ncol=3)
    axes[-1].set_xlabel("seconds (from 2 s after the goal's first command)")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def run(ctx: Context) -> Section:
    goal_s = 15.0
    cancel_after_s = (3.0, 4.3, 5.6)
    section = Section(
        "command_modes",
        "Step mode against chunk mode on the simulated arm",
        intro=(
            "The same goal on `sim_robot` (the light camera feed of section 6: two 1280×720 "
            f"cameras, {', '.join(VIEWS)}, at {FPS:g} Hz, joint states at 100 Hz) driven by the "
            "node in each command mode with its parameters file unchanged: `step` "
            f"({CONFIGS['step']}, one Float64MultiArray per control period, timed by the "
            f"node's driving thread) and `chunk` ({CONFIGS['chunk']}, each chunk one timed "
            "JointTrajectory, sampled by sim_robot's joint_trajectory_controller stand-in "
            "(sim_robot/trajectory.py, Humble's restart semantics) at its own tick). "
            "Gateway latency "
            f"median {LATENCY_MS / 1000:g} s (lognormal, sigma 0.3). Per mode: one `act` goal "
            f"of {goal_s:g} s, then {len(cancel_after_s)} goals cancelled "
            f"{', '.join(f'{s:g}' for s in cancel_after_s)} s after their first step. The bench "
            "process records the joint states and the controller's desired state "
            "(`joint_trajectory_controller/reference`) by their stamps; the node's own process "
            "records when it publishes each step, installs each chunk, gets a cancel and holds "
            "(bench/node_probe.py); a process that only receives the arm's commands "
            "(bench/command_timer.py) times them as a controller gets them."
        ),
    )
    if ctx.quick:
        # Two nodes under the camera load take about half a minute even with short goals:
        # more than the whole smoke run's budget.
        section.notes.append(
            "not run in the quick bench: `make bench ARGS='--only command_modes'`"
        )
        return section
    try:
        import bench.ros_rig  # noqa: F401 - needs the ROS workspace
    except ImportError as exc:
        section.notes.append(f"not measured: {exc} (needs the ROS workspace: make setup)")
        return section
    control_hz = ctx.models[PI05].control_hz
    if not control_hz:
        raise RuntimeError(f"{PI05}: the catalogue row has no control_hz")
    period_s = 1.0 / control_hz
    ctx.latency(LATENCY_MS)
    runs: dict[str, tuple[Measured, Figures]] = {}
    for mode in CONTROLLERS:
        measured = _measure(ctx, mode, goal_s, cancel_after_s)
        runs[mode] = (measured, figures(measured, period_s))
    step, chunk = runs["step"][1], runs["chunk"][1]
    rows = table_rows(step, chunk, period_s)
    rows.append([
        "goal results",
        *("; ".join(f"{r.reason}: {r.actions} actions, {r.chunks} chunks, {r.underruns} underruns"
                    for r in runs[mode][0].results) for mode in CONTROLLERS),
        "", "", "",
    ])
    section.tables.append(Table(
        "The same goals in step mode and chunk mode",
        ["figure", f"step ({CONFIGS['step']})", f"chunk ({CONFIGS['chunk']})", "chunk / step",
         "target", "met"],
        rows, ctx.command("command_modes"),
        note=(
            "Seams: step mode, the time the first row of each chunk after the first is due (from "
            "the node's process); chunk mode, the arrival of each chunk's trajectory after the "
            "first (Humble's controller takes it over on receipt). \\|Δv\\| at a seam is the "
            "largest joint's change between its mean velocity over the control period before "
            "the seam and over the one after: the simulated arm moves to a step's target within "
            "a tick, so its instantaneous velocity in step mode is a spike per step, and the "
            "period mean compares both modes at the rate they are commanded at. Part of that "
            "change is the motion's own acceleration (the model's chunks start fast), wherever "
            "a seam falls; the discontinuity row takes it out, as the mean of the same change "
            "one period before and one after the seam. The jerk is "
            "taken from the measured velocities at the simulation's tick, spikes included. "
            "Lateness is an interval's excess over the median interval of its stream; intervals "
            "that span a wait for a late chunk (an underrun) are left out. Commands are timed on "
            "arrival in a process that only receives them (bench/command_timer.py), the "
            "controller's role: a trajectory's lead, the seams and the stop. The cancel is timed "
            "where the planner sends it, and again where the node's cancel callback runs "
            "(bench/node_probe.py, with the node's hold). A still "
            "command: the first command after the cancel that every later one repeats (the "
            "hold and its idle republish), in chunk mode a trajectory at one position with "
            "zero velocity. The measured joints are still from the sample after their last "
            "motion in the second and a half after the cancel; in step mode the arm has often "
            "reached its last target before the cancel."
        ),
    ))
    name = "bench_command_modes.png"
    _plot(ctx.out_dir / name, runs, period_s)
    section.figures.append((
        name,
        "One joint's measured velocity in each command mode over four seconds of the goal, "
        "with the chunk seams.",
    ))
    return section
