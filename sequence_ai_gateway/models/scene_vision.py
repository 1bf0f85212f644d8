"""What the simulated DROID models see: the red cup and the blue block, found by colour in each
view and placed in the robot base frame with the cameras' calibration (``droid.cameras``).

Each view that shows an object gives a ray through its pixel centroid. Two or more rays are
triangulated (least squares); when they disagree, or there is one ray, the rays are cut with
the horizontal plane of the object's centre resting on the table. No memory between requests.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple

import numpy as np
from PIL import Image

from sequence_ai_gateway.droid import cameras, kinematics

# The scene's objects (m): a red cup 0.06 m across and 0.09 m tall, a blue 0.09 m block 0.05 m
# tall, both standing on the table (z = 0).
CUP_HEIGHT = 0.09
BLOCK_HEIGHT = 0.05
# Frames are looked at about this wide: more pixels only cost time, not accuracy that matters.
WORK_WIDTH = 320
# A blob smaller than this share of the frame is noise (a cup across the table is ~0.7 %).
MIN_BLOB_SHARE = 1.5e-4
# Rays that miss each other by more than this (m) do not see the same object: no triangulation.
MAX_RAY_GAP_M = 0.04


@dataclass(frozen=True)
class Sighting:
    """One object in one view: its pixel centroid (full-frame pixels) and share of the frame."""

    view: str
    u: float
    v: float
    share: float


@dataclass(frozen=True)
class Located:
    """An object's estimated centre (base frame, m) and the views it was seen in."""

    centre: np.ndarray
    views: Tuple[str, ...]
    triangulated: bool


def pixels(image: Any) -> Tuple[np.ndarray, int, int]:
    """An RGB image (PIL, or an HxWx3 array) about WORK_WIDTH wide as int16, and its full size.

    A PIL image is subsampled by Pillow (nearest pixel centres), which reads only the pixels it
    keeps: 25x cheaper at 1280x720 than converting the whole frame to an array first.
    """
    if isinstance(image, Image.Image):
        width, height = image.size
        stride = max(1, width // WORK_WIDTH)
        if stride > 1:
            image = image.resize((width // stride, max(1, height // stride)), Image.NEAREST)
        return np.asarray(image.convert("RGB"), dtype=np.int16), width, height
    array = np.asarray(image)
    if array.ndim != 3 or array.shape[2] < 3:
        raise ValueError(f"image: got an array of shape {array.shape}, expected HxWx3 RGB")
    height, width = array.shape[:2]
    stride = max(1, width // WORK_WIDTH)
    return array[::stride, ::stride, :3].astype(np.int16), width, height


def red_mask(rgb: np.ndarray) -> np.ndarray:
    r, g, b = rgb[..., 0], rgb[..., 1], rgb[..., 2]
    return (r > 70) & (r > 2 * g + 20) & (r > 2 * b + 20)


def blue_mask(rgb: np.ndarray) -> np.ndarray:
    r, g, b = rgb[..., 0], rgb[..., 1], rgb[..., 2]
    return (b > 90) & (b > r + 60) & (b > g + 25)


def _sighting(view: str, mask: np.ndarray, width: int, height: int) -> Optional[Sighting]:
    share = float(mask.mean())
    if share < MIN_BLOB_SHARE:
        return None
    rows, cols = np.nonzero(mask)
    sy, sx = height / mask.shape[0], width / mask.shape[1]
    # Pixel centres of the subsampled grid, in full-frame pixel coordinates.
    return Sighting(view, (float(cols.mean()) + 0.5) * sx, (float(rows.mean()) + 0.5) * sy, share)


def sightings(
    images: Mapping[str, Any], views: Sequence[str]
) -> Tuple[List[Sighting], List[Sighting], Dict[str, Tuple[int, int]]]:
    """Cup and block sightings in the named views, and each view's frame size."""
    cups: List[Sighting] = []
    blocks: List[Sighting] = []
    sizes: Dict[str, Tuple[int, int]] = {}
    for view in views:
        if view not in images:
            continue
        rgb, width, height = pixels(images[view])
        sizes[view] = (width, height)
        cup = _sighting(view, red_mask(rgb), width, height)
        block = _sighting(view, blue_mask(rgb), width, height)
        cups += [cup] if cup else []
        blocks += [block] if block else []
    return cups, blocks, sizes


def _rays(
    seen: Sequence[Sighting], sizes: Mapping[str, Tuple[int, int]], q: Sequence[float]
) -> List[Tuple[np.ndarray, np.ndarray]]:
    flange = kinematics.flange_pose(q)
    rays = []
    for s in seen:
        if s.view not in cameras.CALIBRATION:
            continue
        camera = cameras.posed_camera(s.view, *sizes[s.view], flange=flange)
        rays.append((camera.eye, camera.ray(s.u, s.v)))
    return rays


def _triangulate(rays: Sequence[Tuple[np.ndarray, np.ndarray]]) -> Tuple[np.ndarray, float]:
    """The point nearest all rays (least squares) and its largest distance to one of them."""
    a = np.zeros((3, 3))
    b = np.zeros(3)
    for origin, direction in rays:
        projector = np.eye(3) - np.outer(direction, direction)
        a += projector
        b += projector @ origin
    point = np.linalg.solve(a, b)
    gaps = [np.linalg.norm((np.eye(3) - np.outer(d, d)) @ (point - o)) for o, d in rays]
    return point, float(max(gaps))


def _on_plane(rays: Sequence[Tuple[np.ndarray, np.ndarray]], z: float) -> Optional[np.ndarray]:
    """The mean of the rays' crossings with the plane at height z (rays going down only)."""
    hits = [o + d * ((z - o[2]) / d[2]) for o, d in rays if d[2] < -1e-6 and o[2] > z]
    return np.mean(hits, axis=0) if hits else None


def locate(
    seen: Sequence[Sighting],
    sizes: Mapping[str, Tuple[int, int]],
    q: Sequence[float],
    resting_centre_z: float,
) -> Optional[Located]:
    """The object's centre from its sightings, or None when no view places it on the table."""
    rays = _rays(seen, sizes, q)
    views = tuple(s.view for s in seen)
    if len(rays) >= 2:
        point, gap = _triangulate(rays)
        # Rays nearly parallel or pointing apart give a point behind a camera or far off.
        if gap <= MAX_RAY_GAP_M and point[2] > -0.05:
            return Located(point, views, True)
    point = _on_plane(rays, resting_centre_z)
    return None if point is None else Located(point, views, False)
