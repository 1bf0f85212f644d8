"""Section world: what sim_robot's physics world costs, and the node's period beside it.

In a child process (MuJoCo's EGL renderer wants MUJOCO_GL set before MuJoCo is imported): the
physics step (the arm driven along a sway, the cup and the block on the table) and its real-time
factor, then one 1280×720 frame of each view from the numpy renderer and from MuJoCo's, drawn at
a quarter size and upscaled as sim_robot does (`render_scale` 4), each frame at a new arm pose.
Then sim_robot (two of DROID's views at 15 Hz, frames drawn from the world) beside the node, once
with `physics: kinematic` and once with `physics: mujoco`: the command interval where the
commands arrive and both processes' CPU.

    python bench/world.py --costs SECONDS FRAMES   # the child: prints one JSON line
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
# Run as a script (the child): the repo root and test/ (bench.common's gateway fixture) on the path.
if __name__ == "__main__":
    sys.path[:0] = [p for p in (str(ROOT), str(ROOT / "test")) if p not in sys.path]

from bench.common import PI05, Context, log  # noqa: E402 - after the path, run as a script
from bench.report import Section, Table  # noqa: E402
from bench.stats import Summary, fmt  # noqa: E402

VIEWS = ("exterior_1", "wrist_left")
FPS = 15.0
LATENCY_MS = 200.0
COMMAND_TOPIC = "forward_position_controller/commands"
WIDTH, HEIGHT, SCALE = 1280, 720, 4


def _costs(seconds: float, frames: int) -> dict[str, Any]:
    """The child's measurements (MUJOCO_GL set by the caller)."""
    import numpy as np

    from sequence_ai_lab.robots.shared.arm import HOME
    from sequence_ai_lab.robots.shared.render import VIEWS as ALL_VIEWS
    from sequence_ai_lab.robots.shared.render import SceneRenderer
    from sequence_ai_lab.robots.sim_robot.world import World, WorldOptions

    world = World(WorldOptions())
    physics = world.physics
    assert physics is not None
    steps = round(seconds / physics.timestep)
    start = time.perf_counter()
    physics.step(steps)  # MuJoCo alone: the arm holding, the objects resting
    step_s = (time.perf_counter() - start) / steps
    world.reset()
    period = 0.01  # sim_robot's joint loop at 100 Hz: one command per 5 steps
    start = time.perf_counter()
    for k in range(round(seconds / period)):
        world.arm.command_positions(HOME + 0.3 * np.sin(2 * np.pi * 0.25 * k * period))
        world.advance(period)
    wall = time.perf_counter() - start
    out: dict[str, Any] = {
        "physics_hz": 1.0 / physics.timestep,
        "step_us": step_s * 1e6,
        "world_step_us": wall / steps * 1e6,
        "realtime_factor": seconds / wall,
    }
    poses = [HOME + 0.2 * np.sin(0.7 * k + np.arange(7)) for k in range(frames)]

    def qpos_at(q: np.ndarray) -> np.ndarray:
        qpos = physics.data.qpos.copy()
        qpos[physics.index.arm_qpos] = q
        return qpos

    for view in ALL_VIEWS:
        numpy_renderer = SceneRenderer(view, WIDTH, HEIGHT, SCALE)
        frame = np.zeros((HEIGHT, WIDTH, 3), dtype=np.uint8)
        objects = world.object_poses()
        numpy_renderer.render(HOME, 0.0, out=frame, objects=objects)  # warm
        start = time.perf_counter()
        for q in poses:
            numpy_renderer.render(q, 0.0, out=frame, objects=objects)
        out[f"numpy_ms_{view}"] = (time.perf_counter() - start) / frames * 1e3
        try:
            from sequence_ai_lab.robots.sim_robot.render_mujoco import MujocoView

            mujoco_view = MujocoView(physics.model, view, WIDTH, HEIGHT, SCALE)
        except Exception as exc:  # noqa: BLE001 - no OpenGL here: reported, not fatal
            out["mujoco_error"] = f"{type(exc).__name__}: {exc}"
            continue
        mujoco_view.render(qpos_at(HOME), frame)  # the first frame also builds the context
        start = time.perf_counter()
        for q in poses:
            mujoco_view.render(qpos_at(q), frame)
        out[f"mujoco_ms_{view}"] = (time.perf_counter() - start) / frames * 1e3
        mujoco_view.close()
    return out


def _child_costs(seconds: float, frames: int) -> dict[str, Any]:
    env = {**os.environ, "MUJOCO_GL": "egl"}
    completed = subprocess.run(
        [sys.executable, str(Path(__file__)), "--costs", str(seconds), str(frames)],
        capture_output=True, text=True, env=env, timeout=600, check=False,
    )  # fmt: skip
    lines = [line for line in completed.stdout.splitlines() if line.startswith("{")]
    if completed.returncode != 0 or not lines:
        raise RuntimeError(f"bench/world.py --costs failed: {completed.stderr[-2000:]}")
    return dict(json.loads(lines[-1]))


