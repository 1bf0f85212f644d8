"""Building observations: frame encoding and the local checks against the model's declaration.

Pillow (and numpy, for arrays) are imported only when a raw frame has to be encoded, so the
client keeps httpx as its single hard dependency.
"""

from __future__ import annotations

import base64
import binascii
import io
import math
import numbers
import warnings
from collections.abc import Iterable, Mapping, Sequence
from enum import Enum
from types import ModuleType
from typing import Any, Optional, Union

from ..types import ImageFrame, Observation, Proprioception
from .catalogue import Model
from .text import is_blank

__all__ = [
    "DEFAULT_QUALITY",
    "MAX_LONG_EDGE",
    "Problem",
    "ProblemKind",
    "encode",
    "is_fatal",
    "observation",
    "problems_with",
]

DEFAULT_QUALITY = 95
# Below this the published action error grows by an order of magnitude.
LOWEST_SAFE_QUALITY = 90
# Without a declared training frame, frames are capped here: latency grows with bytes sent.
MAX_LONG_EDGE = 640
# Ratios this close are treated as equal, so a 1280x720 frame is not cropped by a pixel.
ASPECT_TOLERANCE = 0.005
INSTALL_HINT = 'pip install "sequence_ai_ros[image]" (or: pip install pillow numpy)'
MISSING_VIEWS = "missing view(s)"


class ProblemKind(str, Enum):
    """What an observation's disagreement with its model's catalogue row is about."""

    # A view the model does not declare (ignored by the service).
    UNKNOWN_VIEW = "unknown_view"
    # A declared view not sent: the service refuses the request.
    MISSING_VIEWS = "missing_views"
    # No joints where the model expects state.
    MISSING_STATE = "missing_state"
    # Joints or gripper of another width than the state layout (padded or truncated).
    STATE_WIDTH = "state_width"


class Problem(str):
    """One problem of ``problems_with``: the sentence (it is a ``str``) and its ``kind``."""

    kind: ProblemKind

    def __new__(cls, kind: ProblemKind, text: str) -> Problem:
        problem = super().__new__(cls, text)
        problem.kind = kind
        return problem


def _pil() -> ModuleType:
    try:
        from PIL import Image
    except ImportError:
        raise ImportError(
            f"encoding raw camera frames needs Pillow; install it with {INSTALL_HINT}, "
            "or pass frames already encoded as JPEG bytes or base64 strings"
        ) from None
    return Image


def _numpy() -> ModuleType:
    try:
        import numpy
    except ImportError:
        raise ImportError(
            f"encoding array frames needs numpy; install it with {INSTALL_HINT}"
        ) from None
    return numpy


def _check_quality(quality: object) -> int:
    if isinstance(quality, bool) or not isinstance(quality, numbers.Integral):
        raise TypeError(f"quality is {quality!r}; expected an integer JPEG quality 1..100")
    value = int(quality)
    if not 1 <= value <= 100:
        raise ValueError(f"quality is {quality!r}; expected a JPEG quality 1..100 (use 95)")
    if value < LOWEST_SAFE_QUALITY:
        warnings.warn(
            f"JPEG quality {quality} is below {LOWEST_SAFE_QUALITY}: action error grows sharply "
            "below that; use 95",
            UserWarning,
            stacklevel=3,
        )
    return value


def _is_numpy_array(frame: object) -> bool:
    return type(frame).__module__ == "numpy" and type(frame).__name__ == "ndarray"


def _is_pil_image(frame: object) -> bool:
    return any(cls.__module__.startswith("PIL.") for cls in type(frame).__mro__)


def _array_to_image(frame: Any, field: str) -> Any:
    np = _numpy()
    image_module = _pil()
    if frame.dtype != np.uint8:
        raise TypeError(
            f"{field} has dtype {frame.dtype}; expected uint8 pixels 0..255 "
            "(convert with (array * 255).clip(0, 255).astype('uint8') for 0..1 floats)"
        )
    shape = tuple(frame.shape)
    if len(shape) == 3 and shape[2] == 1:
        frame = frame[:, :, 0]
        shape = shape[:2]
    if not (len(shape) == 2 or (len(shape) == 3 and shape[2] in (3, 4))):
        raise ValueError(f"{field} has shape {shape}; expected HxWx3 (RGB), HxWx4 (RGBA) or HxW")
    if shape[0] < 1 or shape[1] < 1:
        raise ValueError(f"{field} has shape {shape}; expected a non-empty image")
    # Pillow infers L, RGB or RGBA from a uint8 array's shape (its mode= argument is deprecated).
    return image_module.fromarray(np.ascontiguousarray(frame))


