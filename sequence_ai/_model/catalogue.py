"""The public model catalogue (``GET /v1/models``) and model ids."""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Optional

from .._transport.connection import Connection, ConnectionSetting, connection_of
from .._transport.transport import Transport
from ..errors import InvalidRequest, InvalidResponse
from ..types import ActionChunk, Prediction

__all__ = [
    "MODEL_PREFIX",
    "Model",
    "act_row",
    "check_answer_model",
    "check_chunk",
    "find_model",
    "full_model_id",
    "models",
    "short_model_id",
]

MODEL_PREFIX = "accounts/sequences/models/"
# Names the same absolute joint-position rows are published under: the cloud's catalogue says
# joint_absolute for cosmos3 where its chunks say joint_pos. Between these, no disagreement.
ABSOLUTE_JOINT_SPACES = frozenset({"joint_absolute", "joint_pos", "joint_position"})
# A chunk's rate may differ from the catalogue's by float rounding only.
RATE_TOLERANCE = 1e-6


def full_model_id(name: str) -> str:
    """``pi05-droid`` → ``accounts/sequences/models/pi05-droid``; an id with ``/`` is kept."""
    if not isinstance(name, str):
        raise TypeError(f"model is {name!r}; expected a model id string such as 'pi05-droid'")
    name = name.strip()
    if not name or name.endswith("/"):
        raise ValueError(f"model is {name!r}; expected a model id such as 'pi05-droid'")
    return name if "/" in name else MODEL_PREFIX + name


def short_model_id(name: str) -> str:
    """The id's tail after the last ``/`` (``pi05-droid``)."""
    return full_model_id(name).rsplit("/", 1)[-1]


def _opt_str(row: Mapping[str, Any], key: str) -> Optional[str]:
    value = row.get(key)
    if value is None:
        return None
    if not isinstance(value, str):
        raise InvalidResponse(
            f"catalogue row {row.get('id')!r}: {key} is {value!r}; expected a string"
        )
    return value


def _opt_int(row: Mapping[str, Any], key: str) -> Optional[int]:
    value = row.get(key)
    if value is None:
        return None
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise InvalidResponse(
            f"catalogue row {row.get('id')!r}: {key} is {value!r}; expected a non-negative integer"
        )
    return value


def _opt_float(row: Mapping[str, Any], key: str) -> Optional[float]:
    value = row.get(key)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise InvalidResponse(
            f"catalogue row {row.get('id')!r}: {key} is {value!r}; expected a finite number"
        )
    return float(value)


def _opt_dict(row: Mapping[str, Any], key: str) -> Optional[dict[str, Any]]:
    value = row.get(key)
    if value is None:
        return None
    if not isinstance(value, Mapping):
        raise InvalidResponse(
            f"catalogue row {row.get('id')!r}: {key} is {value!r}; expected an object"
        )
    return dict(value)


