"""Section models: every catalogue model end to end through the node on its own simulator.

Each model's robot is started as the project's launcher starts it for `model:=<id> sim:=true`
(node_launch.py's MODEL_ROBOTS: the simulator, the node's parameter files in order), the node
configured and activated, and driven by one goal of GOAL_S seconds and a few goals cancelled
mid-motion. A process that only receives the arm's commands (bench/command_timer.py, a
controller's role) times them on the model's own command topic and type. The distance to the
target is the demo's (demo/robots.py): the gateway's simulated model's target for the
instruction, in joint space (rad) for joint robots, end-effector position (m) for Cartesian ones.
Then the gate's cost per step in-process with a no-op output: the Cartesian path (pose lookup,
gate check, publish) beside the joint path.
"""

from __future__ import annotations

import math
import subprocess
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from bench.command_modes import ArmMessage, intervals, rate_per_s, stop_command
from bench.common import ROOT, Context, NullOutput, log
from bench.report import Section, Table, load_average
from bench.stats import Summary, fmt

if TYPE_CHECKING:
    from bench.ros_rig import RosProbe
    from sequence_ai_lab.demo.launcher import Launcher
    from sequence_ai_lab.demo.planner import SentGoal
    from sequence_ai_lab.demo.robots import DemoRobot

MODELS = (
    "pi05-droid",
    "cosmos3-edge-policy-droid",
    "sim-bimanual-reach",
    "sim-stateless-ee-delta",
    "sim-ee-absolute-reach",
)
QUICK_MODELS = ("sim-stateless-ee-delta",)
GOAL_S = 10.0
QUICK_GOAL_S = 3.0
# The cancelled goals: each a new instruction, so the arm has somewhere to go.
INSTRUCTIONS = ("pick up the cup", "put the cup in the sink", "open the drawer",
                "wipe the table")
# Simulated inference time (median, lognormal sigma 0.3), as in sections 6 and 7.
LATENCY_MS = 200.0
# sim_robot as the light camera feed (premade frames); the other simulators render their own.
SIM_ROBOT_FPS = 15.0
# From the first measured state to the first goal.
SETTLE_S = 3.0
# After a cancel's result: the hold, and its idle republish (1 Hz).
AFTER_STOP_S = 1.5
# An ee_absolute hold is the measured pose: its position within this of the newest ee_pose.
HOLD_POSE_M = 0.002
STEP, TRAJECTORY, TWIST, POSE = "step", "trajectory", "twist", "pose"
NODE_KEY = "/**/sequence_ai"
# The Act result's reason for a goal its cancel ended.
CANCELLED = "interrupted"
# Results of a goal that ran its course: the policy finished, its condition or its time ran out.
RAN_OUT = ("completed", "until", "timeout")


# ----- analysis (pure: no ROS) -----


def state_at(samples: Sequence[tuple[float, list[float]]], at: float) -> list[float] | None:
    """The newest measured state at or before `at`, else the first after it (None if none)."""
    before = [values for t, values in samples if t <= at]
    if before:
        return before[-1]
    return samples[0][1] if samples else None


def hold_at(
    kind: str,
    arm: Sequence[ArmMessage],
    window: tuple[float, float],
    measured: Sequence[tuple[float, list[float]]] = (),
) -> float | None:
    """When, after the cancel at window[0], the first hold command arrived (None: none did).

    twist: the first zero twist. step (joints): the first command every later one in the window
    repeats (the hold and its idle republish, as sections 7 and 10 detect it). pose: the same,
    and its position within HOLD_POSE_M of the newest measured position (`measured`) at its
    arrival: the measured pose, not a target on the way."""
    if kind == TWIST:
        return next((m.t for m in arm if window[0] <= m.t <= window[1] and m.still), None)
    if kind != POSE:
        return stop_command(arm, window)
    inside = [m for m in arm if window[0] <= m.t <= window[1]]
    for i, message in enumerate(inside):
        if not all(m.values == message.values for m in inside[i:]):
            continue
        position = state_at(measured, message.t)
        if position is not None and math.dist(message.values[:3], position[:3]) <= HOLD_POSE_M:
            return message.t
    return None


