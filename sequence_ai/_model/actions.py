"""Post-processing of returned rows, driven by the model's declared ``action_semantics``."""

from __future__ import annotations

import math
import numbers
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Optional

from ..errors import InvalidResponse
from ..types import ActionChunk
from .catalogue import ABSOLUTE_JOINT_SPACES, Model

__all__ = [
    "GRIPPER_BINARY", "angle_columns", "conversion_problem", "gripper_columns", "gripper_dims",
    "prepare", "to_joint_positions",
]

GRIPPER_BINARY = "gripper_binary"
STATE_AT_REQUEST = "state_at_request"
DEFAULT_THRESHOLD = 0.5
# ee_absolute rows are [x, y, z, roll, pitch, yaw, gripper...]: dims 3..5 are angles (ee_delta's
# are angular velocities, which add and scale like any other value).
EE_ABSOLUTE = "ee_absolute"
EE_ANGLE_DIMS = (3, 4, 5)


def _semantics(model: Model) -> Mapping[str, Any]:
    if not isinstance(model, Model):
        raise TypeError(f"model is {model!r:.60}; expected a catalogue Model from models()")
    return model.action_semantics or {}


def _binary_exceptions(semantics: Mapping[str, Any]) -> list[tuple[int, float]]:
    """(dim, threshold) of every well-formed ``gripper_binary`` exception, in declared order."""
    found: list[tuple[int, float]] = []
    for entry in semantics.get("exceptions") or ():
        if not isinstance(entry, Mapping) or entry.get("meaning") != GRIPPER_BINARY:
            continue
        dim = entry.get("dim")
        if isinstance(dim, bool) or not isinstance(dim, int) or dim < 0:
            continue
        threshold = entry.get("threshold", DEFAULT_THRESHOLD)
        if isinstance(threshold, bool) or not isinstance(threshold, (int, float)):
            threshold = DEFAULT_THRESHOLD
        found.append((dim, float(threshold)))
    return found


def _value_range(semantics: Mapping[str, Any], model: Model) -> Optional[tuple[float, float]]:
    bounds = semantics.get("value_range")
    if bounds is None:
        return None
    if (
        not isinstance(bounds, Sequence)
        or len(bounds) != 2
        or not all(isinstance(b, (int, float)) and not isinstance(b, bool) for b in bounds)
        or not all(math.isfinite(b) for b in bounds)
        or bounds[0] > bounds[1]
    ):
        raise InvalidResponse(
            f"{model.short_id}: action_semantics.value_range is {bounds!r}; expected [lo, hi]"
        )
    return float(bounds[0]), float(bounds[1])


def gripper_dims(model: Model) -> set[int]:
    """Dims the model declares as a binary gripper (never blended, binarised by ``prepare``)."""
    return {dim for dim, _ in _binary_exceptions(_semantics(model))}


def gripper_columns(model: Model) -> set[int]:
    """Dims of a row that command a gripper (open or closed: never blended or shifted at a
    seam): the declared binary ones and, for joint rows as wide as the state, the state
    layout's gripper share after its joints, where cosmos3 keeps its gripper undeclared."""
    dims = gripper_dims(model)
    split = model.state_split
    space = model.action_space
    joint_rows = space is not None and (space in ABSOLUTE_JOINT_SPACES or space == "joint_delta")
    if split is not None and joint_rows and model.action_dim == sum(split):
        joints, grippers = split
        dims |= set(range(joints, joints + grippers))
    return dims


def angle_columns(model: Model) -> set[int]:
    """Dims of a row that are angles (blended, shifted and measured by the shortest arc: a hand
    pointing down sits at roll pi or -pi, whichever the model wrote): ee_absolute's roll,
    pitch and yaw."""
    grippers = gripper_dims(model)
    width = model.action_dim
    if model.action_space != EE_ABSOLUTE or (width is not None and width < 6):
        return set()
    return set(EE_ANGLE_DIMS) - grippers