def _centre_crop(image: Any, ratio: float) -> Any:
    width, height = image.size
    if abs(width / height - ratio) / ratio < ASPECT_TOLERANCE:
        return image
    # Crop rather than pad: the model's own transform pads, and padding twice adds bars.
    if width / height > ratio:
        new_width = max(1, min(width, round(height * ratio)))
        left = (width - new_width) // 2
        return image.crop((left, 0, left + new_width, height))
    new_height = max(1, min(height, round(width / ratio)))
    top = (height - new_height) // 2
    return image.crop((0, top, width, top + new_height))


def _resize(image: Any, model: Optional[Model], image_module: Any) -> Any:
    lanczos = getattr(image_module, "Resampling", image_module).LANCZOS
    if model is not None and model.training_frame_size:
        target = tuple(model.training_frame_size)
        return image if image.size == target else _shrink(image, target, lanczos)
    width, height = image.size
    long_edge = max(width, height)
    if long_edge <= MAX_LONG_EDGE:
        return image
    scale = MAX_LONG_EDGE / long_edge
    size = (max(1, round(width * scale)), max(1, round(height * scale)))
    return _shrink(image, size, lanczos)


def _shrink(image: Any, size: Any, lanczos: Any) -> Any:
    # reducing_gap=2.0: Pillow box-reduces by a whole factor to at most twice the size first;
    # about 2x faster from 1280x720 (docs/benchmarks.md), pixels within a few levels.
    return image.resize(size, lanczos, reducing_gap=2.0)


def _encode_str(frame: str, field: str) -> str:
    text = frame.strip()
    if text.startswith("data:"):
        # A data URL's payload is exactly what the wire wants; the prefix is not allowed there.
        header, _, text = text.partition(",")
        if ";base64" not in header:
            raise ValueError(f"{field} is a data URL that is not base64; expected base64 JPEG/PNG")
    if not text:
        raise ValueError(f"{field} is an empty string; expected base64 JPEG or PNG data")
    try:
        base64.b64decode(text[:64] + "=" * (-len(text[:64]) % 4), validate=True)
    except (binascii.Error, ValueError):
        raise ValueError(
            f"{field} is a str that is not base64 ({text[:24]!r}...); expected base64 JPEG or "
            "PNG data, or pass the frame as an array, a PIL image or JPEG bytes"
        ) from None
    return text


def _encode(frame: Any, model: Optional[Model], quality: int, field: str) -> str:
    if isinstance(frame, str):
        return _encode_str(frame, field)
    if isinstance(frame, (bytes, bytearray, memoryview)):
        data = bytes(frame)
        # Bytes are taken to be an encoded file and sent as they are, without a re-encode.
        if not data.startswith((b"\xff\xd8", b"\x89PNG\r\n\x1a\n")):
            raise ValueError(
                f"{field} is {len(data)} bytes that are not a JPEG or PNG file; "
                "expected encoded image bytes, or pass an array / PIL image"
            )
        return base64.b64encode(data).decode("ascii")
    if _is_numpy_array(frame):
        image = _array_to_image(frame, field)
    elif _is_pil_image(frame):
        image = frame
    else:
        raise TypeError(
            f"{field} is a {type(frame).__name__}; expected a numpy uint8 array (HxWx3, HxWx4 "
            "or HxW), a PIL image, JPEG/PNG bytes or a base64 string"
        )
    image_module = _pil()
    if image.size[0] < 1 or image.size[1] < 1:
        raise ValueError(f"{field} has size {image.size}; expected a non-empty image")
    try:
        # convert() copies even an RGB image: a 2.7 MB copy per 1280x720 view for nothing.
        image = image if image.mode == "RGB" else image.convert("RGB")
    except (ValueError, OSError) as exc:
        raise ValueError(
            f"{field} is a {image.mode} image that cannot be converted to RGB ({exc})"
        ) from None
    ratio = model.aspect_ratio if model is not None else None
    if ratio:
        image = _centre_crop(image, ratio)
    image = _resize(image, model, image_module)
    buffer = io.BytesIO()
    # optimize=True: Huffman tables fitted to this image. The same pixels in 6-10 % fewer bytes,
    # and bytes are latency (docs/benchmarks.md, "Observation cost").
    image.save(buffer, format="JPEG", quality=quality, optimize=True)
    return base64.b64encode(buffer.getvalue()).decode("ascii")


