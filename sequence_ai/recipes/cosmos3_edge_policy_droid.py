"""Cosmos3-Edge policy (DROID): absolute joint targets plus gripper, about 32 steps at 15 Hz.

Rows are already joint positions, so they go to a position controller as they are; there is
no conversion and none may be applied (offsetting absolute targets moves the arm elsewhere)::

    chunk = policy.predict(obs).action_chunk
    for i in range(len(chunk)):
        arm.move_to_joint_positions(sequence_ai.prepare(chunk, model, i))

Instructions work best as a short capitalised imperative naming the object and destination
("Put the cube in the bowl"), with no scene preamble.
"""

from __future__ import annotations

from typing import Any, Optional

from .._model.catalogue import Model
from ..types import ActionChunk
from . import _common

__all__ = [
    "ACCEPTED_ACTION_SPACES",
    "EVIDENCE",
    "FALLBACK_SEMANTICS",
    "MODEL_ID",
    "VERIFIED",
    "check",
    "native_rows",
    "semantics",
]

MODEL_ID = "accounts/sequences/models/cosmos3-edge-policy-droid"

# Absolute joint positions have been reported under both names; either means the same rows,
# so neither is drift.
ACCEPTED_ACTION_SPACES = frozenset({"joint_absolute", "joint_pos"})

VERIFIED: dict[str, Any] = {
    "camera_views": ("exterior_1", "exterior_2", "wrist_left"),
    "state_dim": 8,
    "state_layout": {"joint_positions": 7, "gripper": 1},
    "action_dim": 8,
    "action_space": "joint_absolute",
    "control_hz": 15.0,
    "instruction_style": "short capitalised imperative naming object and destination",
}

EVIDENCE = (
    "Rows are absolute joint angles in rad (dims 0-6) and the gripper (dim 7, 0 open, 1 closed, "
    "no inversion), about 2.13 s per chunk. Views are mapped by position: the first is the "
    "exterior camera, the last the wrist. The whole chunk is executed; no value range is "
    "declared, so nothing is clipped."
)

FALLBACK_SEMANTICS: dict[str, Any] = {
    "space": "joint_absolute",
    "pass_raw": True,
    "native_target": None,
    "value_range": None,
    "exceptions": [],
    "conversions": {},
}


def semantics(model: Optional[Model] = None) -> dict[str, Any]:
    """The live ``action_semantics`` when present, else this recipe's verified ones."""
    return _common.semantics(model, FALLBACK_SEMANTICS)


def check(model: Model) -> list[str]:
    """Drift between the live row and what was verified; [] means they agree."""
    drift = _common.verified_fields(model, VERIFIED, ("state_dim", "action_dim"))
    drift += _common.one_of(model, "action_space", ACCEPTED_ACTION_SPACES)
    live = model.action_semantics
    if live is not None:
        if (live.get("conversions") or {}).get("joint_position"):
            drift.append(
                f"{model.short_id}: the catalogue now declares a joint_position conversion; "
                "absolute rows must never be offset, so the recipe needs re-verifying"
            )
    return drift


def native_rows(chunk: ActionChunk, model: Model) -> list[list[float]]:
    """Every row of the chunk, prepared (the model declares no replanning horizon)."""
    return _common.prepared_rows(chunk, model, len(chunk))