def goal_stamps(arm: Sequence[ArmMessage], window: tuple[float, float]) -> list[float]:
    return [m.t for m in arm if window[0] <= m.t <= window[1]]


# ----- one model on its simulator (ROS) -----


@dataclass(frozen=True)
class Setup:
    """A model's robot as the section drives it: parameters, command topic and its type."""

    model: str
    simulator: str
    params_files: tuple[str, ...]
    parameters: dict[str, Any]
    space: str
    topic: str
    kind: str


def _parameters(files: Sequence[str]) -> dict[str, Any]:
    """The node's parameters from `files` in load order (a later file's value winning)."""
    import yaml

    merged: dict[str, Any] = {}
    for name in files:
        document = yaml.safe_load((ROOT / name).read_text(encoding="utf-8"))
        merged.update(document[NODE_KEY]["ros__parameters"])
    return merged


def setup_of(ctx: Context, model: str, robot: DemoRobot) -> Setup:
    from sequence_ai_ros.params.launch import model_robot

    placed = model_robot(model)
    files = placed.params_files("forward")
    params = _parameters(files)
    space = ctx.models[model].action_space or ""
    if space == "ee_delta":
        topic, kind = str(params["twist_topic"]), TWIST
    elif space == "ee_absolute":
        topic, kind = str(params["pose_target_topic"]), POSE
    else:
        # The first command group (a two-arm robot's left arm) stands for all: the node
        # publishes every group in the same tick.
        topic, kind = robot.commands[0].topic, STEP
    return Setup(model, placed.simulator, files, params, space, topic, kind)


@dataclass
class Run:
    """What one model's run measured."""

    setup: Setup
    arm: list[ArmMessage] = field(default_factory=list)
    states: list[tuple[float, list[float]]] = field(default_factory=list)
    goal: tuple[float, float] = (0.0, 0.0)  # first step → result
    goal_sent: float = 0.0
    goal_reason: str = ""
    goal_message: str = ""  # why the goal stopped early, if it did
    cancels: list[tuple[float, float]] = field(default_factory=list)  # cancel → window end
    # The results of cancelled goals that something else ended first.
    ended_otherwise: list[str] = field(default_factory=list)


def _start(ctx: Context, setup: Setup, namespace: str) -> Launcher:
    from sequence_ai_lab.demo.launcher import Launcher, ProcessSpec, bring_up, ros_arguments
    from sequence_ai_ros.params.launch import node_path

    overrides: dict[str, str] = {}
    if setup.simulator == "sim_robot":
        from sequence_ai_lab.robots.sim_robot.robot import light_feed_overrides

        views = tuple(str(v) for v in setup.parameters["camera_views"])
        overrides = light_feed_overrides("raw", SIM_ROBOT_FPS, views)
    sim_args = ros_arguments(setup.simulator, namespace, overrides=overrides)
    node_args = ros_arguments(
        "sequence_ai", namespace, tuple(str(ROOT / f) for f in setup.params_files),
        {"model": setup.model, "base_url": ctx.gateway.url},
    )
    launcher = Launcher([
        ProcessSpec(f"{namespace}-{setup.simulator}", setup.simulator, sim_args),
        ProcessSpec(f"{namespace}-node", "sequence_ai_node", node_args,
                    env={"SEQUENCES_API_KEY": ctx.gateway.api_key}),
    ], log_dir=ctx.log_dir)
    try:
        launcher.start()
        bring_up(node_path(namespace), timeout_s=60.0)
    except BaseException:
        launcher.stop(grace_s=5.0)
        raise
    return launcher


def _record_states(probe: RosProbe, robot: DemoRobot, topic: str,
                   into: list[tuple[float, list[float]]]) -> None:
    from rclpy.qos import qos_profile_sensor_data

    from sequence_ai_lab.demo.robots import message_class

    def on_state(msg: object) -> None:
        values = robot.read_state(msg)
        if values is not None:
            into.append((time.monotonic(), [float(v) for v in values]))

    probe.node.create_subscription(
        message_class(robot.state_message), topic, on_state, qos_profile_sensor_data
    )


def _until(condition: Callable[[], bool], timeout_s: float, what: str) -> float:
    """Poll `condition` (every 10 ms); the monotonic time it held first."""
    deadline = time.monotonic() + timeout_s
    while not condition():
        if time.monotonic() > deadline:
            raise RuntimeError(f"{what}: not within {timeout_s:g} s")
        time.sleep(0.01)
    return time.monotonic()


