"""Server-side observation checks (PROTOCOL §1.9-1.10): views, frames, aspect, state width."""

from __future__ import annotations

import base64
import binascii
import io
from dataclasses import dataclass
from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple

from PIL import Image

from sequence_ai_gateway.models.catalogue import short_id
from sequence_ai_gateway.policies import PolicyObservation

# PROTOCOL §1.10's aspect band: letterboxed into a square of this side, the frame's content
# must be within this many pixels of the trained ratio's on each axis (16:9 → rows 121-131).
ASPECT_SQUARE_PX = 224
ASPECT_BAND_PX = 5.0
# The most pixels a view may decode to, read from the frame's header before any pixel is
# decoded: twice each edge of the largest frame a catalogue model takes (640x360), 2.7 MB as RGB.
# The client resizes to the model's frame before sending; a larger frame is refused (413).
MAX_FRAME_PIXELS = 1280 * 720
ACCEPTED_FORMATS = ("JPEG", "PNG")
# x, y, z, roll, pitch, yaw: what a state_dim-0 Cartesian model may steer with (§1.3's field).
POSE_WIDTH = 6


class ObservationRejected(Exception):
    """The observation cannot be served; ``detail`` is the 400 body's message."""

    def __init__(self, detail: str) -> None:
        super().__init__(detail)
        self.detail = detail


class FrameTooLarge(ObservationRejected):
    """A frame whose header declares more pixels than MAX_FRAME_PIXELS: a 413."""


@dataclass(frozen=True)
class Frame:
    view: str
    data: str


@dataclass(frozen=True)
class CheckedObservation:
    """An observation that passed every check but the decoding of its frames' pixels, which
    ``decoded`` does when the request's turn on a worker comes (frames queue compressed)."""

    instruction: str
    joint_positions: List[float]
    gripper: List[float]
    frames: Dict[str, bytes]  # view -> the checked JPEG or PNG
    seed: Optional[int]
    options: Dict[str, Any]
    end_effector_pose: Optional[List[float]]
    warnings: List[str]
    frames_received: int
    frames_used: int

    def decoded(self) -> PolicyObservation:
        """What the policy sees; ObservationRejected for a frame whose pixels do not decode."""
        return PolicyObservation(
            instruction=self.instruction,
            joint_positions=self.joint_positions,
            gripper=self.gripper,
            images={view: decode_pixels(view, raw) for view, raw in self.frames.items()},
            seed=self.seed,
            options=self.options,
            end_effector_pose=self.end_effector_pose,
        )


def missing_views(row: Mapping[str, Any], frames: Sequence[Frame]) -> None:
    """400 when a declared view was not sent; named before any decoding work is done."""
    sent = [f.view for f in frames]
    missing = [v for v in row.get("camera_views") or [] if v not in sent]
    if missing:
        raise ObservationRejected(
            f"observation.images is missing view(s): {', '.join(missing)}; "
            f"you sent: {', '.join(sent) if sent else '(no images)'}; "
            f"model {short_id(row['id'])} expects: {', '.join(row['camera_views'])}"
        )


def check_frame(row: Mapping[str, Any], frame: Frame) -> bytes:
    """One base64 JPEG/PNG's bytes, once its header shows an accepted format, a size within
    frame_limit and the trained aspect ratio; no pixel is decoded here."""
    where = _where(frame.view)
    try:
        raw = base64.b64decode(frame.data, validate=True)
    except (binascii.Error, ValueError):
        raise ObservationRejected(
            f"{where}: not valid base64 (standard alphabet, padded, no 'data:' prefix)"
        ) from None
    try:
        with Image.open(io.BytesIO(raw)) as image:  # reads the header only
            fmt = image.format
            width, height = image.size
    except Exception as exc:  # Pillow raises many types for corrupt or odd data
        raise ObservationRejected(
            f"{where}: {len(raw)} bytes do not decode as a JPEG or PNG image ({exc})"
        ) from None
    if fmt not in ACCEPTED_FORMATS:
        raise ObservationRejected(f"{where}: image format {fmt}, expected JPEG or PNG")
    limit = frame_limit(row)
    if not 0 < width * height <= limit:
        raise FrameTooLarge(
            f"{where}: frame {width}x{height} ({width * height} pixels) is over the limit of "
            f"{limit} pixels for model {short_id(row['id'])}; resize it to the model's frame "
            f"before sending"
        )
    ratio = row.get("input_aspect_ratio")
    if ratio and not aspect_in_band(width / height, float(ratio)):
        raise ObservationRejected(
            f"{where}: frame {width}x{height} has aspect ratio {width / height:.4f}, model "
            f"{short_id(row['id'])} was trained at {ratio} (band: content within "
            f"±{ASPECT_BAND_PX:.0f} px at a {ASPECT_SQUARE_PX} px square); centre-crop the frame "
            f"to {ratio} before sending"
        )
    return raw


def frame_limit(row: Mapping[str, Any]) -> int:
    """The most pixels a view may have: MAX_FRAME_PIXELS, or the model's own frame when a
    plug-in's is larger."""
    size = row.get("training_frame_size")
    own = int(size[0]) * int(size[1]) if isinstance(size, (list, tuple)) and len(size) == 2 else 0
    return max(MAX_FRAME_PIXELS, own)