@dataclass(frozen=True)
class Model:
    """One catalogue row. Fields the client uses are lifted out; ``raw`` keeps the whole row."""

    id: str
    endpoint: Optional[str] = None
    architecture: Optional[str] = None
    robot: Optional[str] = None
    action_dim: Optional[int] = None
    state_dim: Optional[int] = None
    state_layout: Optional[dict[str, int]] = None
    action_horizon: Optional[int] = None
    control_hz: Optional[float] = None
    # Order matters: adapters map views positionally.
    camera_views: tuple[str, ...] = ()
    training_frame_size: Optional[tuple[int, int]] = None
    input_aspect_ratio: Optional[float] = None
    input_resize: Optional[str] = None
    action_space: Optional[str] = None
    action_semantics: Optional[dict[str, Any]] = None
    training: Optional[dict[str, Any]] = None
    open_loop_horizon: Optional[int] = None
    raw: dict[str, Any] = field(default_factory=dict, repr=False, compare=False)

    def __hash__(self) -> int:
        return hash(self.id)

    @property
    def state_split(self) -> Optional[tuple[int, int]]:
        """(joint positions, gripper values) the state holds per ``state_layout``; None when
        the row declares no layout (then only ``state_dim``, the total, is known)."""
        if self.state_layout is None:
            return None
        layout = self.state_layout
        return int(layout.get("joint_positions", 0)), int(layout.get("gripper", 0))

    def __repr__(self) -> str:
        parts = [repr(self.short_id)]
        for label, value in (
            ("endpoint", self.endpoint),
            ("action_space", self.action_space),
            ("action_dim", self.action_dim),
            ("state_dim", self.state_dim),
            ("control_hz", self.control_hz),
            ("camera_views", list(self.camera_views) or None),
        ):
            if value is not None:
                parts.append(f"{label}={value!r}")
        return f"Model({', '.join(parts)})"

    @property
    def short_id(self) -> str:
        return self.id.rsplit("/", 1)[-1]

    @property
    def aspect_ratio(self) -> Optional[float]:
        """Trained width/height: the declared ratio, else derived from the training frame."""
        if self.input_aspect_ratio:
            return self.input_aspect_ratio
        if self.training_frame_size:
            width, height = self.training_frame_size
            return width / height
        return None

    @classmethod
    def from_wire(cls, row: object) -> Model:
        """Map a ``/v1/models`` row; a field of the wrong type raises ``InvalidResponse``."""
        if not isinstance(row, Mapping):
            raise InvalidResponse(f"catalogue row is {row!r:.80}; expected an object")
        ident = row.get("id")
        if not isinstance(ident, str) or not ident:
            raise InvalidResponse(f"catalogue row id is {ident!r}; expected a model id string")
        views = row.get("camera_views") or ()
        if not isinstance(views, (list, tuple)) or not all(isinstance(v, str) for v in views):
            raise InvalidResponse(
                f"catalogue row {ident!r}: camera_views is {views!r}; expected a list of names"
            )
        size = row.get("training_frame_size")
        frame: Optional[tuple[int, int]] = None
        if size is not None:
            if (
                not isinstance(size, (list, tuple))
                or len(size) != 2
                or not all(isinstance(v, int) and not isinstance(v, bool) and v > 0 for v in size)
            ):
                raise InvalidResponse(
                    f"catalogue row {ident!r}: training_frame_size is {size!r}; expected [w, h]"
                )
            frame = (int(size[0]), int(size[1]))
        layout = _opt_dict(row, "state_layout")
        if layout is not None:
            for key, width in layout.items():
                if isinstance(width, bool) or not isinstance(width, int) or width < 0:
                    raise InvalidResponse(
                        f"catalogue row {ident!r}: state_layout.{key} is {width!r}; "
                        "expected a non-negative integer"
                    )
        semantics = _opt_dict(row, "action_semantics")
        space = _opt_str(row, "action_space")
        if space is None and semantics is not None and isinstance(semantics.get("space"), str):
            space = semantics["space"]
        horizon = _opt_int(row, "open_loop_horizon")
        return cls(
            id=ident,
            endpoint=_opt_str(row, "endpoint"),
            architecture=_opt_str(row, "architecture"),
            robot=_opt_str(row, "robot"),
            action_dim=_opt_int(row, "action_dim"),
            state_dim=_opt_int(row, "state_dim"),
            state_layout=layout,
            action_horizon=_opt_int(row, "action_horizon"),
            control_hz=_opt_float(row, "control_hz"),
            camera_views=tuple(views),
            training_frame_size=frame,
            input_aspect_ratio=_opt_float(row, "input_aspect_ratio"),
            input_resize=_opt_str(row, "input_resize"),
            action_space=space,
            action_semantics=semantics,
            training=_opt_dict(row, "training"),
            open_loop_horizon=horizon or None,
            raw=dict(row),
        )


def models(
    endpoint: Optional[str] = None,
    *,
    connection: Optional[Connection] = None,
    transport: Optional[Transport] = None,
    **settings: ConnectionSetting,
) -> list[Model]:
    """The catalogue, optionally filtered by endpoint (``act``, ``chat``, ``perceive``).

    No key is needed. Pass ``transport=`` to reuse an open connection (a Policy's own);
    otherwise a short-lived one is opened with ``connection`` (or its keywords) and closed here.
    """
    if endpoint is not None and (not isinstance(endpoint, str) or not endpoint.strip()):
        raise ValueError(f"endpoint is {endpoint!r}; expected 'act', 'chat', 'perceive' or None")
    params = {"endpoint": endpoint.strip()} if endpoint else None
    where = connection_of(connection, settings, "models")
    if transport is not None:
        body = transport.get("/v1/models", params=params)
    else:
        with where.transport(keyed=False) as own:
            body = own.get("/v1/models", params=params)
    rows = body.get("data") if isinstance(body, Mapping) else None
    if not isinstance(rows, list):
        raise InvalidResponse(f"GET /v1/models returned {body!r:.80}; expected {{'data': [...]}}")
    return [Model.from_wire(row) for row in rows]