def prepare(chunk: ActionChunk, model: Model, index: int) -> list[float]:
    """Row ``index`` ready for the model's native controller: gripper binarised, then clipped.

    A model declaring neither exceptions nor a value range gets the row unchanged.
    """
    if isinstance(index, bool) or not isinstance(index, numbers.Integral):
        raise TypeError(f"index is {index!r}; expected an integer step index")
    if not 0 <= index < len(chunk.steps):
        raise IndexError(f"index is {index}; the chunk has steps 0..{len(chunk.steps) - 1}")
    semantics = _semantics(model)
    row = [float(v) for v in chunk.steps[index]]
    for dim, threshold in _binary_exceptions(semantics):
        if dim < len(row):
            row[dim] = 1.0 if row[dim] > threshold else 0.0
    bounds = _value_range(semantics, model)
    if bounds is not None:
        lo, hi = bounds
        row = [min(hi, max(lo, v)) for v in row]
    return row


def conversion_problem(model: Model) -> Optional[str]:
    """Why ``model``'s rows have no verified joint_position conversion (None: they have one,
    from the state at request time). The one reading of ``conversions.joint_position``."""
    semantics = _semantics(model)
    conversions = semantics.get("conversions")
    conversion = conversions.get("joint_position") if isinstance(conversions, Mapping) else None
    if not isinstance(conversion, Mapping) or not conversion:
        return (
            f"{model.short_id} declares no verified joint_position conversion "
            f"(action space {model.action_space!r}); send its rows to "
            f"{semantics.get('native_target') or 'its native controller'} with prepare() "
            "instead of inventing a conversion"
        )
    reference = conversion.get("reference")
    if reference != STATE_AT_REQUEST:
        return (
            f"{model.short_id}: conversions.joint_position.reference is {reference!r}; "
            f"only {STATE_AT_REQUEST!r} is supported"
        )
    return None


def to_joint_positions(
    chunk: ActionChunk,
    q_reference: Sequence[float],
    model: Model,
    *,
    horizon: Optional[int] = None,
) -> list[list[float]]:
    """Absolute joint targets from a delta chunk, via the model's verified conversion.

    Every row offsets the same ``q_reference``: the joints of the observation the chunk was
    requested with, captured once. Re-reading the live pose per step would integrate the
    cumulative displacements twice. ``horizon`` limits the rows (None = all of them).
    """
    problem = conversion_problem(model)
    if problem is not None:
        raise ValueError(problem)
    semantics = _semantics(model)
    if isinstance(q_reference, (str, bytes, Mapping)) or not isinstance(q_reference, Iterable):
        raise TypeError(f"q_reference is {q_reference!r:.60}; expected a list of joint angles")
    q: list[float] = []
    for i, value in enumerate(q_reference):
        if isinstance(value, bool) or not isinstance(value, numbers.Real):
            raise TypeError(f"q_reference[{i}] is {value!r:.40}; expected a number")
        if not math.isfinite(float(value)):
            raise ValueError(f"q_reference[{i}] is {value!r}; expected a finite joint angle")
        q.append(float(value))
    binary = _binary_exceptions(semantics)
    n = binary[0][0] if binary else len(q)
    if len(q) < n:
        raise ValueError(
            f"q_reference has {len(q)} values; {model.short_id} rows offset {n} joints"
        )
    if n > chunk.action_dim:
        raise ValueError(
            f"q_reference has {n} joints but the chunk rows are {chunk.action_dim} wide"
        )
    if horizon is None:
        count = len(chunk.steps)
    elif isinstance(horizon, bool) or not isinstance(horizon, numbers.Integral) or horizon < 1:
        raise ValueError(f"horizon is {horizon!r}; expected a positive number of steps or None")
    else:
        count = min(int(horizon), len(chunk.steps))
    targets: list[list[float]] = []
    for index in range(count):
        row = prepare(chunk, model, index)
        targets.append([q[j] + row[j] for j in range(n)] + row[n:])
    return targets
