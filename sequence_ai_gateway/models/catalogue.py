"""Catalogue rows of the simulated models and lookup by model id (PROTOCOL §1.6, §1.8, §1.11)."""

from __future__ import annotations

import copy
from dataclasses import dataclass
from typing import Any, Dict, List, Optional, Sequence, Tuple

from sequence_ai_gateway.droid.description import FRANKA_DROID

MODEL_PREFIX = "accounts/sequences/models/"
ENDPOINTS = ("act", "chat", "perceive")

# Franka Panda joint limits (rad) from the robot's description; the simulated DROID arm's.
PANDA_LOWER = FRANKA_DROID.lower
PANDA_UPPER = FRANKA_DROID.upper
# Where the Cartesian models' instruction targets lie (m, in panda_link0): well inside the
# simulated arm's workspace box x [0.2, 0.8], y [-0.45, 0.45], z [0.05, 0.8].
EE_TARGET_LOWER = (0.3, -0.3, 0.15)
EE_TARGET_UPPER = (0.7, 0.3, 0.6)

_SIMULATED_NOTE = "Simulated by the local sequence_ai gateway, not the trained model."
_REACHES = "A deterministic reach policy for a target hashed from the instruction."

# Fields every served row carries; a plug-in row missing one gets None (or the default below).
ROW_DEFAULTS: Dict[str, Any] = {
    "endpoint": "act",
    "architecture": "plug-in",
    "robot": None,
    "action_dim": None,
    "state_dim": None,
    "state_layout": None,
    "action_horizon": None,
    "control_hz": None,
    "camera_views": [],
    "training_frame_size": None,
    "input_aspect_ratio": None,
    "input_resize": None,
    "action_space": None,
    "action_semantics": None,
    "training": None,
    "open_loop_horizon": None,
    "sustains_seconds": None,
}


def full_model_id(name: str) -> str:
    """Full id for a short name; a name containing ``/`` is already full."""
    return name if "/" in name else MODEL_PREFIX + name


def short_id(model_id: str) -> str:
    return model_id.rsplit("/", 1)[-1]


def _not_trainable(why: str) -> Dict[str, Any]:
    # §1.6 types the figures as numbers, never null: a client reading them before it checks
    # `trainable` gets a zero price and a non-zero rate instead of a TypeError.
    return {
        "trainable": False,
        "why": why,
        "billing_fps": 15.0,
        "usd_per_data_hour": 0.0,
        "minimum_usd": 0.0,
    }


def _semantics(
    space: str,
    *,
    value_range: Optional[List[float]] = None,
    gripper_dims: Sequence[int] = (),
    native_target: Optional[str] = None,
    conversions: Optional[Dict[str, Any]] = None,
) -> Dict[str, Any]:
    return {
        "space": space,
        "pass_raw": True,
        "native_target": native_target,
        "value_range": value_range,
        "exceptions": [
            {"dim": dim, "meaning": "gripper_binary", "threshold": 0.5} for dim in gripper_dims
        ],
        "conversions": conversions or {},
    }


# pi05-droid's and cosmos3's §1.6 values; the sim-droid-*reach models share their action
# spaces under other names.
_PI05_DROID_FIELDS: Dict[str, Any] = {
    "architecture": "pi05",
    "robot": "droid_franka",
    "action_dim": 8,
    "state_dim": 8,
    "state_layout": {"joint_positions": 7, "gripper": 1},
    "action_horizon": 15,
    "control_hz": 15.0,
    "camera_views": ["exterior_1", "wrist_left"],
    "training_frame_size": [320, 180],
    "input_aspect_ratio": 1.7778,
    "input_resize": "pad",
    "action_space": "joint_delta",
    "action_semantics": _semantics(
        "joint_delta",
        native_target=(
            "droid.robot_env.RobotEnv(action_space='joint_velocity', "
            "gripper_action_space='position')"
        ),
        value_range=[-1.0, 1.0],
        gripper_dims=[7],
        conversions={
            "joint_position": {
                "reference": "state_at_request",
                "formula": "q_target[i] = q_reference + step[i][:7]",
                "verified_in": "isaac-lab droid scene, 2026-09-11",
            }
        },
    ),
}
_COSMOS3_DROID_FIELDS: Dict[str, Any] = {
    "architecture": "cosmos3",
    "robot": "droid_franka",
    "action_dim": 8,
    "state_dim": 8,
    "state_layout": {"joint_positions": 7, "gripper": 1},
    "action_horizon": 32,
    "control_hz": 15.0,
    "camera_views": ["exterior_1", "exterior_2", "wrist_left"],
    "training_frame_size": [640, 360],
    "input_aspect_ratio": 1.7778,
    "input_resize": "stretch",
    "action_space": "joint_absolute",
    "action_semantics": _semantics("joint_absolute"),
}
_LOOKS = (
    "It looks: finds the red cup and the blue block by colour in its views, places them with "
    "the simulated DROID cameras' calibration and picks the cup up (or puts it on the block); "
    "without a cup in view it holds in place."
)


