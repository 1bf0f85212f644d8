"""The local account's deployments, made from the gateway's own policy classes.

``my-pi05`` is the simulated looking model in the pi05-droid template's shape: ``{"actions":
(15, 8)}``, seven joint velocities (rad/s, integrated at the deployment's ``hz``) and a gripper
position in [0, 1]. ``my-droid-absolute`` answers the same plan as absolute joint positions.
``my-echo`` answers what it was shown (keys, shapes, the instruction): a debugging deployment.
"""

from __future__ import annotations

import io
from dataclasses import dataclass
from typing import Any, Dict, List, Mapping, Optional

import numpy as np
from PIL import Image

from sequence_ai_gateway.platform.errors import ErrorCode, PlatformError
from sequence_ai_gateway.policies import PolicyObservation, Rows

# The looking models' inputs (what the robot observes), by key.
IMAGE_KEYS = ("exterior_1", "wrist_left")
JOINTS_KEY = "joint_positions"
GRIPPER_KEY = "gripper_position"
INSTRUCTION_KEY = "instruction"
JOINT_COUNT = 7
# Decoded in memory: refuse decompression bombs before allocating pixels.
MAX_IMAGE_PIXELS = 4096 * 4096


@dataclass(frozen=True)
class Deployment:
    name: str
    template: str
    # "velocity" and "absolute" answer the looking model's plan; "echo" what it was shown.
    answers: str
    hz: float = 15.0
    action_chunk_valid_len: int = 15
    action_chunk_replan_at: int = 8
    request_timeout_s: float = 30.0

    @property
    def looks(self) -> bool:
        return self.answers != "echo"


DEPLOYMENTS = (
    Deployment("my-pi05", "pi05-droid", "velocity"),
    Deployment("my-droid-absolute", "pi05-droid", "absolute"),
    Deployment("my-echo", "echo", "echo"),
)


def _refuse(detail: str) -> PlatformError:
    return PlatformError(ErrorCode.INVALID_REQUEST, detail)


def _image(key: str, value: Any) -> Any:
    """One view: JPEG/PNG bytes decoded to RGB, or an HxWx3 uint8 array as it is."""
    if isinstance(value, np.ndarray):
        if value.dtype != np.uint8 or value.ndim != 3 or value.shape[2] != 3:
            raise _refuse(f"inputs[{key!r}]: array {value.dtype}{list(value.shape)}; expected "
                          "uint8 [height, width, 3] (RGB) or JPEG/PNG bytes")
        return value
    if not isinstance(value, (bytes, bytearray)):
        raise _refuse(f"inputs[{key!r}]: {type(value).__name__}; expected JPEG/PNG bytes or a "
                      "uint8 [height, width, 3] array")
    try:
        image = Image.open(io.BytesIO(bytes(value)))
        if image.format not in ("JPEG", "PNG"):
            raise _refuse(f"inputs[{key!r}]: image format {image.format}; expected JPEG or PNG")
        width, height = image.size
        if not 0 < width * height <= MAX_IMAGE_PIXELS:
            raise _refuse(f"inputs[{key!r}]: {width}x{height} exceeds {MAX_IMAGE_PIXELS} pixels")
        return image.convert("RGB")
    except OSError:
        raise _refuse(f"inputs[{key!r}]: not a readable JPEG or PNG image") from None


def _numbers(key: str, value: Any, count: int) -> List[float]:
    values = np.asarray(value, dtype=float).reshape(-1) if _is_numeric(value) else None
    if values is None or values.size != count or not np.all(np.isfinite(values)):
        raise _refuse(f"inputs[{key!r}]: {_describe(value)}; expected {count} finite number(s)")
    return [float(v) for v in values]


def _is_numeric(value: Any) -> bool:
    if isinstance(value, np.ndarray):
        return value.dtype.kind in "fiu"
    if isinstance(value, (list, tuple)):
        return all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in value)
    return False


def _describe(value: Any) -> str:
    if isinstance(value, np.ndarray):
        return f"array {value.dtype}{list(value.shape)}"
    if isinstance(value, (list, tuple, int, float, str)):
        return repr(value)
    return type(value).__name__


def policy_observation(inputs: Any, seed: Optional[int] = None) -> PolicyObservation:
    """The looking model's view of one observation; a missing or malformed input is refused,
    naming its key, before anything runs."""
    if not isinstance(inputs, Mapping):
        raise _refuse(f"inputs: {type(inputs).__name__}; expected a map of "
                      f"{', '.join((*IMAGE_KEYS, JOINTS_KEY, GRIPPER_KEY, INSTRUCTION_KEY))}")
    wanted = (*IMAGE_KEYS, JOINTS_KEY, GRIPPER_KEY, INSTRUCTION_KEY)
    missing = [k for k in wanted if k not in inputs]
    if missing:
        raise _refuse(f"inputs lack {', '.join(missing)}; sent: {', '.join(map(str, inputs))}")
    instruction = inputs[INSTRUCTION_KEY]
    if not isinstance(instruction, str):
        raise _refuse(f"inputs[{INSTRUCTION_KEY!r}]: {_describe(instruction)}; expected a string")
    return PolicyObservation(
        instruction=instruction,
        joint_positions=_numbers(JOINTS_KEY, inputs[JOINTS_KEY], JOINT_COUNT),
        gripper=_numbers(GRIPPER_KEY, inputs[GRIPPER_KEY], 1),
        images={key: _image(key, inputs[key]) for key in IMAGE_KEYS},
        seed=seed,
    )


def looking_outputs(deployment: Deployment, rows: Rows, joints: List[float]) -> Dict[str, Any]:
    """The pi05-droid model's rows (joint deltas from the request-time ``joints``, gripper) in
    the deployment's shape: velocities between consecutive targets, or the targets themselves."""
    chunk = np.asarray(rows, dtype=np.float64)
    deltas, gripper = chunk[:, :JOINT_COUNT], chunk[:, JOINT_COUNT:]
    if deployment.answers == "velocity":
        steps = np.diff(deltas, axis=0, prepend=np.zeros((1, JOINT_COUNT)))
        moves = steps * deployment.hz
    else:
        moves = deltas + np.asarray(joints, dtype=np.float64)
    return {"actions": np.concatenate([moves, gripper], axis=1).astype(np.float32)}


def echo_outputs(inputs: Any) -> Dict[str, Any]:
    """What ``my-echo`` saw: each key's type and shape, and the instruction."""
    if not isinstance(inputs, Mapping):
        return {"type": type(inputs).__name__}
    seen: Dict[str, Any] = {}
    for key, value in inputs.items():
        if isinstance(value, np.ndarray):
            seen[str(key)] = {"array": str(value.dtype), "shape": list(value.shape)}
        elif isinstance(value, (bytes, bytearray)):
            seen[str(key)] = {"bytes": len(value)}
        else:
            seen[str(key)] = {"type": type(value).__name__}
    return {"inputs": seen, "instruction": inputs.get(INSTRUCTION_KEY)}
