"""The simulated DROID cameras' calibration, as the simulated models know their training cameras.

Data, not code of the simulator: the numbers are the robot description's ``cameras``
(``sequence_ai_descriptions/franka_droid/robot.json``; the sim's numpy renderer draws with the
same ones; a test checks they agree). Pinhole cameras with square pixels and the principal
point at the image centre, so the intrinsics scale with whatever size a frame is sent at:

    fx = fy = (width / 2) / tan(horizontal_fov / 2),   cx = width / 2,   cy = height / 2

Extrinsics are given look-at style (eye, target, up) in the robot base frame (``panda_link0``,
table top at z = 0); the camera axes are right, down, forward (OpenCV's). The wrist camera rides
on the flange: its eye, target and up are in the flange frame, so its pose follows the joints.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Dict, Optional

import numpy as np

from sequence_ai_gateway.droid.description import FRANKA_DROID, CameraCalibration

# At 1280x720: exteriors fx = fy = 948.8 px, wrist fx = fy = 640.0 px; cx = 640, cy = 360.
# The wrist camera sits behind the fingers, looking past them along the flange axis; its image
# "up" is flange -x.
CALIBRATION: Dict[str, CameraCalibration] = FRANKA_DROID.cameras


def focal_px(view: str, width: int) -> float:
    """fx = fy (px) of ``view`` for a frame ``width`` pixels wide."""
    fov = math.radians(CALIBRATION[view].horizontal_fov_deg)
    return 0.5 * width / math.tan(fov / 2.0)


def look_at(eye: np.ndarray, target: np.ndarray, up: np.ndarray) -> np.ndarray:
    """3x3 rotation whose rows are the camera's right, down and forward axes (base frame)."""
    forward = target - eye
    forward = forward / np.linalg.norm(forward)
    right = np.cross(forward, up)
    right = right / np.linalg.norm(right)
    down = np.cross(forward, right)
    return np.stack([right, down, forward])


@dataclass(frozen=True)
class PosedCamera:
    """A camera's pose in the base frame and its intrinsics at one frame size."""

    eye: np.ndarray  # (3,) metres
    rotation: np.ndarray  # (3, 3) rows: right, down, forward
    focal: float
    width: int
    height: int

    def project(self, points: np.ndarray) -> np.ndarray:
        """Pixel coordinates (u, v) of base-frame points (N, 3) in front of the camera."""
        cam = (np.asarray(points, dtype=float) - self.eye) @ self.rotation.T
        return np.stack(
            [
                self.width / 2.0 + self.focal * cam[:, 0] / cam[:, 2],
                self.height / 2.0 + self.focal * cam[:, 1] / cam[:, 2],
            ],
            axis=1,
        )

    def ray(self, u: float, v: float) -> np.ndarray:
        """Unit base-frame direction of the ray through pixel coordinates (u, v)."""
        x = (u - self.width / 2.0) / self.focal
        y = (v - self.height / 2.0) / self.focal
        cam = np.array([x, y, 1.0])
        direction = self.rotation.T @ cam
        return direction / np.linalg.norm(direction)


def posed_camera(
    view: str, width: int, height: int, flange: Optional[np.ndarray] = None
) -> PosedCamera:
    """``view``'s camera for a ``width`` x ``height`` frame; a wrist view needs the flange pose."""
    calibration = CALIBRATION[view]
    eye, target, up = (
        np.array(v, dtype=float) for v in (calibration.eye, calibration.target, calibration.up)
    )
    if calibration.mount == "flange":
        if flange is None:
            raise ValueError(f"view {view!r}: a flange-mounted camera needs the flange pose")
        rot, origin = flange[:3, :3], flange[:3, 3]
        eye, target, up = origin + rot @ eye, origin + rot @ target, rot @ up
    return PosedCamera(eye, look_at(eye, target, up), focal_px(view, width), width, height)
