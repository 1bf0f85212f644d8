"""Section gateway_vision: what looking costs the simulated DROID models per request.

In-process, the code a /v1/act request runs on the gateway's worker for pi05-droid and cosmos3:
decoding the JPEG views (§1.10's checks, which every model pays), then the vision (colour
segmentation of each view, rays through the calibrated cameras, triangulation), then the plan
and the Panda IK of the chunk's rows. Frames are the sim's renders with the cup in view, with
Gaussian sensor noise, JPEG q95, at DROID's 1280x720 and at each model's training size.

Then the models closed loop in the physics world (sequence_ai_lab/robots/sim_robot/world.py,
MuJoCo): frames drawn by the numpy renderer at the world's poses, each chunk's open-loop rows
played one control period each as position targets, no latency: whether the world's judge says
the task succeeded.
"""

from __future__ import annotations

import base64
import time
from typing import Any

import numpy as np

from bench.common import Context, jpeg_bytes, log, noisy, rendered_frame
from bench.report import Section, Table
from bench.stats import Summary, fmt
from sequence_ai_gateway.models.observations import Frame, decode_frame
from sequence_ai_gateway.models.vision_policies import LookingCosmos3Droid, LookingPi05Droid
from sequence_ai_gateway.policies import PolicyObservation

HOME = [0.0, -0.785, 0.0, -2.356, 0.0, 1.571, 0.785]
NOISE_SIGMA = 3.0
TASK = "put the cup on the blue block"
TRIAL_S = 30.0


def _frames(views: tuple[str, ...], width: int) -> dict[str, str]:
    return {
        view: base64.b64encode(
            jpeg_bytes(noisy(rendered_frame(view, 1280, 720), NOISE_SIGMA), width)
        ).decode("ascii")
        for view in views
    }


def _measure(policy: Any, frames: dict[str, str], reps: int) -> list[Summary]:
    """Decode, vision, and the whole chunk (vision + plan + IK): ms per request."""
    row = policy.row
    decode, vision, chunk = [], [], []
    q = np.array(HOME)
    for _ in range(reps + 1):
        t0 = time.perf_counter()
        images = {view: decode_frame(row, Frame(view, data)) for view, data in frames.items()}
        t1 = time.perf_counter()
        observation = PolicyObservation("pick up the cup", list(HOME), [0.0], images)
        scene = policy.scene(observation, q, np.zeros(3), 0.0)
        t2 = time.perf_counter()
        policy.chunk(observation)
        t3 = time.perf_counter()
        if scene.cup is None:
            raise RuntimeError(f"{row['id']}: the cup is not seen in the bench's frames")
        decode.append(t1 - t0)
        vision.append(t2 - t1)
        chunk.append(t3 - t2)
    # The first request warms caches (numpy, Pillow): not a request a worker repeats.
    return [Summary.of(s[1:]).scaled(1000.0) for s in (decode, vision, chunk)]


def _trial(policy: Any, seed: int) -> float | None:
    """Seconds of world time to the judge's success for layout ``seed``, None without it."""
    from PIL import Image

    from sequence_ai_lab.robots.shared.render import VIEWS, SceneRenderer
    from sequence_ai_lab.robots.sim_robot.world import World, WorldOptions

    world = World(WorldOptions(layout_seed=seed, task=TASK))
    renderers = {view: SceneRenderer(view, 640, 360, scale=2) for view in VIEWS}
    horizon = policy.row["open_loop_horizon"] or policy.row["action_horizon"]
    delta = policy.row["action_space"] == "joint_delta"
    period = 1.0 / float(policy.row["control_hz"])
    while world.trial_s < TRIAL_S:
        q, gripper = world.q, world.gripper
        images = {
            view: Image.fromarray(r.render(q, gripper, objects=world.object_poses()).copy())
            for view, r in renderers.items()
        }
        rows = policy.steps(PolicyObservation(TASK, list(q), [gripper], images, seed=seed))
        for row in rows[:horizon]:
            world.arm.command_positions(q + np.array(row[:7]) if delta else np.array(row[:7]))
            world.arm.command_gripper(row[7])
            world.advance(period)
        state = world.state()
        if state.success:
            return state.success_s
    return None


def run(ctx: Context) -> Section:
    reps = ctx.pick(40, 5)
    section = Section(
        "gateway_vision",
        "Gateway: the simulated DROID models' vision",
        intro=(
            f"{__doc__.split(chr(10) + chr(10), 1)[1].strip()} {reps} requests per row; ms per "
            "request (all views), median and p99. 'chunk' is vision + plan + IK for the whole "
            "chunk (15 rows for pi05-droid, 32 for cosmos3)."
        ),
    )
    rows = []
    for policy in (LookingPi05Droid(), LookingCosmos3Droid()):
        views = tuple(policy.row["camera_views"])
        trained = int(policy.row["training_frame_size"][0])
        for width in (1280, trained):
            log(f"gateway vision: {policy.row['id']} {len(views)} views at width {width}")
            frames = _frames(views, width)
            decode, vision, chunk = _measure(policy, frames, reps)
            rows.append(
                [
                    policy.row["id"].rsplit("/", 1)[-1],
                    f"{width}×{width * 9 // 16}",
                    str(len(views)),
                    fmt(decode.median),
                    fmt(decode.p99),
                    fmt(vision.median),
                    fmt(vision.p99),
                    fmt(chunk.median),
                    fmt(chunk.p99),
                ]
            )
    section.tables.append(
        Table(
            "Per request",
            ["model", "frame", "views", "decode ms", "p99", "vision ms", "p99", "chunk ms", "p99"],
            rows,
            ctx.command("gateway_vision"),
        )
    )
    seeds = ctx.pick(10, 2)
    outcomes = []
    for policy in (LookingPi05Droid(), LookingCosmos3Droid()):
        log(f"gateway vision: {policy.row['id']} in the physics world, {seeds} seeds")
        done = [t for t in (_trial(policy, seed) for seed in range(seeds)) if t is not None]
        outcomes.append(
            [
                policy.row["id"].rsplit("/", 1)[-1],
                f"0-{seeds - 1}",
                f"{len(done)}/{seeds}",
                fmt(float(np.median(done)), 1) if done else "-",
                fmt(max(done), 1) if done else "-",
            ]
        )
    section.tables.append(
        Table(
            f"'{TASK}' in the physics world, no latency",
            ["model", "layout seeds", "succeeded", "median s to success", "max s"],
            outcomes,
            ctx.command("gateway_vision"),
        )
    )
    return section