def encode(frame: Any, model: Optional[Model] = None, *, quality: int = DEFAULT_QUALITY) -> str:
    """One camera frame → base64 JPEG, shaped for ``model``.

    Arrays and PIL images are centre-cropped to the model's aspect ratio (never padded),
    resized to its training frame size (else the long edge is capped at 640) and saved as
    JPEG at ``quality``. Bytes and base64 strings are taken as already encoded.
    """
    if model is not None and not isinstance(model, Model):
        raise TypeError(f"model is {model!r:.60}; expected a catalogue Model or None")
    return _encode(frame, model, _check_quality(quality), "frame")


def _vector(value: Any, field: str, *, allow_scalar: bool = False) -> Optional[list[float]]:
    """A list of finite floats from any sequence of real numbers (lists, tuples, arrays)."""
    if value is None:
        return None
    if allow_scalar and isinstance(value, numbers.Real) and not isinstance(value, bool):
        value = [value]
    if isinstance(value, (str, bytes, Mapping)) or not isinstance(value, Iterable):
        raise TypeError(f"{field} is {value!r:.60}; expected a list of numbers")
    shape = getattr(value, "shape", None)
    if shape is not None and len(shape) != 1:
        raise ValueError(f"{field} has shape {tuple(shape)}; expected a flat vector")
    out: list[float] = []
    for i, item in enumerate(value):
        if isinstance(item, bool) or not isinstance(item, numbers.Real):
            raise TypeError(f"{field}[{i}] is {item!r:.40}; expected a number")
        number = float(item)
        if not math.isfinite(number):
            raise ValueError(f"{field}[{i}] is {number!r}; expected a finite number")
        out.append(number)
    return out


def problems_with(
    model: Model,
    views: Iterable[str],
    joints: Optional[Sequence[float]],
    gripper: Optional[Sequence[float]],
) -> list[Problem]:
    """What in an observation disagrees with the model's declaration (empty = nothing).

    Views are checked by name; the state width per ``state_layout`` half, because a right
    total in the wrong fields is still silently wrong.
    """
    problems: list[Problem] = []
    name = model.short_id
    sent = list(views)
    declared = list(model.camera_views)
    if declared:
        for view in sent:
            if view not in declared:
                problems.append(Problem(
                    ProblemKind.UNKNOWN_VIEW,
                    f"images has view {view!r} that {name} does not declare "
                    f"(expected {declared}); it would be ignored",
                ))
        missing = [view for view in declared if view not in sent]
        if missing:
            problems.append(Problem(
                ProblemKind.MISSING_VIEWS,
                f"images is {MISSING_VIEWS} {missing}: {name} expects {declared}, got {sent}",
            ))
    state_dim = model.state_dim
    if joints is None:
        if state_dim is None or state_dim > 0:
            wanted = f"{state_dim} state values" if state_dim else "joint positions"
            problems.append(
                Problem(ProblemKind.MISSING_STATE, f"joints is None; {name} expects {wanted}")
            )
        return problems
    if not state_dim:
        return problems
    n_joints = len(joints)
    n_gripper = len(gripper) if gripper is not None else 0
    split = model.state_split
    if split is None:
        if n_joints + n_gripper != state_dim:
            problems.append(Problem(
                ProblemKind.STATE_WIDTH,
                f"joints + gripper have {n_joints} + {n_gripper} values; {name} expects "
                f"state_dim = {state_dim} (the gateway would pad or truncate)",
            ))
        return problems
    want_joints, want_gripper = split
    if n_joints != want_joints:
        problems.append(Problem(
            ProblemKind.STATE_WIDTH,
            f"joints has {n_joints} values; {name} expects state_layout.joint_positions = "
            f"{want_joints} (the gateway would pad or truncate them)",
        ))
    if n_gripper != want_gripper:
        given = "None" if gripper is None else f"{n_gripper} values"
        consequence = (
            " (it would be zero-filled: hand held open)" if n_gripper < want_gripper else ""
        )
        problems.append(Problem(
            ProblemKind.STATE_WIDTH,
            f"gripper is {given}; {name} expects state_layout.gripper = "
            f"{want_gripper}{consequence}",
        ))
    return problems