@dataclass(frozen=True)
class SimulatedModel:
    """One built-in model: its own §1.6 values (``fields``, in wire order) and listing extras."""

    name: str
    fields: Dict[str, Any]
    gpu_ms_p50: float
    tags: Tuple[str, ...]
    open_loop_horizon: Optional[int] = None
    training: Optional[Dict[str, Any]] = None
    rows_note: str = ""


SIMULATED_MODELS: Tuple[SimulatedModel, ...] = (
    SimulatedModel(
        "pi05-droid",
        _PI05_DROID_FIELDS,
        gpu_ms_p50=95.0,
        tags=("droid", "franka", "vision"),
        open_loop_horizon=8,
        training={
            "trainable": True,
            "why": "LoRA fine-tuning on DROID-format episodes",
            "billing_fps": 15.0,
            "usd_per_data_hour": 40.0,
            "minimum_usd": 25.0,
        },
        rows_note=_LOOKS,
    ),
    SimulatedModel(
        "cosmos3-edge-policy-droid",
        _COSMOS3_DROID_FIELDS,
        gpu_ms_p50=310.0,
        tags=("droid", "franka", "vision"),
        training=_not_trainable("cosmos3 edge policies are not fine-tunable through the API"),
        rows_note=_LOOKS,
    ),
    # pi05-droid's action space with the instruction-hash reach: a deterministic target for
    # tests and benches that need one, whatever the frames show.
    SimulatedModel(
        "sim-droid-reach",
        {**_PI05_DROID_FIELDS, "architecture": "simulated-reach"},
        gpu_ms_p50=95.0,
        tags=("droid", "franka"),
        open_loop_horizon=8,
        rows_note=_REACHES,
    ),
    # cosmos3's action space (absolute joints, 32 rows) with the instruction-hash reach.
    SimulatedModel(
        "sim-droid-absolute-reach",
        {**_COSMOS3_DROID_FIELDS, "architecture": "simulated-reach"},
        gpu_ms_p50=310.0,
        tags=("droid", "franka"),
        rows_note=_REACHES,
    ),
    # A 14-wide bimanual state (two 6-joint arms + two grippers) and a 0.50 s chunk.
    SimulatedModel(
        "sim-bimanual-reach",
        {
            "architecture": "simulated-reach",
            "robot": "sim_bimanual_6dof",
            "action_dim": 14,
            "state_dim": 14,
            "state_layout": {"joint_positions": 12, "gripper": 2},
            "action_horizon": 25,
            "control_hz": 50.0,
            "camera_views": ["cam_high", "cam_left_wrist", "cam_right_wrist"],
            "training_frame_size": [320, 240],
            "input_aspect_ratio": 1.3333,
            "input_resize": "pad",
            "action_space": "joint_absolute",
            "action_semantics": _semantics("joint_absolute", gripper_dims=[12, 13]),
        },
        gpu_ms_p50=60.0,
        tags=("bimanual",),
        rows_note=(
            f"{_REACHES} "
            "Rows: 12 absolute joint targets (left arm 0-5, right arm 6-11), grippers at 12, 13."
        ),
    ),
    # A model that ignores proprioception (state_dim 0) and plays 0.64 s chunks.
    SimulatedModel(
        "sim-stateless-ee-delta",
        {
            "architecture": "simulated-video-action",
            "robot": "sim_single_arm_ee",
            "action_dim": 7,
            "state_dim": 0,
            "state_layout": None,
            "action_horizon": 16,
            "control_hz": 25.0,
            "camera_views": ["front"],
            "training_frame_size": [256, 256],
            "input_aspect_ratio": 1.0,
            "input_resize": None,
            "action_space": "ee_delta",
            "action_semantics": _semantics("ee_delta", value_range=[-1.0, 1.0], gripper_dims=[6]),
        },
        gpu_ms_p50=80.0,
        tags=("stateless",),
        rows_note=(
            f"{_REACHES} "
            "Rows: normalised end-effector deltas (xyz, rpy) and a gripper at dim 6; given "
            "proprioception.end_effector_pose, they steer towards the instruction's target."
        ),
    ),
    # The fourth action space: absolute end-effector poses from a measured pose + gripper.
    SimulatedModel(
        "sim-ee-absolute-reach",
        {
            "architecture": "simulated-reach",
            "robot": "sim_single_arm_ee",
            "action_dim": 7,
            "state_dim": 7,
            "state_layout": {"end_effector_pose": 6, "gripper": 1},
            "action_horizon": 10,
            "control_hz": 20.0,
            "camera_views": ["front"],
            "training_frame_size": [256, 256],
            "input_aspect_ratio": 1.0,
            "input_resize": None,
            "action_space": "ee_absolute",
            "action_semantics": _semantics("ee_absolute", gripper_dims=[6]),
        },
        gpu_ms_p50=45.0,
        tags=("cartesian",),
        rows_note=(
            f"{_REACHES} "
            "Rows: absolute end-effector poses (x, y, z in m, roll, pitch, yaw in rad, in the "
            "robot's base frame), at most 0.02 m apart, and a gripper at dim 6."
        ),
    ),
)