def _moving(goal: SentGoal) -> Callable[[], bool]:
    return lambda: goal.done() or any(f.actions > 0 for f in list(goal.feedback))


def measure(ctx: Context, setup: Setup, goal_s: float, cancels: int) -> Run:
    from bench.ros_rig import RosProbe, start_command_timer, stop_command_timer, unique_namespace
    from sequence_ai_lab.demo.robots import robot_for

    robot = robot_for(setup.model)
    run = Run(setup)
    namespace = unique_namespace(f"models_{setup.model.replace('-', '_')}")
    probe = RosProbe()
    launcher: Launcher | None = None
    timer: tuple[subprocess.Popen, Path] | None = None
    try:
        log(f"models: {setup.model} on {setup.simulator} ({', '.join(setup.params_files)})")
        launcher = _start(ctx, setup, namespace)
        _record_states(probe, robot, f"/{namespace}/{robot.state_topic}", run.states)
        timer = start_command_timer(ctx, namespace, setup.topic, setup.kind)
        _until(lambda: bool(run.states), 30.0, f"{robot.state_what} of {setup.model}")
        # The timer's subscription and the probe's action client match the node's endpoints
        # (discovery is slow on a loaded machine: a goal response was once lost to it).
        time.sleep(SETTLE_S)
        log(f"models: {setup.model}: a {goal_s:g} s goal")
        run.goal_sent = time.monotonic()
        goal = probe.send_goal(_Robot(namespace), INSTRUCTIONS[0], goal_s)
        if not goal.accepted:
            raise RuntimeError(f"{setup.model}: the goal was rejected (see the node's log)")
        moved = _until(_moving(goal), 60.0, f"{setup.model}: a first step")
        _, result = goal.result(goal_s + 60.0)
        run.goal = (moved, time.monotonic())
        run.goal_reason = f"{result.reason} ({result.elapsed_s:.1f} s, {result.actions} steps)"
        if result.reason not in RAN_OUT:
            run.goal_message = f"{result.reason}: {result.message}"
        for trial in range(cancels):
            time.sleep(1.0)
            goal = probe.send_goal(
                _Robot(namespace), INSTRUCTIONS[(trial + 1) % len(INSTRUCTIONS)], 60.0
            )
            _until(_moving(goal), 60.0, f"{setup.model}: a first step")
            time.sleep(ctx.rng.uniform(0.5, 1.5))
            at = time.monotonic()
            if not goal.done():
                goal.cancel()
            _, result = goal.result(60.0)
            log(f"models: {setup.model}: cancel {trial + 1}: {result.reason}")
            time.sleep(AFTER_STOP_S)
            # Only the goals the cancel ended (one can end otherwise first: a refusal, say).
            if result.reason == CANCELLED:
                run.cancels.append((at, time.monotonic()))
            else:
                run.ended_otherwise.append(str(result.reason))
    finally:
        if timer is not None:
            run.arm = [ArmMessage.of(r) for r in stop_command_timer(*timer)]
        if launcher is not None:
            launcher.stop(grace_s=10.0)
        probe.close()
    return run


@dataclass(frozen=True)
class _Robot:
    """The namespace RosProbe.send_goal takes its action's name from."""

    namespace: str

    def topic(self, name: str) -> str:
        return f"/{self.namespace}/{name}"


# ----- the gate's cost per step (no ROS transport) -----


class _Inputs:
    """Joints where the loop puts them (none for an ee model) and fresh cameras."""

    def __init__(self, views: Sequence[str], joints: Sequence[float] = ()) -> None:
        self.positions = list(joints)
        self._views = tuple(views)

    def joints(self, max_age_s: float) -> Any:
        from sequence_ai_ros.core.readings import JointSnapshot

        gripper = [0.0] if self.positions else None
        return JointSnapshot(list(self.positions), gripper, 0.0)

    def ages(self) -> dict[str, float | None]:
        return {view: 0.0 for view in self._views}


class _Quiet:
    def warning(self, message: str) -> None:
        raise AssertionError(message)

    def error(self, message: str) -> None:
        raise AssertionError(message)


