"""pi0.5-DROID: joint-delta rows for a Franka, 15 steps at 15 Hz, replan after 8.

The worked loop on a controller that takes the rows natively (DROID's joint-velocity env)::

    chunk = policy.predict(obs).action_chunk
    for i in range(chunk.open_loop_horizon or len(chunk)):
        env.step(sequence_ai.prepare(chunk, model, i))

On a joint-position controller (Isaac Lab's DROID scene), read the joints once, before the
request, and offset every row from them::

    q_ref = arm.joint_positions()
    obs = sequence_ai.observation(model, images=..., joints=q_ref, gripper=[g], instruction=...)
    chunk = policy.predict(obs).action_chunk
    for target in pi05_droid.joint_targets(chunk, q_ref, model):
        arm.move_to_joint_positions(target)
"""

from __future__ import annotations

from typing import Any, Optional

from .._model.actions import to_joint_positions
from .._model.catalogue import Model
from ..types import ActionChunk
from . import _common

__all__ = [
    "EVIDENCE",
    "FALLBACK_SEMANTICS",
    "MODEL_ID",
    "VERIFIED",
    "check",
    "joint_targets",
    "native_rows",
    "semantics",
]

MODEL_ID = "accounts/sequences/models/pi05-droid"

VERIFIED: dict[str, Any] = {
    "camera_views": ("exterior_1", "wrist_left"),
    "state_dim": 8,
    "state_layout": {"joint_positions": 7, "gripper": 1},
    "action_dim": 8,
    "action_space": "joint_delta",
    "control_hz": 15.0,
    "action_horizon": 15,
    "open_loop_horizon": 8,
    "input_aspect_ratio": 1.7778,
    "training_frame_size": (320, 180),
    "instruction_style": "free text",
}

EVIDENCE = (
    "Rows are cumulative joint displacements from the state at request time (dims 0-6, clipped "
    "to [-1, 1]) plus a binary gripper at dim 7 (> 0.5 closes). The joint-position conversion "
    "was verified in the Isaac Lab DROID scene on 2026-09-11; the checkpoint's reference loop "
    "executes 8 of the 15 steps before replanning."
)

# Used only when a catalogue row carries no action_semantics of its own.
FALLBACK_SEMANTICS: dict[str, Any] = {
    "space": "joint_delta",
    "pass_raw": True,
    "native_target": (
        "droid.robot_env.RobotEnv(action_space='joint_velocity', gripper_action_space='position')"
    ),
    "value_range": [-1.0, 1.0],
    "exceptions": [{"dim": 7, "meaning": "gripper_binary", "threshold": 0.5}],
    "conversions": {
        "joint_position": {
            "reference": "state_at_request",
            "formula": "q_target[i] = q_reference + step[i][:7]",
            "verified_in": "isaac-lab droid scene, 2026-09-11",
        }
    },
}


def semantics(model: Optional[Model] = None) -> dict[str, Any]:
    """The live ``action_semantics`` when present, else this recipe's verified ones."""
    return _common.semantics(model, FALLBACK_SEMANTICS)


def check(model: Model) -> list[str]:
    """Drift between the live row and what was verified; [] means they agree."""
    fields = ("state_dim", "action_dim", "action_space", "open_loop_horizon")
    drift = _common.verified_fields(model, VERIFIED, fields)
    drift += _common.aspect(model, VERIFIED["input_aspect_ratio"])
    live = model.action_semantics
    if live is not None:
        conversion = (live.get("conversions") or {}).get("joint_position")
        if not conversion or conversion.get("reference") != "state_at_request":
            drift.append(
                f"{model.short_id}: action_semantics no longer declares the verified "
                "joint_position conversion (reference state_at_request)"
            )
    return drift


def _horizon(chunk: ActionChunk) -> int:
    return chunk.open_loop_horizon or VERIFIED["open_loop_horizon"]


def native_rows(chunk: ActionChunk, model: Model) -> list[list[float]]:
    """The rows to execute before replanning, gripper binarised and clipped."""
    return _common.prepared_rows(chunk, model, _horizon(chunk))


def joint_targets(chunk: ActionChunk, q_reference: list[float], model: Model) -> list[list[float]]:
    """Absolute joint targets for the rows executed before replanning (8, not all 15)."""
    return to_joint_positions(chunk, q_reference, model, horizon=_horizon(chunk))
