"""Request builders and waits shared by the gateway tests (real frames, real HTTP)."""

from __future__ import annotations

import base64
import io
import threading
from typing import Any, Dict, List, Optional, Sequence, Tuple

import httpx
from PIL import Image

PI05 = "accounts/sequences/models/pi05-droid"
COSMOS3 = "accounts/sequences/models/cosmos3-edge-policy-droid"
BIMANUAL = "accounts/sequences/models/sim-bimanual-reach"
STATELESS = "accounts/sequences/models/sim-stateless-ee-delta"
EE_ABSOLUTE = "accounts/sequences/models/sim-ee-absolute-reach"
# pi05-droid's action space with the instruction-hash reach (pi05-droid itself looks).
DROID_REACH = "accounts/sequences/models/sim-droid-reach"
# cosmos3's action space with the instruction-hash reach.
DROID_ABSOLUTE_REACH = "accounts/sequences/models/sim-droid-absolute-reach"
ALL_MODELS = (PI05, COSMOS3, DROID_REACH, DROID_ABSOLUTE_REACH, BIMANUAL, STATELESS, EE_ABSOLUTE)
PLANNER = "accounts/sequences/models/sim-planner"  # the chat model, beside the act models

FRAME_SIZE = {
    PI05: (320, 180), COSMOS3: (640, 360), DROID_REACH: (320, 180),
    DROID_ABSOLUTE_REACH: (640, 360), BIMANUAL: (320, 240), STATELESS: (256, 256),
    EE_ABSOLUTE: (256, 256),
}
VIEWS = {
    PI05: ["exterior_1", "wrist_left"],
    DROID_REACH: ["exterior_1", "wrist_left"],
    DROID_ABSOLUTE_REACH: ["exterior_1", "exterior_2", "wrist_left"],
    COSMOS3: ["exterior_1", "exterior_2", "wrist_left"],
    BIMANUAL: ["cam_high", "cam_left_wrist", "cam_right_wrist"],
    STATELESS: ["front"],
    EE_ABSOLUTE: ["front"],
}
STATE = {
    PI05: ([0.0, -0.5, 0.0, -2.0, 0.0, 1.6, 0.8], [0.0]),
    COSMOS3: ([0.0, -0.5, 0.0, -2.0, 0.0, 1.6, 0.8], [0.0]),
    DROID_REACH: ([0.0, -0.5, 0.0, -2.0, 0.0, 1.6, 0.8], [0.0]),
    DROID_ABSOLUTE_REACH: ([0.0, -0.5, 0.0, -2.0, 0.0, 1.6, 0.8], [0.0]),
    BIMANUAL: ([0.1] * 12, [0.0, 0.0]),
    STATELESS: ([], None),
    EE_ABSOLUTE: ([], [0.0]),
}
# The Panda ready pose's hand TCP (x, y, z, roll, pitch, yaw in panda_link0), for the model
# whose state_layout has an end_effector_pose.
READY_POSE = [0.307, 0.0, 0.487, 3.14159, 0.0, 0.0]
POSE = {EE_ABSOLUTE: READY_POSE}
_FRAME_CACHE: Dict[Any, str] = {}
# Generous bound for waiting on a condition: a hang guard, never a measurement.
DEADLINE_S = 30.0


def frame(width: int, height: int, fmt: str = "JPEG") -> str:
    """Base64 of a real encoded image (cached: encoding is the slow part of building bodies)."""
    key = (width, height, fmt)
    if key not in _FRAME_CACHE:
        image = Image.new("RGB", (width, height), (120, 80, 40))
        for x in range(0, width, 8):  # some structure, so JPEG is not trivially tiny
            image.putpixel((x, height // 2), (250, 250, 250))
        buffer = io.BytesIO()
        image.save(buffer, fmt, **({"quality": 95} if fmt == "JPEG" else {}))
        _FRAME_CACHE[key] = base64.b64encode(buffer.getvalue()).decode("ascii")
    return _FRAME_CACHE[key]


def act_body(
    model: str = PI05,
    *,
    views: Optional[Sequence[str]] = None,
    joints: Optional[List[float]] = None,
    gripper: Any = "default",
    instruction: str = "put the red cup in the sink",
    seed: Optional[int] = 7,
    image: Optional[str] = None,
    nulls: bool = True,
    end_effector_pose: Any = "default",
    **options: Any,
) -> Dict[str, Any]:
    """A body as the Python client sends it: nested optionals as explicit nulls."""
    width, height = FRAME_SIZE[model]
    data = image if image is not None else frame(width, height)
    default_joints, default_gripper = STATE[model]
    images: List[Dict[str, Any]] = []
    for view in VIEWS[model] if views is None else views:
        entry: Dict[str, Any] = {"view": view, "data": data}
        if nulls:
            entry["timestamp_ms"] = None
        images.append(entry)
    proprioception: Dict[str, Any] = {
        "joint_positions": list(default_joints if joints is None else joints),
    }
    grip = default_gripper if gripper == "default" else gripper
    if nulls or grip is not None:
        proprioception["gripper"] = grip
    pose = POSE.get(model) if end_effector_pose == "default" else end_effector_pose
    if nulls or pose is not None:
        proprioception["end_effector_pose"] = pose
    if nulls:
        proprioception["joint_velocities"] = None
    body: Dict[str, Any] = {
        "model": model,
        "observation": {
            "images": images,
            "proprioception": proprioception,
            "instruction": instruction,
        },
    }
    if seed is not None:
        body["seed"] = seed
    body.update(options)
    return body


def client(handle: Any, key: Optional[str] = "valid", **kwargs: Any) -> httpx.Client:
    """An httpx client for the handle; ``key`` "valid"/"broke", a literal key, or None."""
    headers = {"Content-Type": "application/json"}
    token = {"valid": handle.api_key, "broke": handle.broke_key}.get(key, key) if key else None
    if token:
        headers["Authorization"] = f"Bearer {token}"
    kwargs.setdefault("timeout", 30.0)
    return httpx.Client(base_url=handle.url, headers=headers, trust_env=False, **kwargs)


def steps_of(response: httpx.Response) -> List[List[float]]:
    return [step["values"] for step in response.json()["action_chunk"]["steps"]]


def pending_faults(handle: Any) -> Any:
    """Faults injected into an in-process gateway that no request has taken yet."""
    return handle._gateway.faults.pending()


def waiting_requests(handle: Any) -> int:
    """Requests of an in-process gateway waiting in a stall, hold or trickle pause."""
    return len(handle._gateway._waits)


def start_stalled_act(handle: Any, model: str = PI05) -> Tuple[threading.Thread, Dict[str, Any]]:
    """POST /v1/act on a thread; its outcome gets "status", or "error" if the connection broke."""
    outcome: Dict[str, Any] = {}

    def post() -> None:
        try:
            with client(handle) as c:
                outcome["status"] = c.post("/v1/act", json=act_body(model)).status_code
        except httpx.HTTPError as exc:
            outcome["error"] = exc

    worker = threading.Thread(target=post)
    worker.start()
    return worker, outcome