@dataclass
class GateCost:
    """Microseconds per step of each stage."""

    lookup: list[float] = field(default_factory=list)
    check: list[float] = field(default_factory=list)
    publish: list[float] = field(default_factory=list)

    def add(self, t0: float, t1: float, t2: float, t3: float) -> None:
        self.lookup.append((t1 - t0) * 1e6)
        self.check.append((t2 - t1) * 1e6)
        self.publish.append((t3 - t2) * 1e6)

    def step(self) -> list[float]:
        return [c + p for c, p in zip(self.check, self.publish)]


def _cartesian_rules(setup: Setup) -> Any:
    from sequence_ai_ros.core.node_config import NodeConfig
    from sequence_ai_ros.params.spec_table import SPECS
    from sequence_ai_ros.safety.gate import MotionRules

    named = {k: v for k, v in setup.parameters.items() if k in SPECS}
    return MotionRules.from_config(
        NodeConfig.from_values({**{n: s.default for n, s in SPECS.items()}, **named})
    )


def _pose_message(vector: Sequence[float], frame: str) -> Any:
    from geometry_msgs.msg import PoseStamped

    from sequence_ai_ros.core import pose_math

    position, orientation = pose_math.pose_vector_to_pose(list(vector))
    msg = PoseStamped()
    msg.header.frame_id = frame
    msg.pose.position.x, msg.pose.position.y, msg.pose.position.z = position
    q = msg.pose.orientation
    q.x, q.y, q.z, q.w = orientation
    return msg


def cartesian_rows(space: str, k: int) -> tuple[list[float], list[float]]:
    """(the measured pose vector before step k, the row of step k) of a slow circle in the
    simulated arm's workspace, the hand pointing down: a twist (unitless) or a pose target."""
    angle = 2 * math.pi * k / 100
    pose = [0.5 + 0.1 * math.cos(angle), 0.1 * math.sin(angle), 0.4, math.pi, 0.0, 0.0]
    if space == "ee_delta":
        return pose, [-0.3 * math.sin(angle), 0.3 * math.cos(angle), 0.0, 0.0, 0.0, 0.1, 0.0]
    ahead = 2 * math.pi * (k + 1) / 100
    target = [0.5 + 0.1 * math.cos(ahead), 0.1 * math.sin(ahead), 0.4, math.pi, 0.0, 0.0]
    return pose, [*target, 0.0]


def cartesian_gate_cost(setup: Setup, hz: float, steps: int) -> GateCost:
    """Per step: the measured pose from the pose source the node runs here (ee_pose_topic;
    tf2_ros does not import on this machine), the gate's check, its publish."""
    from sequence_ai_ros.core.command_kinds import Interface
    from sequence_ai_ros.inputs.pose_source import TopicPoses
    from sequence_ai_ros.safety.cartesian_space import CartesianSpace
    from sequence_ai_ros.safety.gate import ArmGate

    now = [1000.0]
    clock = lambda: now[0]  # noqa: E731 - the gate's and the pose's one fake clock
    frame = str(setup.parameters["base_frame"])
    poses = TopicPoses(frame, str(setup.parameters["ee_pose_topic"]), clock=clock)
    space = CartesianSpace(setup.space, poses, 1.0 / hz)
    interface = Interface.VELOCITY if setup.space == "ee_delta" else Interface.POSITION
    max_age = float(setup.parameters["max_pose_age_s"])
    gate = ArmGate(NullOutput(interface), _Inputs(setup.parameters["camera_views"]), joints=0,
                   period_s=1.0 / hz, log=_Quiet(), clock=clock, space=space)
    gate.begin_goal(_cartesian_rules(setup))
    cost = GateCost()
    for k in range(steps):
        measured, row = cartesian_rows(setup.space, k)
        poses.store(_pose_message(measured, frame))
        t0 = time.perf_counter()
        poses.pose(max_age)
        t1 = time.perf_counter()
        reason = gate.check(row)
        t2 = time.perf_counter()
        gate.publish(row)
        t3 = time.perf_counter()
        if reason is not None:
            raise AssertionError(f"{setup.model} step {k}: {reason}")
        cost.add(t0, t1, t2, t3)
        now[0] += 1.0 / hz
    gate.end_goal()
    return cost