def simulated_row(name: str) -> Dict[str, Any]:
    """The catalogue row of the built-in model ``name`` (a short id), as a fresh dict."""
    found = [m for m in SIMULATED_MODELS if m.name == name]
    if not found:
        raise ValueError(
            f"simulated model {name!r}: expected one of {[m.name for m in SIMULATED_MODELS]}"
        )
    model = found[0]
    horizon = model.open_loop_horizon
    return copy.deepcopy({
        "id": MODEL_PREFIX + model.name,
        "object": "model",
        "endpoint": "act",
        **model.fields,
        "open_loop_horizon": horizon,
        "sustains_seconds": round(horizon / model.fields["control_hz"], 3) if horizon else None,
        "training": model.training or _not_trainable("simulated model"),
        "latency": {"gpu_ms_p50": model.gpu_ms_p50, "note": "GPU-only figure, not end-to-end"},
        "pricing": {"usd_per_call": 0.0},
        "licence": "simulated",
        "tags": ["simulated", *model.tags],
        "simulated": True,
        "description": (
            f"{_SIMULATED_NOTE} {model.rows_note}" if model.rows_note else _SIMULATED_NOTE
        ),
    })


def complete_row(row: Dict[str, Any]) -> Dict[str, Any]:
    """A copy of a (plug-in) row with a full id and every §1.6 field present."""
    name = row.get("id") or row.get("name")
    if not isinstance(name, str) or not name:
        raise ValueError(f"catalogue row: 'id' must be a non-empty string, got {name!r}")
    out = copy.deepcopy(row)
    out.pop("name", None)
    out["id"] = full_model_id(name)
    for key, value in ROW_DEFAULTS.items():
        out.setdefault(key, copy.deepcopy(value))
    if out["endpoint"] not in ENDPOINTS:
        raise ValueError(
            f"catalogue row {name}: 'endpoint' is {out['endpoint']!r}, expected one of {ENDPOINTS}"
        )
    # Only motion rows need a width and a rate: a chat row has neither.
    for key in ("action_dim", "control_hz") if out["endpoint"] == "act" else ():
        value = out[key]
        if not isinstance(value, (int, float)) or isinstance(value, bool) or value <= 0:
            raise ValueError(f"catalogue row {name}: {key!r} must be positive, got {value!r}")
    views = out["camera_views"]
    if not isinstance(views, list) or not all(isinstance(v, str) for v in views):
        raise ValueError(f"catalogue row {name}: 'camera_views' must be a list of names")
    if out["action_space"] is None and isinstance(out["action_semantics"], dict):
        out["action_space"] = out["action_semantics"].get("space")
    if out["open_loop_horizon"] and out["sustains_seconds"] is None:
        out["sustains_seconds"] = round(out["open_loop_horizon"] / float(out["control_hz"]), 3)
    return out


class Catalogue:
    """Rows by full id; answers the lookups the routes need."""

    def __init__(self, rows: List[Dict[str, Any]]) -> None:
        self._rows: Dict[str, Dict[str, Any]] = {}
        for row in rows:
            if row["id"] in self._rows:
                raise ValueError(f"catalogue: model id {row['id']!r} is served twice")
            self._rows[row["id"]] = row

    def rows(self, endpoint: Optional[str] = None) -> List[Dict[str, Any]]:
        # A copy of the values first: a tuned model may be added from another thread.
        rows = list(self._rows.values())
        return [copy.deepcopy(r) for r in rows if endpoint in (None, r["endpoint"])]

    def add(self, row: Dict[str, Any]) -> None:
        """Serve one more row (a tuned model); its id must be new."""
        if row["id"] in self._rows:
            raise ValueError(f"catalogue: model id {row['id']!r} is served twice")
        self._rows[row["id"]] = row

    def remove(self, model_id: str) -> None:
        self._rows.pop(model_id, None)

    def ids(self) -> List[str]:
        return list(self._rows)

    def find(self, model_id: str) -> Optional[Dict[str, Any]]:
        """Row for a full id, or for a bare short id (no ``/``); other namespaces are unknown."""
        return self._rows.get(full_model_id(model_id))