def find_model(rows: Iterable[Model], model_id: str) -> Optional[Model]:
    """The row whose full id equals ``model_id`` (expanded), else the first with the same tail."""
    wanted = full_model_id(model_id)
    tail = wanted.rsplit("/", 1)[-1]
    candidates = list(rows)
    for row in candidates:
        if row.id == wanted:
            return row
    for row in candidates:
        if row.short_id == tail:
            return row
    return None


def act_row(rows: Iterable[Model], model_id: str) -> Optional[Model]:
    """The act model's row (None if unlisted); a model listed for another endpoint (a chat
    model) raises ``InvalidRequest``: a Policy cannot drive it."""
    row = find_model(rows, model_id)
    if row is not None and row.endpoint not in (None, "act"):
        raise InvalidRequest(
            f"model {row.short_id!r} is served on /v1/{row.endpoint}, not /v1/act: connect() "
            "drives act models"
            + ("; ask a chat model with sequence_ai.chat()" if row.endpoint == "chat" else "")
        )
    return row


def _same_space(chunk_space: str, row_space: str) -> bool:
    if chunk_space == row_space:
        return True
    return {chunk_space, row_space} <= ABSOLUTE_JOINT_SPACES


def check_answer_model(prediction: Prediction, asked: str) -> None:
    """Refuse (``InvalidResponse``) an answer computed by another model than the one asked:
    its rows fit another robot, rate and horizon."""
    try:
        same = full_model_id(prediction.model) == full_model_id(asked)
    except ValueError:
        same = False
    if not same:
        raise InvalidResponse(
            f"response.model is {prediction.model!r:.120}; expected {asked!r}, the model asked "
            "(none of its chunk is played)"
        )


def check_chunk(model: Model, chunk: ActionChunk) -> None:
    """Refuse (``InvalidResponse``) a chunk that disagrees with its model's catalogue row.

    Rate, horizons, width and action space come from the catalogue, never from a response:
    a chunk saying otherwise is a defect, and none of it may reach a motor.
    """
    hz, rows, replan = chunk.control_frequency_hz, len(chunk), chunk.open_loop_horizon
    horizon = model.action_horizon
    # (what the chunk says, what the catalogue expects) for every disagreement.
    problems: list[tuple[str, str]] = []
    if model.control_hz is not None and not math.isclose(
        hz, model.control_hz, rel_tol=RATE_TOLERANCE
    ):
        problems.append((f"control_frequency_hz is {hz:g}", f"control_hz = {model.control_hz:g}"))
    if horizon is not None and rows > horizon:
        problems.append((f"steps has {rows} rows", f"at most action_horizon = {horizon}"))
    if model.open_loop_horizon is not None and replan != model.open_loop_horizon:
        problems.append((
            f"open_loop_horizon is {replan!r}", f"open_loop_horizon = {model.open_loop_horizon}"
        ))
    elif replan is not None and horizon is not None and replan > horizon:
        problems.append((f"open_loop_horizon is {replan}", f"at most action_horizon = {horizon}"))
    if model.action_dim is not None and chunk.action_dim != model.action_dim:
        problems.append((f"action_dim is {chunk.action_dim}", f"action_dim = {model.action_dim}"))
    if model.action_space is not None and not _same_space(chunk.action_space, model.action_space):
        problems.append((
            f"action_space is {chunk.action_space!r}", f"action_space = {model.action_space!r}"
        ))
    if problems:
        raise InvalidResponse(
            f"action_chunk disagrees with the catalogue row of {model.short_id}: "
            + "; ".join(f"{said}, expected {expected}" for said, expected in problems)
            + " (none of it is played)"
        )