def _beside(ctx: Context, physics: str, goal_s: float) -> dict[str, Any]:
    """sim_robot with `physics` and the node running one goal: intervals and CPU."""
    from bench.node_e2e import _cpu, _shares
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
    timer = None
    times = Path()
    commands: list[float] = []
    shares: dict[str, float] = {}
    try:
        namespace = unique_namespace(f"world_{physics}")
        log(f"world: sim_robot ({physics} physics, rendered frames) and the node")
        robot = start_robot(
            ctx, namespace, model=PI05, views=VIEWS, fps=FPS,
            sim_overrides={"physics": physics, "camera_frames": "rendered"},
        )  # fmt: skip
        robots.append(robot)
        timer, times = start_command_timer(ctx, namespace, COMMAND_TOPIC)
        probe.wait_for_joint_states(robot)
        time.sleep(1.0)
        pids = {
            "node": robot.pid(f"{namespace}-node"),
            "sim_robot": robot.pid(f"{namespace}-sim_robot"),
        }
        before, t0 = _cpu(pids), time.monotonic()
        goal = probe.send_goal(robot, "pick up the cup", goal_s)
        goal.result(goal_s + 60.0)
        shares = _shares(before, _cpu(pids), time.monotonic() - t0)
    finally:
        if timer is not None:
            commands = [float(c["t"]) for c in stop_command_timer(timer, times)]
        stop_robots(robots)
        probe.close()
    intervals = [(b - a) * 1e3 for a, b in list(zip(commands, commands[1:]))[1:-1]]
    return {"intervals_ms": intervals, "cpu": shares}


def run(ctx: Context) -> Section:
    seconds, frames = ctx.pick(10.0, 2.0), ctx.pick(40, 8)
    goal_s = ctx.pick(20.0, 5.0)
    section = Section(
        "world",
        "The physics world: its step, its cameras, the node beside it",
        intro=(
            "sim_robot's world (sequence_ai_lab/robots/sim_robot/world.py): MuJoCo with "
            "robosuite's Panda and "
            "hand under a joint impedance, a table, a cup and a block; docs/sim.md describes it. "
            f"Physics over {seconds:g} s of world time, the arm swaying (one command per 10 ms, "
            f"as sim_robot's joint loop gives it); {frames} frames per view and renderer at "
            f"{WIDTH}×{HEIGHT} drawn at 1/{SCALE} size and upscaled, each at a new arm pose; "
            f"then sim_robot with {', '.join(VIEWS)} at {FPS:g} Hz (frames drawn from the world, "
            f"numpy renderer) beside the node (pi05-droid, config/droid.yaml, gateway latency "
            f"{LATENCY_MS / 1000:g} s) for one {goal_s:g} s goal, kinematic then MuJoCo: the "
            "interval between commands where a subscriber receives them (bench/command_timer.py) "
            "and each process's CPU (user+system, share of one core)."
        ),
    )
    costs = _child_costs(seconds, frames)
    rows = [
        ["MuJoCo step, mj_step alone (µs)", fmt(costs["step_us"], 1)],
        ["world step: mj_step, the commanded arm, the judge (µs)", fmt(costs["world_step_us"], 1)],
        ["real-time factor of the world (world s per wall s)", fmt(costs["realtime_factor"], 1)],
    ]
    for renderer in ("numpy", "mujoco"):
        for view in ("exterior_1", "exterior_2", "wrist_left"):
            key = f"{renderer}_ms_{view}"
            rows.append([f"{renderer} renderer, {view} (ms per frame)", fmt(costs.get(key), 1)])
    section.tables.append(Table(
        f"Physics at {costs['physics_hz']:g} Hz and a 1280×720 frame per view",
        ["figure", "value"], rows, ctx.command("world"),
        note=costs.get("mujoco_error", ""),
    ))  # fmt: skip
    try:
        import bench.ros_rig  # noqa: F401 - needs the ROS workspace
    except ImportError as exc:
        section.notes.append(f"node beside the world not measured: {exc}")
        return section
    ctx.latency(LATENCY_MS)
    measured = {physics: _beside(ctx, physics, goal_s) for physics in ("kinematic", "mujoco")}
    rows = []
    for physics, m in measured.items():
        summary = Summary.of(m["intervals_ms"])
        rows.append([
            physics, str(summary.n), fmt(summary.median, 1), fmt(summary.p99, 1),
            fmt(summary.max, 1), f"{100 * m['cpu'].get('sim_robot', float('nan')):.0f} %",
            f"{100 * m['cpu'].get('node', float('nan')):.0f} %",
        ])  # fmt: skip
    section.tables.append(Table(
        f"The node's command interval (target {1000 / 15:.1f} ms) beside sim_robot",
        ["physics", "intervals", "median ms", "p99 ms", "max ms", "sim_robot CPU", "node CPU"],
        rows, ctx.command("world"),
    ))  # fmt: skip
    return section


if __name__ == "__main__":
    if len(sys.argv) == 4 and sys.argv[1] == "--costs":
        print(json.dumps(_costs(float(sys.argv[2]), int(sys.argv[3]))), flush=True)
    else:
        sys.exit(f"usage: {sys.argv[0]} --costs SECONDS FRAMES (make bench runs the section)")
