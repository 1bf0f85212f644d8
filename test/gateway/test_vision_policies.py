"""The looking DROID models (pi05-droid, cosmos3) on frames drawn by the sim's numpy renderer:
the calibration agrees with the renderer, the target follows the cup, a swapped or blank view
changes what the model does, an unseen cup is a hold, and played closed loop the rows grasp,
lift and place."""

from __future__ import annotations

import base64
import inspect
import io
from typing import Dict, List, Sequence, Tuple

import pytest

pytest.importorskip("fastapi")

import numpy as np  # noqa: E402
from PIL import Image  # noqa: E402
from support.gateway_support import PI05, act_body, client  # noqa: E402

from sequence_ai_gateway.droid import cameras, kinematics  # noqa: E402
from sequence_ai_gateway.models import scene_vision  # noqa: E402
from sequence_ai_gateway.models.vision_policies import (  # noqa: E402
    LookingCosmos3Droid,
    LookingPi05Droid,
)
from sequence_ai_gateway.policies import PolicyObservation  # noqa: E402
from sequence_ai_lab.robots.shared import render  # noqa: E402

HOME = [0.0, -0.785, 0.0, -2.356, 0.0, 1.571, 0.785]
BLOCK = (0.5, -0.22)
PI05_POLICY = LookingPi05Droid()
COSMOS3_POLICY = LookingCosmos3Droid()
_RENDERERS = {view: render.SceneRenderer(view) for view in render.VIEWS}


def frames(
    monkeypatch: pytest.MonkeyPatch,
    q: Sequence[float],
    gripper: float,
    cup: Tuple[float, float, float],
    block: Tuple[float, float] = BLOCK,
) -> Dict[str, Image.Image]:
    """The three 1280x720 views with the cup's bottom centre and the block at the given places."""
    if "objects" in inspect.signature(render.SceneRenderer.render).parameters:
        # The physics world's renderer: objects drawn at their 4x4 poses (centres).
        objects = {
            "cup": _pose((cup[0], cup[1], cup[2] + scene_vision.CUP_HEIGHT / 2)),
            "block": _pose((block[0], block[1], scene_vision.BLOCK_HEIGHT / 2)),
        }
        return {
            view: Image.fromarray(r.render(np.array(q), gripper, objects=objects).copy())
            for view, r in _RENDERERS.items()
        }
    # The kinematic scene's renderer: the cup's and block's bottom centres are module constants.
    monkeypatch.setattr(render, "CUP_CENTER", np.array(cup, dtype=float))
    monkeypatch.setattr(render, "BLOCK_CENTER", np.array([*block, 0.0]))
    return {
        view: Image.fromarray(r.render(np.array(q), gripper).copy())
        for view, r in _RENDERERS.items()
    }


def _pose(centre: Tuple[float, float, float]) -> np.ndarray:
    pose = np.eye(4)
    pose[:3, 3] = centre
    return pose


def observe(
    images: Dict[str, Image.Image],
    q: Sequence[float] = HOME,
    gripper: float = 0.0,
    instruction: str = "pick up the cup",
    seed: int = 0,
) -> PolicyObservation:
    return PolicyObservation(instruction, list(q), [gripper], images, seed=seed)


def joints_of(policy: LookingPi05Droid, q: Sequence[float], rows: List[List[float]]):
    """Absolute joint targets of the rows (pi05: q_reference + delta)."""
    if policy.row["action_space"] == "joint_delta":
        return [np.array(q) + np.array(r[:7]) for r in rows]
    return [np.array(r[:7]) for r in rows]


def tcp(q: Sequence[float]) -> np.ndarray:
    return kinematics.tcp_pose(q)[:3, 3]


@pytest.mark.parametrize("view", render.VIEWS)
def test_calibration_agrees_with_the_sims_renderer(view):
    renderer = render.SceneRenderer(view)
    q = np.array(HOME) + 0.2
    renderer.render(q, 0.0)  # poses the wrist camera from the joints
    flange = kinematics.flange_pose(q)
    camera = cameras.posed_camera(view, *render.IMAGE_SIZE, flange=flange)
    assert camera.eye == pytest.approx(renderer.camera.eye, abs=1e-9)
    assert camera.rotation == pytest.approx(renderer.camera.rotation, abs=1e-9)
    # The renderer draws at a quarter of the frame and repeats pixels: same rays, 4x the focal.
    scale = render.IMAGE_SIZE[0] / renderer.camera.width
    points = np.array([[0.55, 0.18, 0.05], [0.4, -0.2, 0.0], [0.6, 0.0, 0.1]])
    ahead = renderer.camera.to_camera(points)[:, 2] > 0.05
    ours = camera.project(points[ahead])
    theirs = renderer.camera.project(renderer.camera.to_camera(points[ahead])) * scale
    assert ours == pytest.approx(theirs, abs=1e-6)


