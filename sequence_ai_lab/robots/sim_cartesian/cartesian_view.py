"""The Cartesian simulator's `front` camera: a top view and a side view of the arm side by side,
with the workspace box, the hand TCP and the pose target, so a frame shows where the hand is
and where it is going (demo.png)."""

from __future__ import annotations

import numpy as np

from sequence_ai_lab.robots.shared.arm import forward_kinematics
from sequence_ai_lab.robots.shared.render import Canvas

# The simulated arm's workspace (m, panda_link0), drawn as a box in both views.
WORKSPACE_MIN = np.array([0.2, -0.45, 0.05])
WORKSPACE_MAX = np.array([0.8, 0.45, 0.8])
# What each view shows (m): x forward, y left, z up.
_X_RANGE = (-0.3, 0.9)
_Y_RANGE = (-0.55, 0.55)
_Z_RANGE = (-0.1, 1.0)

_BACKGROUND = (34, 38, 46)
_DIVIDER = (90, 90, 100)
_TABLE = (120, 96, 70)
_WORKSPACE = (58, 70, 86)
_LINK = (225, 225, 225)
_JOINT = (70, 70, 80)
_TARGET = (230, 60, 60)
_TCP_OPEN = (90, 200, 120)
_TCP_CLOSED = (240, 190, 60)
_TRAIL = (70, 150, 110)


class CartesianView:
    """Draws frames of one size; each `draw` returns a fresh (height, width, 3) uint8 array."""

    def __init__(self, width: int, height: int) -> None:
        if width < 16 or height < 16:
            raise ValueError(f"image size: got {width}x{height}, expected at least 16x16")
        self.canvas = Canvas(width, height)
        self._half = width // 2
        self._background = self._draw_background()

    def _scale(self) -> float:
        # Pixels per metre: both views share it, so distances compare across them.
        span = max(_X_RANGE[1] - _X_RANGE[0], _Y_RANGE[1] - _Y_RANGE[0], _Z_RANGE[1] - _Z_RANGE[0])
        return min(self._half, self.canvas.height) / span

    def _top(self, point: np.ndarray) -> np.ndarray:
        """Top view (left half): forward is up, the robot's left is left."""
        k = self._scale()
        return np.array([
            self._half / 2 - k * (point[1] - (_Y_RANGE[0] + _Y_RANGE[1]) / 2),
            self.canvas.height / 2 - k * (point[0] - (_X_RANGE[0] + _X_RANGE[1]) / 2),
        ])

    def _side(self, point: np.ndarray) -> np.ndarray:
        """Side view (right half), seen from the robot's right: forward is right, up is up."""
        k = self._scale()
        return np.array([
            self._half + self._half / 2 + k * (point[0] - (_X_RANGE[0] + _X_RANGE[1]) / 2),
            self.canvas.height / 2 - k * (point[2] - (_Z_RANGE[0] + _Z_RANGE[1]) / 2),
        ])

    def _rectangle(self, corners: list[np.ndarray], color: tuple[int, int, int]) -> None:
        self.canvas.fill_convex(np.array(corners), color)

    def _draw_background(self) -> np.ndarray:
        canvas = self.canvas
        canvas.pixels[:] = _BACKGROUND
        lo, hi = WORKSPACE_MIN, WORKSPACE_MAX
        self._rectangle([self._top(np.array(p)) for p in (
            (lo[0], lo[1], 0.0), (hi[0], lo[1], 0.0), (hi[0], hi[1], 0.0), (lo[0], hi[1], 0.0)
        )], _WORKSPACE)
        self._rectangle([self._side(np.array(p)) for p in (
            (lo[0], 0.0, lo[2]), (hi[0], 0.0, lo[2]), (hi[0], 0.0, hi[2]), (lo[0], 0.0, hi[2])
        )], _WORKSPACE)
        # The table top the robot stands on, in the side view.
        a, b = self._side(np.array([_X_RANGE[0], 0, 0])), self._side(np.array([_X_RANGE[1], 0, 0]))
        canvas.capsule(a, b, 1.5, _TABLE)
        canvas.pixels[:, self._half - 1 : self._half + 1] = _DIVIDER
        return canvas.pixels.copy()

    def draw(
        self,
        q: np.ndarray,
        gripper: float,
        target: np.ndarray | None,
        trail: list[np.ndarray] | None = None,
    ) -> np.ndarray:
        """A frame of the arm at joints `q` with the gripper (0 open .. 1 closed), the target
        position when known, and `trail` (earlier TCP positions) as dots: the way it came."""
        canvas = self.canvas
        canvas.pixels[:] = self._background
        points = [pose[:3, 3] for pose in forward_kinematics(np.asarray(q, dtype=float))]
        px = max(1.0, self._scale() * 0.025)
        for project in (self._top, self._side):
            if target is not None:
                centre = project(np.asarray(target, dtype=float))
                for dx, dy in ((1, 1), (1, -1)):
                    arm = np.array([dx, dy]) * 2.5 * px
                    canvas.capsule(centre - arm, centre + arm, 0.5 * px, _TARGET)
            for point in trail or []:
                dot = project(point)
                canvas.capsule(dot, dot, 0.4 * px, _TRAIL)
            pixels = [project(p) for p in points]
            for a, b in zip(pixels[:-1], pixels[1:]):
                canvas.capsule(a, b, px, _LINK)
            for p in pixels[1:8]:
                canvas.capsule(p, p, 0.7 * px, _JOINT)
            colour = _TCP_CLOSED if gripper >= 0.5 else _TCP_OPEN
            canvas.capsule(pixels[-1], pixels[-1], 1.4 * px, colour)
        return canvas.pixels.copy()