def decode_pixels(view: str, raw: bytes) -> Image.Image:
    """A checked frame's pixels as RGB (check_frame bounded their number)."""
    try:
        with Image.open(io.BytesIO(raw)) as image:
            return image.convert("RGB")  # decodes every pixel: truncated data fails here
    except Exception as exc:  # Pillow raises many types for corrupt or truncated data
        raise ObservationRejected(
            f"{_where(view)}: {len(raw)} bytes do not decode as a JPEG or PNG image ({exc})"
        ) from None


def decode_frame(row: Mapping[str, Any], frame: Frame) -> Image.Image:
    """check_frame, then its pixels at once."""
    return decode_pixels(frame.view, check_frame(row, frame))


def _where(view: str) -> str:
    return f"observation.images[view={view!r}].data"


def _content_box(ratio: float) -> Tuple[float, float]:
    side = float(ASPECT_SQUARE_PX)
    return side * min(1.0, ratio), side * min(1.0, 1.0 / ratio)


def aspect_in_band(actual: float, trained: float) -> bool:
    """Whether a frame of ratio ``actual`` letterboxes to within the band of ``trained``."""
    # The trained content is whole pixels (224 / 1.7778 → 126), as the model's resize makes it.
    trained_box = [round(v) for v in _content_box(trained)]
    return all(abs(a - t) <= ASPECT_BAND_PX + 1e-9
               for a, t in zip(_content_box(actual), trained_box))


def _fit(
    field_name: str, values: Optional[Sequence[float]], want: int, warnings: List[str]
) -> List[float]:
    got = list(values or [])
    if len(got) == want:
        return got
    if values is None:
        what = f"observation.proprioception.{field_name} is absent"
    else:
        what = f"observation.proprioception.{field_name} has {len(got)} value(s)"
    if len(got) > want:
        warnings.append(f"{what}, state_layout expects {want}: truncated to {want}")
        return got[:want]
    note = " (gripper open)" if field_name == "gripper" else ""
    warnings.append(f"{what}, state_layout expects {want}: zero-filled to {want}{note}")
    return got + [0.0] * (want - len(got))


def fit_state(
    row: Mapping[str, Any],
    joints: Sequence[float],
    gripper: Optional[Sequence[float]],
    end_effector_pose: Optional[Sequence[float]] = None,
) -> Tuple[List[float], List[float], Optional[List[float]], List[str]]:
    """Pad or truncate each wire field to its ``state_layout`` share, with a warning each.

    Returns joints, gripper, end-effector pose and the warnings. A pose the layout does not
    declare goes to the policy as sent; a state_dim-0 model gets it only when it is six values.
    """
    warnings: List[str] = []
    pose = None if end_effector_pose is None else list(end_effector_pose)
    if row.get("state_dim") == 0:
        usable = pose is not None and len(pose) == POSE_WIDTH
        sent = len(joints) + len(gripper or []) + (0 if usable or pose is None else len(pose))
        if sent:
            warnings.append(
                f"model {short_id(row['id'])} ignores proprioception (state_dim 0): "
                f"{sent} state value(s) not used"
            )
        return [], [], pose if usable else None, warnings
    layout = row.get("state_layout")
    if not isinstance(layout, Mapping):
        return list(joints), list(gripper or []), pose, warnings
    fitted_joints = _fit("joint_positions", joints, int(layout.get("joint_positions", 0)), warnings)
    fitted_gripper = _fit("gripper", gripper, int(layout.get("gripper", 0)), warnings)
    if "end_effector_pose" in layout:
        pose = _fit("end_effector_pose", pose, int(layout["end_effector_pose"]), warnings)
    return fitted_joints, fitted_gripper, pose, warnings


def check_observation(
    row: Mapping[str, Any],
    frames: Sequence[Frame],
    joints: Sequence[float],
    gripper: Optional[Sequence[float]],
    instruction: str,
    seed: Optional[int],
    options: Mapping[str, Any],
    end_effector_pose: Optional[Sequence[float]] = None,
) -> CheckedObservation:
    """Everything §1.10 asks of an observation; raises ``ObservationRejected`` for a 400."""
    missing_views(row, frames)
    declared = list(row.get("camera_views") or [])
    warnings: List[str] = []
    checked: Dict[str, bytes] = {}
    for frame in frames:
        if declared and frame.view not in declared:
            warnings.append(f"view {frame.view!r} is not used by model {short_id(row['id'])}")
        elif frame.view in checked:
            warnings.append(f"view {frame.view!r} sent more than once; the first frame is used")
        else:
            checked[frame.view] = check_frame(row, frame)
    fitted_joints, fitted_gripper, fitted_pose, state_warnings = fit_state(
        row, joints, gripper, end_effector_pose
    )
    return CheckedObservation(
        instruction=instruction,
        joint_positions=fitted_joints,
        gripper=fitted_gripper,
        frames=checked,
        seed=seed,
        options=dict(options),
        end_effector_pose=fitted_pose,
        warnings=state_warnings + warnings,
        frames_received=len(frames),
        frames_used=len(frames),
    )