@pytest.mark.parametrize("policy", [PI05_POLICY, COSMOS3_POLICY], ids=["pi05", "cosmos3"])
@pytest.mark.parametrize("cup", [(0.45, 0.15), (0.6, -0.05), (0.5, 0.22)])
def test_the_cup_is_located_and_the_chunk_heads_for_it(monkeypatch, policy, cup):
    images = frames(monkeypatch, HOME, 0.0, (*cup, 0.0))
    q = np.array(HOME)
    scene = policy.scene(observe(images), q, tcp(q), 0.0)
    assert scene.cup is not None
    assert scene.cup.centre[:2] == pytest.approx(cup, abs=0.012)
    rows = policy.steps(observe(images))
    end = tcp(joints_of(policy, HOME, rows)[-1])
    start_gap = np.hypot(*(tcp(HOME)[:2] - cup))
    assert np.hypot(*(end[:2] - cup)) < start_gap - 0.05
    assert all(r[7] == 0.0 for r in rows)  # far from the cup: the gripper stays open


def test_a_moved_cup_is_followed_from_the_next_request(monkeypatch):
    ends = []
    for cup in ((0.45, 0.15), (0.6, -0.1)):
        images = frames(monkeypatch, HOME, 0.0, (*cup, 0.0))
        rows = COSMOS3_POLICY.steps(observe(images))
        ends.append(tcp(rows[-1][:7]))
    # cosmos3's 32 rows (2.1 s) get the hand above each cup.
    assert ends[0][:2] == pytest.approx((0.45, 0.15), abs=0.02)
    assert ends[1][:2] == pytest.approx((0.6, -0.1), abs=0.02)


def test_rows_stay_within_the_joint_speed_limits_and_the_value_range(monkeypatch):
    images = frames(monkeypatch, HOME, 0.0, (0.62, 0.22, 0.0))
    dt = 1.0 / 15.0
    for policy in (PI05_POLICY, COSMOS3_POLICY):
        rows = policy.steps(observe(images))
        assert len(rows) == policy.row["action_horizon"] and all(len(r) == 8 for r in rows)
        path = [np.array(HOME)] + joints_of(policy, HOME, rows)
        for a, b in zip(path, path[1:]):
            assert np.all(np.abs(b - a) <= kinematics.VELOCITY_LIMITS * dt + 0.003)
        if policy is PI05_POLICY:
            assert all(-1.0 <= v <= 1.0 for r in rows for v in r)


def test_a_swapped_view_makes_pi05_miss(monkeypatch):
    cup = (0.5, 0.12)
    images = frames(monkeypatch, HOME, 0.0, (*cup, 0.0))
    swapped = {"exterior_1": images["wrist_left"], "wrist_left": images["exterior_1"]}
    q = np.array(HOME)
    right = PI05_POLICY.scene(observe(images), q, tcp(q), 0.0).cup
    wrong = PI05_POLICY.scene(observe(swapped), q, tcp(q), 0.0).cup
    assert right is not None and np.hypot(*(right.centre[:2] - cup)) < 0.012
    assert wrong is None or np.hypot(*(wrong.centre[:2] - cup)) > 0.05
    assert PI05_POLICY.steps(observe(swapped)) != PI05_POLICY.steps(observe(images))


def test_a_blank_view_changes_what_the_model_does(monkeypatch):
    images = frames(monkeypatch, HOME, 0.0, (0.5, 0.12, 0.0))
    blank = dict(images, exterior_1=Image.new("RGB", render.IMAGE_SIZE, (0, 0, 0)))
    q = np.array(HOME)
    both = PI05_POLICY.scene(observe(images), q, tcp(q), 0.0).cup
    wrist_only = PI05_POLICY.scene(observe(blank), q, tcp(q), 0.0).cup
    assert both is not None and both.triangulated
    assert wrist_only is not None and not wrist_only.triangulated
    assert PI05_POLICY.steps(observe(blank)) != PI05_POLICY.steps(observe(images))


@pytest.mark.parametrize("policy", [PI05_POLICY, COSMOS3_POLICY], ids=["pi05", "cosmos3"])
def test_an_unseen_cup_is_a_hold_saying_why(monkeypatch, policy):
    # Far off the table, behind every camera's view; the hand tilted (a hold keeps it so).
    q = [0.3, -0.5, 0.2, -2.0, 0.4, 1.2, 0.0]
    images = frames(monkeypatch, q, 0.0, (-3.0, 0.0, 0.0))
    chunk = policy.chunk(observe(images, q))
    targets = joints_of(policy, q, chunk.rows)
    assert all(np.allclose(t, targets[0]) for t in targets)
    assert np.abs(targets[0] - np.array(q)).max() < 0.01  # the per-chunk noise only
    assert chunk.notes == ["no red cup in any view the model uses: holding in place"]


@pytest.mark.parametrize("policy", [PI05_POLICY, COSMOS3_POLICY], ids=["pi05", "cosmos3"])
def test_an_arm_measured_past_a_joint_limit_is_sent_targets_inside_it(monkeypatch, policy):
    # Joint 4 folded to its lower limit and sagging 0.4 mrad past it (the physics world's
    # arm under gravity): a hold's targets, measured joints plus the deltas, stay inside.
    q = [0.3, -0.5, 0.2, kinematics.LOWER[3] - 0.0004, 0.4, 1.2, 0.0]
    images = frames(monkeypatch, q, 0.0, (-3.0, 0.0, 0.0))
    for seed in range(8):
        targets = joints_of(policy, q, policy.chunk(observe(images, q, seed=seed)).rows)
        assert all(np.all(t >= kinematics.LOWER) and np.all(t <= kinematics.UPPER) for t in targets)