def is_fatal(problems: Iterable[Problem]) -> bool:
    """True when the gateway would refuse the request outright (a declared view is missing)."""
    return any(problem.kind is ProblemKind.MISSING_VIEWS for problem in problems)


def observation(
    model: Model,
    *,
    images: Mapping[str, Any],
    instruction: str,
    joints: Optional[Sequence[float]] = None,
    gripper: Union[Sequence[float], float, None] = None,
    joint_velocities: Optional[Sequence[float]] = None,
    end_effector_pose: Optional[Sequence[float]] = None,
    timestamp_ms: Optional[int] = None,
    quality: int = DEFAULT_QUALITY,
    strict: bool = True,
) -> Observation:
    """Build an ``Observation`` for ``model``, checked locally before anything is sent.

    ``images`` maps view name → frame (see ``encode``). With ``strict`` any disagreement with
    the model's views or state layout raises ``ValueError``; otherwise it warns, drops views
    the model does not declare and continues. Non-finite state values always raise.
    """
    if not isinstance(model, Model):
        raise TypeError(f"model is {model!r:.60}; expected a catalogue Model from models()")
    if not isinstance(images, Mapping):
        example = ", ".join(f"{view!r}: frame" for view in model.camera_views)
        raise TypeError(
            f"images is a {type(images).__name__}; expected a dict of view name to frame, "
            f"e.g. {{{example or repr('exterior_1') + ': frame'}}}"
        )
    for view in images:
        if not isinstance(view, str) or not view:
            raise TypeError(f"images has key {view!r}; expected view names as non-empty str")
    if not isinstance(instruction, str):
        raise TypeError(f"instruction is {instruction!r:.60}; expected a str")
    if is_blank(instruction):
        raise ValueError(
            "instruction is empty (or only invisible characters); expected the task in words"
        )
    if timestamp_ms is not None and (
        isinstance(timestamp_ms, bool)
        or not isinstance(timestamp_ms, numbers.Integral)
        or timestamp_ms < 0
    ):
        raise ValueError(
            f"timestamp_ms is {timestamp_ms!r}; expected a non-negative integer or None"
        )
    quality = _check_quality(quality)
    joint_list = _vector(joints, "joints")
    gripper_list = _vector(gripper, "gripper", allow_scalar=True)
    velocities = _vector(joint_velocities, "joint_velocities")
    pose = _vector(end_effector_pose, "end_effector_pose")

    problems = problems_with(model, list(images), joint_list, gripper_list)
    if problems:
        message = f"observation does not match {model.short_id}:\n  - " + "\n  - ".join(problems)
        if strict:
            raise ValueError(message)
        warnings.warn(message, UserWarning, stacklevel=2)
    if joint_list is None:
        # A state_dim 0 model ignores joints; otherwise (strict=False) the gateway zero-fills.
        joint_list = []

    declared = set(model.camera_views)
    frames = [
        ImageFrame(
            view=view,
            data=_encode(frame, model, quality, f"images[{view!r}]"),
            timestamp_ms=None if timestamp_ms is None else int(timestamp_ms),
        )
        for view, frame in images.items()
        if not declared or view in declared
    ]
    return Observation(
        images=frames,
        proprioception=Proprioception(
            joint_positions=joint_list,
            joint_velocities=velocities,
            end_effector_pose=pose,
            gripper=gripper_list,
        ),
        instruction=instruction,
    )
