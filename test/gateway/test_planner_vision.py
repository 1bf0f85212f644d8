"""sim-planner judges progress from the frames it is sent, as a VLM would: each step is done
when the images show its geometry (the hand above the cup, at it, the cup lifted, over and on
the block) and not before; without images, or without the cup in them, it says it cannot judge.
Frames are drawn by the sim's numpy renderer (tests only) and sent as JPEGs over /v1/chat."""

from __future__ import annotations

import base64
import io
from typing import List, Optional, Sequence, Tuple

import pytest

pytest.importorskip("fastapi")

import numpy as np  # noqa: E402
from PIL import Image  # noqa: E402
from support.gateway_support import client  # noqa: E402

from sequence_ai_gateway.droid import kinematics  # noqa: E402
from sequence_ai_gateway.models import scene_vision  # noqa: E402
from sequence_ai_lab.robots.shared import render  # noqa: E402

HOME = [0.0, -0.785, 0.0, -2.356, 0.0, 1.571, 0.785]
CUP = (0.5, 0.12)
BLOCK = (0.5, -0.22)
PICK = "pick up the cup"
PLACE = "put the cup on the blue block"
VIEWS = ("exterior_1", "wrist_left")
_RENDERERS = {view: render.SceneRenderer(view) for view in VIEWS}


def joints_at(position: Sequence[float]) -> List[float]:
    """Joints putting the hand's TCP at ``position``, pointing down (IK from HOME)."""
    q = np.array(HOME)
    for _ in range(40):
        q = kinematics.solve(q, position)
    assert kinematics.tcp_pose(q)[:3, 3] == pytest.approx(position, abs=1e-3)
    return [float(v) for v in q]


def _pose(centre: Sequence[float]) -> np.ndarray:
    pose = np.eye(4)
    pose[:3, 3] = centre
    return pose


def jpegs(q: Sequence[float], gripper: float, cup_bottom: Sequence[float]) -> List[str]:
    """The views as the planner sends them: JPEGs at pi05-droid's 320x180."""
    objects = {
        "cup": _pose((cup_bottom[0], cup_bottom[1], cup_bottom[2] + scene_vision.CUP_HEIGHT / 2)),
        "block": _pose((*BLOCK, scene_vision.BLOCK_HEIGHT / 2)),
    }
    out = []
    for renderer in _RENDERERS.values():
        frame = Image.fromarray(renderer.render(np.array(q), gripper, objects=objects).copy())
        buffer = io.BytesIO()
        frame.resize((320, 180), Image.BILINEAR).save(buffer, "JPEG", quality=90)
        out.append(base64.b64encode(buffer.getvalue()).decode("ascii"))
    return out


def ask(
    gateway,
    task: str,
    q: Sequence[float],
    images: Sequence[str],
    step: Optional[str] = None,
    views: Optional[Sequence[str]] = VIEWS,
) -> Tuple[str, List[str]]:
    lines = [f"Task: {task}", "Joint positions: [" + ", ".join(f"{v:.4f}" for v in q) + "]"]
    lines += [f"Current step: {step}"] if step else []
    lines += [f"Camera views: {', '.join(views)}"] if views else []
    content = [{"type": "text", "text": "\n".join(lines)}]
    content += [{"type": "image", "data": data} for data in images]
    with client(gateway) as c:
        response = c.post(
            "/v1/chat",
            json={"model": "sim-planner", "messages": [{"role": "user", "content": content}]},
        )
    assert response.status_code == 200, response.text
    body = response.json()
    return body["message"]["content"], body["warnings"]


def on_table() -> Tuple[float, float, float]:
    return (*CUP, 0.0)


def above_cup(dz: float = 0.0, dx: float = 0.0) -> List[float]:
    top = scene_vision.CUP_HEIGHT + 0.08
    return joints_at((CUP[0] + dx, CUP[1], top + dz))


def test_reach_above_the_cup_is_done_only_above_the_cup(gateway):
    step = "reach above the cup"
    # At home, 12 cm to the side, or 10 cm too high: not yet.
    for q in (HOME, above_cup(dx=0.12), above_cup(dz=0.1)):
        assert ask(gateway, PLACE, q, jpegs(q, 0.0, on_table()), step) == (step, [])
    q = above_cup()
    assert ask(gateway, PLACE, q, jpegs(q, 0.0, on_table()), step) == ("grasp the cup", [])


