"""Draws the simulated DROID scene (table, cup, block, arm) from a joint state with numpy.

Rendering is kept apart from the dynamics so it can be tested and timed alone. Everything is
drawn at a low resolution into preallocated buffers and upscaled by pixel repetition: the model
sees 224x126 frames anyway, so detail above that costs CPU for nothing.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

import numpy as np

from sequence_ai_lab.robots.shared.arm import forward_kinematics
from sequence_ai_lab.robots.shared.scene import (
    BLOCK_HALF,
    CUP_HEIGHT,
    CUP_RADIUS,
    FIXED_BLOCK_POSE,
    FIXED_CUP_POSE,
)

VIEWS: tuple[str, ...] = ("exterior_1", "exterior_2", "wrist_left")
# (width, height) of DROID's cameras, and so of the simulated ones unless told otherwise.
IMAGE_SIZE = (1280, 720)

_WALL_TOP = np.array([196, 204, 214], dtype=np.float32)
_WALL_BOTTOM = np.array([150, 158, 170], dtype=np.float32)
_FLOOR = (92, 92, 98)
_TABLE = (176, 138, 96)
_TABLE_EDGE = (120, 90, 60)
_CUP = (200, 40, 40)
_CUP_INSIDE = (110, 20, 20)
_BLOCK_SIDE = (40, 90, 170)
_BLOCK_TOP = (80, 140, 220)
_LINK = (236, 236, 236)
_JOINT = (40, 40, 44)
_FINGER = (70, 70, 76)

# The cameras (docs/sim.md, "Camera calibration"): horizontal field of view, the exterior
# cameras' eye and target in the base frame, the wrist camera's in the flange frame (panda_link8).
HORIZONTAL_FOV_DEG = {"exterior_1": 68.0, "exterior_2": 68.0, "wrist_left": 90.0}
EXTERIOR_LOOK_AT = {
    "exterior_1": (np.array([0.5, 1.3, 0.85]), np.array([0.3, 0.0, 0.3])),
    "exterior_2": (np.array([0.5, -1.3, 0.85]), np.array([0.3, 0.0, 0.3])),
}
# The wrist camera rides behind the fingers and looks past them, as DROID's ZED Mini does.
WRIST_EYE = np.array([-0.07, 0.0, 0.0])
WRIST_TARGET = np.array([0.0, 0.0, 0.5])
WRIST_UP = np.array([-1.0, 0.0, 0.0])

_UP = np.array([0.0, 0.0, 1.0])
TABLE_HEIGHT = 0.0  # the robot stands on the table top; the base frame's z=0 is the table
_TABLE_CORNERS = np.array(
    [[-0.25, -0.7, 0.0], [0.95, -0.7, 0.0], [0.95, 0.7, 0.0], [-0.25, 0.7, 0.0]]
)
_TABLE_FRONT = np.array(
    [[0.95, -0.7, 0.0], [0.95, 0.7, 0.0], [0.95, 0.7, -0.04], [0.95, -0.7, -0.04]]
)
_NEAR = 0.02


@dataclass
class Camera:
    """A pinhole camera at a render resolution, posed by eye/target/up in the base frame."""

    width: int
    height: int
    fov_deg: float
    eye: np.ndarray = field(default_factory=lambda: np.zeros(3))
    rotation: np.ndarray = field(default_factory=lambda: np.eye(3))  # rows: right, down, forward

    @property
    def focal(self) -> float:
        return 0.5 * self.width / math.tan(math.radians(self.fov_deg) / 2)

    def look_at(self, eye: np.ndarray, target: np.ndarray, up: np.ndarray) -> None:
        forward = target - eye
        forward = forward / np.linalg.norm(forward)
        right = np.cross(forward, up)
        right = right / np.linalg.norm(right)
        down = np.cross(forward, right)
        self.eye = np.asarray(eye, dtype=float)
        self.rotation = np.stack([right, down, forward])

    def to_camera(self, points: np.ndarray) -> np.ndarray:
        return (np.asarray(points, dtype=float) - self.eye) @ self.rotation.T

    def project(self, cam_points: np.ndarray) -> np.ndarray:
        """Pixel coordinates (x, y) of camera-frame points in front of the camera."""
        f = self.focal
        z = cam_points[:, 2:3]
        return np.hstack(
            [
                self.width / 2 + f * cam_points[:, 0:1] / z,
                self.height / 2 + f * cam_points[:, 1:2] / z,
            ]
        )


@dataclass(frozen=True)
class Calibration:
    """A view's pinhole calibration, as a camera_info and a tf would give it.

    Intrinsics at the image size; `pose`: the optical frame (x right, y down, z forward) in
    `parent` (panda_link0 for the exterior cameras, panda_link8, the flange, for the wrist's).
    """

    view: str
    width: int
    height: int
    fx: float
    fy: float
    cx: float
    cy: float
    parent: str
    pose: np.ndarray  # 4x4

    @property
    def matrix(self) -> np.ndarray:
        """The 3x3 camera matrix K."""
        return np.array([[self.fx, 0.0, self.cx], [0.0, self.fy, self.cy], [0.0, 0.0, 1.0]])


def calibration(view: str, width: int = IMAGE_SIZE[0], height: int = IMAGE_SIZE[1]) -> Calibration:
    """The calibration of `view` at `width` x `height` (square pixels, no distortion)."""
    if view not in VIEWS:
        raise ValueError(f"view: got {view!r}, expected one of {', '.join(VIEWS)}")
    camera = Camera(width, height, HORIZONTAL_FOV_DEG[view])
    if view in EXTERIOR_LOOK_AT:
        camera.look_at(*EXTERIOR_LOOK_AT[view], _UP)
        parent = "panda_link0"
    else:
        camera.look_at(WRIST_EYE, WRIST_TARGET, WRIST_UP)
        parent = "panda_link8"
    pose = np.eye(4)
    pose[:3, :3] = camera.rotation.T  # columns: the optical axes in the parent frame
    pose[:3, 3] = camera.eye
    f = camera.focal
    return Calibration(view, width, height, f, f, width / 2, height / 2, parent, pose)


def _clip_polygon_near(cam_points: np.ndarray) -> np.ndarray:
    """Cut a camera-frame polygon at the near plane so nothing behind the lens is projected."""
    kept: list[np.ndarray] = []
    count = len(cam_points)
    for i in range(count):
        a, b = cam_points[i], cam_points[(i + 1) % count]
        a_in, b_in = a[2] >= _NEAR, b[2] >= _NEAR
        if a_in:
            kept.append(a)
        if a_in != b_in:
            t = (_NEAR - a[2]) / (b[2] - a[2])
            kept.append(a + t * (b - a))
    return np.array(kept) if kept else np.zeros((0, 3))


def _convex_hull(points: np.ndarray) -> np.ndarray:
    """Monotone-chain hull of 2-D points, counter-clockwise in image coordinates."""
    pts = sorted({(float(x), float(y)) for x, y in points})
    if len(pts) < 3:
        return np.array(pts)

    def cross(o: tuple[float, float], a: tuple[float, float], b: tuple[float, float]) -> float:
        return (a[0] - o[0]) * (b[1] - o[1]) - (a[1] - o[1]) * (b[0] - o[0])

    lower: list[tuple[float, float]] = []
    for p in pts:
        while len(lower) >= 2 and cross(lower[-2], lower[-1], p) <= 0:
            lower.pop()
        lower.append(p)
    upper: list[tuple[float, float]] = []
    for p in reversed(pts):
        while len(upper) >= 2 and cross(upper[-2], upper[-1], p) <= 0:
            upper.pop()
        upper.append(p)
    return np.array(lower[:-1] + upper[:-1])


class Canvas:
    """A small RGB buffer with the two primitives the scene needs: convex fill and capsule."""

    def __init__(self, width: int, height: int) -> None:
        self.width, self.height = width, height
        self.pixels = np.zeros((height, width, 3), dtype=np.uint8)
        self._ys, self._xs = np.mgrid[0:height, 0:width].astype(np.float32) + 0.5
        # (x0, x1, y0, y1) around everything drawn since the last `untouch`, None if nothing.
        self.touched: tuple[int, int, int, int] | None = None

    def untouch(self) -> None:
        self.touched = None

    def _touch(self, x0: int, x1: int, y0: int, y1: int) -> None:
        self.touched = _union(self.touched, (x0, x1, y0, y1))

    def _box(self, xs: np.ndarray, ys: np.ndarray, pad: float = 0.0) -> tuple[int, int, int, int]:
        x0 = max(0, math.floor(float(xs.min()) - pad))
        x1 = min(self.width, math.ceil(float(xs.max()) + pad) + 1)
        y0 = max(0, math.floor(float(ys.min()) - pad))
        y1 = min(self.height, math.ceil(float(ys.max()) + pad) + 1)
        return x0, x1, y0, y1

    def fill_convex(self, polygon: np.ndarray, color: tuple[int, int, int]) -> None:
        """Fill a convex polygon given in pixel coordinates (either winding)."""
        if len(polygon) < 3:
            return
        x0, x1, y0, y1 = self._box(polygon[:, 0], polygon[:, 1])
        if x0 >= x1 or y0 >= y1:
            return
        # Scanlines: a convex polygon covers one span per row, between the leftmost and the
        # rightmost crossing of its edges with the row's centre line.
        start = polygon.astype(np.float32)
        end = np.roll(start, -1, axis=0)
        rising = end[:, 1] != start[:, 1]
        start, end = start[rising], end[rising]
        rows = self._ys[y0:y1, 0][:, None]
        t = (rows - start[:, 1]) / (end[:, 1] - start[:, 1])
        crossing = start[:, 0] + t * (end[:, 0] - start[:, 0])
        on_edge = (t >= 0.0) & (t <= 1.0)
        left = np.where(on_edge, crossing, np.inf).min(axis=1, keepdims=True)
        right = np.where(on_edge, crossing, -np.inf).max(axis=1, keepdims=True)
        xs = self._xs[0, x0:x1]
        self.pixels[y0:y1, x0:x1][(xs >= left) & (xs <= right)] = color
        self._touch(x0, x1, y0, y1)

    def capsule(
        self, a: np.ndarray, b: np.ndarray, radius: float, color: tuple[int, int, int]
    ) -> None:
        """A thick segment with round ends between pixel points a and b."""
        ends = np.array([a, b])
        x0, x1, y0, y1 = self._box(ends[:, 0], ends[:, 1], pad=radius + 1)
        if x0 >= x1 or y0 >= y1:
            return
        xs, ys = self._xs[y0:y1, x0:x1], self._ys[y0:y1, x0:x1]
        dx, dy = float(b[0] - a[0]), float(b[1] - a[1])
        length2 = dx * dx + dy * dy
        if length2 < 1e-9:
            t = np.zeros(xs.shape, dtype=np.float32)
        else:
            t = np.clip(((xs - a[0]) * dx + (ys - a[1]) * dy) / length2, 0.0, 1.0)
        dist2 = (xs - (a[0] + t * dx)) ** 2 + (ys - (a[1] + t * dy)) ** 2
        self.pixels[y0:y1, x0:x1][dist2 <= radius * radius] = color
        self._touch(x0, x1, y0, y1)


def _union(
    a: tuple[int, int, int, int] | None, b: tuple[int, int, int, int] | None
) -> tuple[int, int, int, int] | None:
    if a is None or b is None:
        return b if a is None else a
    return min(a[0], b[0]), max(a[1], b[1]), min(a[2], b[2]), max(a[3], b[3])


def _shade(color: tuple[int, int, int], depth: float) -> tuple[int, int, int]:
    # Farther things a little darker: cheap depth cue that makes motion easy to see.
    k = max(0.55, min(1.0, 1.15 - 0.25 * depth))
    return (int(color[0] * k), int(color[1] * k), int(color[2] * k))


@dataclass
class _Item:
    depth: float
    draw: Callable[[Canvas], None]


class SceneRenderer:
    """Renders one view of the scene for a joint state into a preallocated full-size frame."""

    def __init__(
        self, view: str, width: int = IMAGE_SIZE[0], height: int = IMAGE_SIZE[1], scale: int = 4
    ) -> None:
        if view not in VIEWS:
            raise ValueError(f"view: got {view!r}, expected one of {', '.join(VIEWS)}")
        if width <= 0 or height <= 0:
            raise ValueError(f"image size: got {width}x{height}, expected positive width/height")
        self.view = view
        self.width, self.height = width, height
        small_w, small_h = max(16, width // scale), max(9, height // scale)
        self.canvas = Canvas(small_w, small_h)
        self.camera = Camera(small_w, small_h, HORIZONTAL_FOV_DEG[view])
        if view in EXTERIOR_LOOK_AT:
            eye, target = EXTERIOR_LOOK_AT[view]
            self.camera.look_at(eye, target, _UP)
        # Nearest-neighbour upscaling: each small column repeated, then whole rows taken. Rows
        # are contiguous, so this costs a third of indexing every pixel (1.4 ms at 1280x720).
        self._rows = (np.arange(height) * small_h // height).astype(np.intp)
        self._cols = (np.arange(width) * small_w // width).astype(np.intp)
        self._column_repeats = np.bincount(self._cols, minlength=small_w)
        self.frame = np.zeros((height, width, 3), dtype=np.uint8)
        # The frame the last render went to and the canvas area its moving things covered: when
        # the view stands still, only that area and the new one are upscaled again.
        self._last_out: np.ndarray | None = None
        self._last_drawn: tuple[int, int, int, int] | None = None
        ramp = np.linspace(0.0, 1.0, small_h, dtype=np.float32)[:, None, None]
        wall = (_WALL_TOP * (1 - ramp) + _WALL_BOTTOM * ramp).astype(np.uint8)
        self._wall = np.broadcast_to(wall, (small_h, small_w, 3)).copy()
        self._background = np.zeros((small_h, small_w, 3), dtype=np.uint8)
        self._fixed_background = view != "wrist_left"
        if self._fixed_background:
            self._draw_background()
            self._background[:] = self.canvas.pixels

    def render(
        self,
        q: np.ndarray,
        gripper: float,
        out: np.ndarray | None = None,
        objects: Mapping[str, np.ndarray] | None = None,
    ) -> np.ndarray:
        """The full-size rgb8 frame for joints q, the gripper's closing (0 open .. 1 closed) and
        the 4x4 poses of the `cup` and the `block` (default: the kinematic scene's fixed ones),
        drawn into `out` or this renderer's buffer."""
        poses = forward_kinematics(np.asarray(q, dtype=float))
        if not self._fixed_background:
            self._mount_wrist(poses[8])
            self._draw_background()
        else:
            self.canvas.pixels[:] = self._background
        self.canvas.untouch()
        objects = objects or {}
        items = self._object_items(
            objects.get("cup", FIXED_CUP_POSE), objects.get("block", FIXED_BLOCK_POSE)
        )
        items += self._arm_items(poses, gripper)
        for item in sorted(items, key=lambda it: -it.depth):
            item.draw(self.canvas)
        frame = self.frame if out is None else out
        if frame.shape != self.frame.shape or not frame.flags.c_contiguous:
            raise ValueError(
                f"out: got a {frame.shape} array, expected a contiguous {self.frame.shape} one"
            )
        drawn = self.canvas.touched
        if frame is self._last_out and self._fixed_background:
            self._upscale(frame, _union(drawn, self._last_drawn))
        else:
            wide = np.repeat(self.canvas.pixels, self._column_repeats, axis=1)
            np.take(
                wide.reshape(len(wide), -1), self._rows, axis=0, out=frame.reshape(self.height, -1)
            )
        self._last_out, self._last_drawn = frame, drawn
        return frame

    def _upscale(self, frame: np.ndarray, box: tuple[int, int, int, int] | None) -> None:
        """Upscale the canvas rectangle `box` (x0, x1, y0, y1) into its place in `frame`."""
        if box is None:
            return
        c0, c1, r0, r1 = box
        big_r0, big_r1 = np.searchsorted(self._rows, (r0, r1))
        big_c0, big_c1 = np.searchsorted(self._cols, (c0, c1))
        wide = np.repeat(self.canvas.pixels[r0:r1, c0:c1], self._column_repeats[c0:c1], axis=1)
        frame[big_r0:big_r1, big_c0:big_c1] = wide[self._rows[big_r0:big_r1] - r0]

    def _mount_wrist(self, flange: np.ndarray) -> None:
        rot, origin = flange[:3, :3], flange[:3, 3]
        self.camera.look_at(origin + rot @ WRIST_EYE, origin + rot @ WRIST_TARGET, rot @ WRIST_UP)

    def _draw_background(self) -> None:
        canvas, cam = self.canvas, self.camera
        canvas.pixels[:] = self._wall
        floor = np.array(
            [[-3.0, -3.0, -0.75], [3.0, -3.0, -0.75], [3.0, 3.0, -0.75], [-3.0, 3.0, -0.75]]
        )
        for polygon, color in (
            (floor, _FLOOR),
            (_TABLE_FRONT, _TABLE_EDGE),
            (_TABLE_CORNERS, _TABLE),
        ):
            clipped = _clip_polygon_near(cam.to_camera(polygon))
            if len(clipped) >= 3:
                canvas.fill_convex(cam.project(clipped), color)

    def _solid(self, points: np.ndarray, color: tuple[int, int, int]) -> _Item | None:
        cam_points = self.camera.to_camera(points)
        cam_points = cam_points[cam_points[:, 2] > _NEAR]
        if len(cam_points) < 3:
            return None
        hull = _convex_hull(self.camera.project(cam_points))
        depth = float(cam_points[:, 2].mean())
        shaded = _shade(color, depth)
        return _Item(depth, lambda canvas: canvas.fill_convex(hull, shaded))

    def _object_items(self, cup: np.ndarray, block: np.ndarray) -> list[_Item]:
        def placed(pose: np.ndarray, points: np.ndarray) -> np.ndarray:
            return points @ pose[:3, :3].T + pose[:3, 3]

        angles = np.linspace(0, 2 * math.pi, 16, endpoint=False)
        ring = np.stack([np.cos(angles), np.sin(angles), np.zeros_like(angles)], axis=1)
        half_up = np.array([0.0, 0.0, CUP_HEIGHT / 2])
        bottom = placed(cup, CUP_RADIUS * ring - half_up)
        top = placed(cup, CUP_RADIUS * ring + half_up)
        rim = placed(cup, 0.85 * CUP_RADIUS * ring + half_up)
        corners = np.array([[sx, sy, sz] for sx in (-1, 1) for sy in (-1, 1) for sz in (-1, 1)])
        box = placed(block, corners * BLOCK_HALF)
        box_top = placed(block, corners[corners[:, 2] > 0] * BLOCK_HALF)
        items = []
        for points, color, bias in (
            (np.vstack([bottom, top]), _CUP, 0.0),
            (rim, _CUP_INSIDE, -0.001),  # the opening is drawn just after the cup's body
            (box, _BLOCK_SIDE, 0.0),
            (box_top, _BLOCK_TOP, -0.001),
        ):
            item = self._solid(points, color)
            if item is not None:
                item.depth += bias
                items.append(item)
        return items

    def _arm_items(self, poses: list[np.ndarray], gripper: float) -> list[_Item]:
        cam = self.camera
        flange = poses[8]
        # Fingers: 4 cm apart when open, together when closed, reaching to the tool centre.
        spread = 0.04 * (1.0 - min(1.0, max(0.0, gripper)))
        rot, origin = flange[:3, :3], flange[:3, 3]
        palm = origin + rot @ np.array([0.0, 0.0, 0.055])
        segments: list[tuple[np.ndarray, np.ndarray, float, tuple[int, int, int]]] = []
        # The wrist camera sits on the hand: it sees the fingers, never the links behind it.
        points = [] if self.view == "wrist_left" else [pose[:3, 3] for pose in poses[:9]]
        for i in range(len(points) - 1):
            segments.append((points[i], points[i + 1], 0.06 if i < 4 else 0.05, _LINK))
        if points:
            segments.append((origin, palm, 0.03, _LINK))
        for sign in (-1.0, 1.0):
            side = rot @ np.array([0.0, sign * (spread + 0.008), 0.0])
            segments.append(
                (palm + side, palm + side + rot @ np.array([0, 0, 0.05]), 0.011, _FINGER)
            )
        joints = [(p, 0.065, _JOINT) for p in points[1:8:2]]
        items: list[_Item] = []
        for a, b, radius, color in segments + [(p, p, r, c) for p, r, c in joints]:
            ends = cam.to_camera(np.array([a, b]))
            if ends[0, 2] < _NEAR and ends[1, 2] < _NEAR:
                continue
            ends = _clip_segment_near(ends)
            pix = cam.project(ends)
            depth = float(ends[:, 2].mean())
            pixel_radius = max(1.0, cam.focal * radius / max(depth, _NEAR))
            if color is _JOINT:
                pixel_radius *= 0.55
                depth -= 0.002  # joint caps are drawn over the link they join
            items.append(
                _Item(depth, _capsule_drawer(pix[0], pix[1], pixel_radius, _shade(color, depth)))
            )
        return items


def _clip_segment_near(ends: np.ndarray) -> np.ndarray:
    a, b = ends
    if a[2] >= _NEAR and b[2] >= _NEAR:
        return ends
    t = (_NEAR - a[2]) / (b[2] - a[2])
    cut = a + t * (b - a)
    return np.array([a, cut]) if a[2] >= _NEAR else np.array([cut, b])


def _capsule_drawer(
    a: np.ndarray, b: np.ndarray, radius: float, color: tuple[int, int, int]
) -> Callable[[Canvas], None]:
    return lambda canvas: canvas.capsule(a, b, radius, color)