def joint_gate_cost(steps: int) -> GateCost:
    """bench/bringup.py's joint step (config/droid.yaml's Panda limits on), split like the
    Cartesian path: the joints' snapshot, the check, the publish."""
    from bench.bringup import PERIOD_S, VIEWS, _rules, _sway
    from sequence_ai_ros.core.command_kinds import Interface
    from sequence_ai_ros.safety.gate import ArmGate

    now = [1000.0]
    inputs = _Inputs(VIEWS, _sway(0))
    gate = ArmGate(NullOutput(Interface.POSITION), inputs, joints=7, period_s=PERIOD_S,
                   log=_Quiet(), clock=lambda: now[0])
    gate.begin_goal(_rules(True))
    cost = GateCost()
    for k in range(1, steps + 1):
        row = [*_sway(k), 0.0]
        t0 = time.perf_counter()
        inputs.joints(0.25)
        t1 = time.perf_counter()
        reason = gate.check(row)
        t2 = time.perf_counter()
        gate.publish(row)
        t3 = time.perf_counter()
        if reason is not None:
            raise AssertionError(f"joint step {k}: {reason}")
        cost.add(t0, t1, t2, t3)
        now[0] += PERIOD_S
        inputs.positions = row[:7]
    gate.end_goal()
    return cost


# ----- the tables -----


def _catalogue_hz(ctx: Context, model: str) -> float:
    hz = ctx.models[model].control_hz
    if not hz:
        raise RuntimeError(f"{model}: the catalogue row has no control_hz")
    return float(hz)


def _us(values: Sequence[float]) -> str:
    summary = Summary.of(values)
    return f"{fmt(summary.median, 1)} / {fmt(summary.p99, 1)}"


def _ms_pair(values: Sequence[float]) -> str:
    summary = Summary.of(values)
    return f"{fmt(summary.median * 1e3, 1)} / {fmt(summary.p99 * 1e3, 1)} ({summary.n})"


def model_row(ctx: Context, run: Run) -> list[str]:
    from sequence_ai_lab.demo.robots import robot_for

    setup = run.setup
    robot = robot_for(setup.model)
    hz = _catalogue_hz(ctx, setup.model)
    stamps = goal_stamps(run.arm, run.goal)
    target = robot.instruction_target(INSTRUCTIONS[0])
    start = robot.distance(state_at(run.states, run.goal_sent), target)
    end = robot.distance(state_at(run.states, run.goal[1]), target)
    holds = [hold_at(setup.kind, run.arm, w, run.states) for w in run.cancels]
    stops = [h - w[0] if h is not None else math.inf for h, w in zip(holds, run.cancels)]
    stop = Summary.of(stops)
    message = {STEP: "Float64MultiArray", TWIST: "TwistStamped", POSE: "PoseStamped"}
    return [
        f"{setup.model} ({setup.simulator}; {setup.space}: {message[setup.kind]} on "
        f"`{setup.topic}`)",
        fmt(hz, 0),
        f"{fmt(rate_per_s(stamps), 1)} ({len(stamps)})",
        _ms_pair(intervals(stamps)),
        f"{fmt(start, 3)} → {fmt(end, 3)} {robot.unit}",
        run.goal_reason,
        f"{fmt(stop.median * 1e3, 1)} / {fmt(stop.max * 1e3, 1)} ({stop.n})",
        fmt(stop.max * hz, 2),
    ]


def cost_rows(ctx: Context, setups: Sequence[Setup], steps: int) -> list[list[str]]:
    rows = []
    for label, cost in [
        ("joint (pi05-droid: 7 joints, config/droid.yaml's Panda limits)", joint_gate_cost(steps)),
        *((f"{s.model} ({s.space}: {s.params_files[0]})",
           cartesian_gate_cost(s, _catalogue_hz(ctx, s.model), steps))
          for s in setups if s.space in ("ee_delta", "ee_absolute")),
    ]:
        rows.append([label, str(len(cost.check)), _us(cost.lookup), _us(cost.check),
                     _us(cost.publish), _us(cost.step())])
    return rows