def test_same_frames_state_and_seed_give_the_same_rows(monkeypatch):
    images = frames(monkeypatch, HOME, 0.0, (0.5, 0.12, 0.0))
    rows = PI05_POLICY.steps(observe(images, seed=3))
    assert rows == PI05_POLICY.steps(observe(images, seed=3))
    assert rows != PI05_POLICY.steps(observe(images, seed=4))


def play(
    monkeypatch: pytest.MonkeyPatch,
    policy: LookingPi05Droid,
    instruction: str,
    cup: Tuple[float, float],
    chunks: int,
) -> Tuple[np.ndarray, List[str], List[str]]:
    """A stand-in world: the arm reaches each row's target, the gripper moves 0.13 per row, a
    closed gripper around the cup carries it, an opened one drops it (onto the block when above
    it). Plays the open-loop horizon of each chunk; returns the cup's bottom centre, the phases
    in the order they came (each once per run of it) and the notes."""
    q, gripper = np.array(HOME), 0.0
    cup_at = np.array([*cup, 0.0])
    attached = False
    horizon = policy.row["open_loop_horizon"] or 16
    phases: List[str] = []
    notes: List[str] = []
    for _ in range(chunks):
        observation = observe(
            frames(monkeypatch, q, gripper, tuple(cup_at)), q, gripper, instruction
        )
        plan = policy.decide(observation)
        rows = policy.rows_for(observation, plan)
        phases += [plan.phase] if not phases or phases[-1] != plan.phase else []
        notes += plan.notes
        for target, row in zip(joints_of(policy, q, rows), rows[:horizon]):
            q = target
            gripper += float(np.clip(row[7] - gripper, -0.13, 0.13))
            hand = tcp(q)
            near = np.hypot(*(hand[:2] - cup_at[:2])) < 0.015 and hand[2] - cup_at[2] < 0.07
            attached = (attached or (gripper > 0.3 and near)) and gripper > 0.3
            if attached:
                cup_at = hand - np.array([0.0, 0.0, 0.055])
            elif cup_at[2] > 0.0:
                on_block = max(abs(cup_at[0] - BLOCK[0]), abs(cup_at[1] - BLOCK[1])) < 0.05
                top = scene_vision.BLOCK_HEIGHT if on_block else 0.0
                cup_at = np.array([cup_at[0], cup_at[1], top])
    return cup_at, phases, notes


@pytest.mark.parametrize("policy", [PI05_POLICY, COSMOS3_POLICY], ids=["pi05", "cosmos3"])
def test_played_closed_loop_the_rows_grasp_and_lift_the_cup(monkeypatch, policy):
    cup, phases, notes = play(monkeypatch, policy, "pick up the cup", (0.55, 0.1), chunks=12)
    assert cup[2] >= 0.1 and notes == []
    assert phases == ["approach", "grasp", "lift"]


def test_played_closed_loop_cosmos3_puts_the_cup_on_the_block(monkeypatch):
    cup, phases, notes = play(
        monkeypatch, COSMOS3_POLICY, "put the cup on the blue block", (0.5, 0.1), chunks=10
    )
    assert phases == ["approach", "grasp", "carry", "place", "done"] and notes == []
    assert cup[2] == scene_vision.BLOCK_HEIGHT and np.hypot(*(cup[:2] - BLOCK)) < 0.03


def test_over_http_a_jpeg_at_the_training_size_is_seen(monkeypatch, gateway):
    images = frames(monkeypatch, HOME, 0.0, (0.5, 0.12, 0.0))

    def jpeg(image: Image.Image) -> str:
        buffer = io.BytesIO()
        image.resize((320, 180), Image.BILINEAR).save(buffer, "JPEG", quality=90)
        return base64.b64encode(buffer.getvalue()).decode("ascii")

    body = act_body(PI05, joints=list(HOME), gripper=[0.0], instruction="pick up the cup")
    body["observation"]["images"] = [
        {"view": v, "data": jpeg(images[v]), "timestamp_ms": None}
        for v in ("exterior_1", "wrist_left")
    ]
    with client(gateway) as c:
        answer = c.post("/v1/act", json=body).json()
    rows = [s["values"] for s in answer["action_chunk"]["steps"]]
    end = tcp(np.array(HOME) + np.array(rows[-1][:7]))
    assert answer["warnings"] == []
    assert np.hypot(end[0] - 0.5, end[1] - 0.12) < np.hypot(*(tcp(HOME)[:2] - (0.5, 0.12))) - 0.1
    blank = jpeg(Image.new("RGB", (320, 180), (0, 0, 0)))
    for frame in body["observation"]["images"]:
        frame["data"] = blank
    with client(gateway) as c:
        held = c.post("/v1/act", json=body).json()
    assert held["warnings"] == ["no red cup in any view the model uses: holding in place"]