def test_grasp_is_done_with_the_hand_at_the_cup_and_lift_when_it_is_5_cm_up(gateway):
    grasp_z = 0.055
    # Halfway down: the grasp goes on.
    q = joints_at((*CUP, grasp_z + 0.06))
    assert ask(gateway, PICK, q, jpegs(q, 0.0, on_table()), "grasp the cup")[0] == "grasp the cup"
    q = joints_at((*CUP, grasp_z))
    assert ask(gateway, PICK, q, jpegs(q, 1.0, on_table()), "grasp the cup")[0] == "lift the cup"
    # The cup in the hand 3 cm up: still lifting; 6 cm up: the task is done.
    q = joints_at((*CUP, grasp_z + 0.03))
    assert ask(gateway, PICK, q, jpegs(q, 1.0, (*CUP, 0.03)), "lift the cup")[0] == "lift the cup"
    q = joints_at((*CUP, grasp_z + 0.06))
    assert ask(gateway, PICK, q, jpegs(q, 1.0, (*CUP, 0.06)), "lift the cup")[0] == "done"


def test_the_cup_carried_over_the_block_then_on_it_is_done(gateway):
    carry = "carry the cup over the blue block"
    lower = "lower the cup onto the blue block"
    held = 0.055  # the TCP over the cup's bottom when held
    # Lifted but still over the cup's place: the carry goes on.
    q = joints_at((*CUP, 0.2 + held))
    assert ask(gateway, PLACE, q, jpegs(q, 1.0, (*CUP, 0.2)), carry)[0] == carry
    q = joints_at((*BLOCK, 0.15 + held))
    assert ask(gateway, PLACE, q, jpegs(q, 1.0, (*BLOCK, 0.15)), carry)[0] == lower
    top = scene_vision.BLOCK_HEIGHT
    # 5 cm over the block's top, being lowered: not yet; resting on it: the task is done.
    q = joints_at((*BLOCK, top + 0.05 + held))
    assert ask(gateway, PLACE, q, jpegs(q, 1.0, (*BLOCK, top + 0.05)), lower)[0] == lower
    q = joints_at((*BLOCK, top + held))
    assert ask(gateway, PLACE, q, jpegs(q, 1.0, (*BLOCK, top)), lower)[0] == "done"
    assert ask(gateway, PLACE, q, jpegs(q, 0.0, (*BLOCK, top)), lower)[0] == "done"
    # Seen from the images alone, without a step under way: done too.
    assert ask(gateway, PLACE, q, jpegs(q, 0.0, (*BLOCK, top)))[0] == "done"


def test_without_images_or_the_cup_in_them_it_says_it_cannot_judge(gateway):
    q = above_cup()
    step = "reach above the cup"
    answer, warnings = ask(gateway, PLACE, q, [], step)
    assert answer == step and warnings == [
        "the simulated planner cannot judge whether a step is done: no camera images in the "
        "last user message"
    ]
    answer, warnings = ask(gateway, PLACE, q, jpegs(q, 0.0, on_table()), step, views=None)
    assert answer == step and "Camera views" in warnings[0]
    answer, warnings = ask(gateway, PLACE, q, jpegs(q, 0.0, (-3.0, 0.0, 0.0)), step)
    assert answer == step and warnings == [
        "the simulated planner cannot judge whether a step is done: no red cup in any image"
    ]


def test_a_cup_beside_the_block_is_not_on_it(gateway):
    lower = "lower the cup onto the blue block"
    held = 0.055
    # On the table 12 cm from the block, and held at the block's height 12 cm beside it.
    beside = (BLOCK[0], BLOCK[1] + 0.12)
    q = joints_at((*beside, held + 0.08))
    assert ask(gateway, PLACE, q, jpegs(q, 0.0, (*beside, 0.0)), lower)[0] == lower
    q = joints_at((*beside, scene_vision.BLOCK_HEIGHT + held))
    assert ask(gateway, PLACE, q, jpegs(q, 1.0, (*beside, scene_vision.BLOCK_HEIGHT)), lower)[
        0
    ] == lower