def run(ctx: Context) -> Section:
    from sequence_ai_lab.demo.robots import robot_for

    goal_s = ctx.pick(GOAL_S, QUICK_GOAL_S)
    models = ctx.pick(MODELS, QUICK_MODELS)
    cancels = ctx.pick(3, 1)
    loads = [load_average()]
    missing = [m for m in MODELS if m not in ctx.models]
    if missing:
        raise RuntimeError(f"the gateway's catalogue lacks {missing}")
    setups = {m: setup_of(ctx, m, robot_for(m)) for m in MODELS}
    ctx.latency(LATENCY_MS)
    rows, ended, stopped = [], [], []
    for model in models:
        measured = measure(ctx, setups[model], goal_s, cancels)
        rows.append(model_row(ctx, measured))
        if measured.goal_message:
            stopped.append(f"{model}: {measured.goal_message}")
        if measured.ended_otherwise:
            ended.append(f"{model}: {', '.join(measured.ended_otherwise)}")
    loads.append(load_average())
    command = ctx.command("models")
    steps = ctx.pick(3000, 300)
    costs = cost_rows(ctx, list(setups.values()), steps)
    loads.append(load_average())
    return Section(
        "models",
        "Every catalogue model through the node on its simulator",
        intro=__doc__.split("\n\n", 1)[1].strip(),
        tables=[
            Table(
                f"Each model's goals on its simulator ({goal_s:g} s goal, then cancelled goals)",
                ["model (simulator; action space: command on topic)", "catalogue Hz",
                 "commands/s during the goal (n)", "command period p50 / p99 ms (intervals)",
                 f"distance to the target at the goal's start → end ({goal_s:g} s)",
                 "goal result", "cancel → first hold p50 / max ms (cancels)",
                 "max / control period"],
                rows, command,
                note=(
                    f"Instruction {INSTRUCTIONS[0]!r}; gateway latency median "
                    f"{LATENCY_MS:g} ms (lognormal, sigma 0.3). Commands are timed on arrival "
                    "by bench/command_timer.py on the command topic (a two-arm robot's left "
                    "arm controller: the node publishes every group in the same tick); the "
                    "rate and the periods run from the goal's first step (its first feedback) "
                    "to its result, without the first and last interval. The distance is the "
                    "demo's: Euclidean over the target's channels (joint models: the arm "
                    "joints, rad; Cartesian: the end-effector position from `ee_pose`, m), "
                    "measured at the goal's sending and at its result. Cancelled goals: a new "
                    "instruction each, cancelled 0.5-1.5 s after their first step. A hold is "
                    "detected on the receiver's side: joints, the first command after the "
                    "cancel that every later one repeats (the hold and its idle republish, as "
                    "the stop sections detect it); ee_delta, the first zero twist; "
                    "ee_absolute, the first pose target that every later one repeats and whose "
                    f"position is within {HOLD_POSE_M * 1e3:g} mm of the newest measured "
                    "`ee_pose` at its arrival. sim_robot runs as the light camera feed "
                    f"(premade frames, {SIM_ROBOT_FPS:g} Hz); sim_bimanual and sim_cartesian "
                    "render their own. The goal's result: its reason (elapsed, steps sent); "
                    f"those that ended otherwise: {'; '.join(stopped) or 'none'}. Cancelled "
                    "goals that ended otherwise first (their result), left out: "
                    f"{', '.join(ended) or 'none'}. Load average (1, 5, 15 min) at the start: "
                    f"{loads[0]}; after the runs: {loads[1]}."
                ),
            ),
            Table(
                "The gate's cost per step, µs p50 / p99 (in-process, no-op output)",
                ["path", "steps", "measurement lookup", "gate check", "publish (checks again)",
                 "step (check + publish)"],
                costs, command,
                note=(
                    "The measurement lookup is the joints' snapshot (joint path) or the "
                    "end-effector pose from the pose source that runs on this machine "
                    "(`ee_pose_topic`: tf2_ros does not import here), its age and frame "
                    "checked; the check and the publish each look the measurement up again, "
                    "as the node's gate does. Rows: the joint path sways ±0.3 rad as "
                    "bench/bringup.py's; the Cartesian paths a slow circle in the workspace "
                    "(a unitless twist or the next pose target). Load average (1, 5, 15 min) "
                    f"at the end: {loads[2]}."
                ),
            ),
        ],
    )
