"""The cameras draw the objects where the world has them, where the calibration says they are."""

from __future__ import annotations

import numpy as np
import pytest

from sequence_ai_lab.robots.shared.arm import HOME, forward_kinematics
from sequence_ai_lab.robots.shared.render import SceneRenderer, calibration
from sequence_ai_lab.robots.shared.scene import BLOCK_HALF, CUP_HEIGHT, FIXED_BLOCK_POSE

WIDTH, HEIGHT = 640, 360


def pose_at(x: float, y: float, z: float) -> np.ndarray:
    pose = np.eye(4)
    pose[:3, 3] = (x, y, z)
    return pose


def pixel(view: str, point: np.ndarray, flange: np.ndarray | None = None) -> tuple[int, int]:
    """Where `point` (base frame) lands in `view`, from the published calibration alone."""
    cal = calibration(view, WIDTH, HEIGHT)
    camera = cal.pose if flange is None else flange @ cal.pose
    local = camera[:3, :3].T @ (point - camera[:3, 3])
    u, v, _ = cal.matrix @ (local / local[2])
    return int(u), int(v)


def is_red(rgb: np.ndarray) -> bool:
    return bool(rgb[0] > 120 and rgb[1] < 70 and rgb[2] < 70)


@pytest.mark.parametrize("view", ["exterior_1", "exterior_2"])
def test_the_cup_is_drawn_at_its_pose_where_the_calibration_projects_it(view: str) -> None:
    renderer = SceneRenderer(view, WIDTH, HEIGHT, scale=2)
    for x, y in ((0.45, -0.1), (0.62, 0.15)):
        centre = np.array([x, y, CUP_HEIGHT / 2])
        frame = renderer.render(HOME, 0.0, objects={"cup": pose_at(*centre)})
        u, v = pixel(view, centre)
        assert is_red(frame[v, u]), f"{view}: no cup at ({u}, {v}) for a cup at {centre}"
    # The place it left is not red any more.
    u_old, v_old = pixel(view, np.array([0.45, -0.1, CUP_HEIGHT / 2]))
    assert not is_red(frame[v_old, u_old])


def test_a_tipped_cup_and_the_block_follow_their_poses() -> None:
    renderer = SceneRenderer("exterior_1", WIDTH, HEIGHT, scale=2)
    lying = np.eye(4)
    lying[:3, :3] = [[1.0, 0.0, 0.0], [0.0, 0.0, -1.0], [0.0, 1.0, 0.0]]  # axis along y
    lying[:3, 3] = (0.5, 0.1, 0.03)
    block = FIXED_BLOCK_POSE.copy()
    block[:3, 3] = (0.6, -0.1, BLOCK_HALF[2])
    frame = renderer.render(HOME, 0.0, objects={"cup": lying, "block": block})
    end = lying[:3, 3] + lying[:3, 2] * (CUP_HEIGHT / 2 - 0.01)
    u, v = pixel("exterior_1", end)
    assert is_red(frame[v, u])
    u, v = pixel("exterior_1", block[:3, 3] + [0.0, 0.0, BLOCK_HALF[2]])
    r, g, b = frame[v, u]
    assert b > 150 and r < 120  # the block's blue top


def test_the_wrist_camera_rides_on_the_flange() -> None:
    flange = forward_kinematics(HOME)[8]
    cal = calibration("wrist_left", WIDTH, HEIGHT)
    assert cal.parent == "panda_link8"
    # At home the hand points down: the wrist camera looks down at the table.
    assert (flange @ cal.pose)[2, 2] < -0.9
    renderer = SceneRenderer("wrist_left", WIDTH, HEIGHT, scale=2)
    below = flange[:3, 3] + flange[:3, :3] @ np.array([0.0, 0.0, 0.35])
    cup = pose_at(below[0], below[1], CUP_HEIGHT / 2)
    frame = renderer.render(HOME, 0.0, objects={"cup": cup})
    u, v = pixel("wrist_left", cup[:3, 3] + [0.0, 0.0, CUP_HEIGHT / 2 - 0.005], flange)
    assert 0 <= u < WIDTH and 0 <= v < HEIGHT
    assert frame[v, u][0] > 90 and frame[v, u][1] < 60  # the cup's rim or opening, red


@pytest.mark.slow  # over half a second of wall time
def test_mujocos_cameras_sit_where_the_calibration_says() -> None:
    mujoco = pytest.importorskip("mujoco")
    from sequence_ai_lab.robots.sim_robot.physics import Physics

    physics = Physics(0.002)
    q = HOME + np.array([0.3, -0.2, 0.1, 0.2, 0.5, -0.3, 0.4])
    physics.data.qpos[physics.index.arm_qpos] = q
    mujoco.mj_forward(physics.model, physics.data)
    flange = forward_kinematics(q)[8]
    for view in ("exterior_1", "exterior_2", "wrist_left"):
        cal = calibration(view)
        expected = cal.pose if cal.parent == "panda_link0" else flange @ cal.pose
        camera = physics.model.camera(view).id
        np.testing.assert_allclose(physics.data.cam_xpos[camera], expected[:3, 3], atol=1e-3)
        # MuJoCo's camera looks along its -z with y up: the optical frame's z and -y.
        axes = physics.data.cam_xmat[camera].reshape(3, 3)
        np.testing.assert_allclose(axes[:, 2], -expected[:3, 2], atol=1e-3)
        np.testing.assert_allclose(axes[:, 1], -expected[:3, 1], atol=1e-3)
        fovy = np.degrees(2 * np.arctan(cal.height / 2 / cal.fy))
        assert physics.model.cam_fovy[camera] == pytest.approx(fovy)
