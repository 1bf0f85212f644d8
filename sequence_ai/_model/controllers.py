"""``controller=`` of ``run``/``act``: which rows a chunk hands to ``act``."""

from __future__ import annotations

from enum import Enum
from typing import Any, Optional, Union

from ..errors import SequencesError
from ..types import Prediction
from .actions import conversion_problem, prepare, to_joint_positions
from .catalogue import Model

__all__ = [
    "Controller",
    "as_controller",
    "check_controller",
    "controller_rows",
    "is_absolute_space",
    "joint_position_problem",
]

Row = list[float]


class Controller(str, Enum):
    """What ``act`` receives: rows as returned, ``prepare()``d rows, or absolute joint targets."""

    RAW = "raw"
    NATIVE = "native"
    JOINT_POSITION = "joint_position"

    def __str__(self) -> str:
        return self.value


def as_controller(value: Union[Controller, str]) -> Controller:
    """``value`` as a ``Controller`` (the public API takes the names too), or a ValueError."""
    if value not in tuple(Controller):
        choices = tuple(c.value for c in Controller)
        raise ValueError(f"controller is {value!r}; expected one of {choices}")
    return Controller(value)


def is_absolute_space(space: str) -> bool:
    """True for spaces whose rows are targets, not increments (blending those is meaningful)."""
    name = space.lower()
    if "delta" in name or "velocity" in name:
        return False
    return "absolute" in name or name in ("joint_pos", "joint_position", "joint_positions")


def _semantics(model: Model) -> dict[str, Any]:
    return dict(model.action_semantics or {})


def joint_position_problem(model: Model) -> Optional[str]:
    """Why ``model``'s rows cannot be played as absolute joint positions (None: they can —
    targets as they come, or deltas through the verified conversion). The client's one answer
    to it; the node asks it too (sequence_ai_ros/params/model_fit.py)."""
    space = _semantics(model).get("space") or model.action_space or ""
    if is_absolute_space(space):
        return None
    return conversion_problem(model)


def check_controller(controller: Controller, model: Optional[Model], model_id: str) -> None:
    """Refuse at run start a controller the model cannot serve."""
    if controller is Controller.RAW:
        return
    if model is None:
        raise ValueError(
            f"controller={controller.value!r} needs the catalogue row of {model_id}, "
            "which /v1/models does not list; use controller='raw'"
        )
    if controller is not Controller.JOINT_POSITION:
        return
    problem = joint_position_problem(model)
    if problem is not None:
        raise ValueError(
            f"controller='joint_position': {problem}; use controller='raw' or 'native'"
        )


def controller_rows(
    controller: Controller, prediction: Prediction, model: Optional[Model]
) -> list[Row]:
    """The rows handed to act for ``prediction`` under ``controller`` (all steps, untruncated)."""
    chunk = prediction.action_chunk
    if controller is Controller.RAW or model is None:
        return [list(step) for step in chunk.steps]
    if controller is Controller.JOINT_POSITION and not is_absolute_space(chunk.action_space):
        if prediction.observation is None:
            raise SequencesError("joint_position conversion needs the chunk's observation")
        # The reference is the state the chunk was requested with, never the live pose.
        q_reference = list(prediction.observation.proprioception.joint_positions)
        return [list(row) for row in to_joint_positions(chunk, q_reference, model)]
    return [list(prepare(chunk, model, i)) for i in range(len(chunk))]
