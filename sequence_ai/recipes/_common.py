"""What every recipe module does alike: the drift comparisons (each returns drift lines and
never raises), the semantics fallback and the prepared rows."""

from __future__ import annotations

import copy
from collections.abc import Collection, Mapping, Sequence
from typing import Any, Optional

from .._model.actions import prepare
from .._model.catalogue import Model
from ..types import ActionChunk

# Ratios are published rounded (1.7778); half a percent separates rounding from a new ratio.
ASPECT_TOLERANCE = 0.005


def _line(model: Model, field: str, live: Any, recipe: str) -> str:
    return f"{model.short_id}: {field} is {live!r} in the catalogue; the recipe {recipe}"


def same(model: Model, field: str, expected: Any) -> list[str]:
    """Drift when the live value is set and differs (an unset field is not contradicted)."""
    live = getattr(model, field)
    if live is None or live == expected:
        return []
    return [_line(model, field, live, f"has {expected!r}")]


def one_of(model: Model, field: str, accepted: Collection[Any]) -> list[str]:
    live = getattr(model, field)
    if live is None or live in accepted:
        return []
    return [_line(model, field, live, f"accepts {sorted(accepted)!r}")]


def views(model: Model, expected: Sequence[str]) -> list[str]:
    # Order is part of the contract: adapters map views by position.
    if not model.camera_views or tuple(model.camera_views) == tuple(expected):
        return []
    return [_line(model, "camera_views", list(model.camera_views), f"has {list(expected)!r}")]


def aspect(model: Model, expected: float) -> list[str]:
    live = model.input_aspect_ratio
    if live is None or abs(live - expected) / expected <= ASPECT_TOLERANCE:
        return []
    return [_line(model, "input_aspect_ratio", live, f"has {expected!r}")]


def layout(model: Model, expected: dict[str, int]) -> list[str]:
    live = model.state_layout
    if live is None:
        return []
    keys = ("joint_positions", "gripper")
    if all(int(live.get(k, 0)) == expected.get(k, 0) for k in keys):
        return []
    return [
        f"{model.short_id}: state_layout is {live!r} in the catalogue; the recipe has {expected!r}"
    ]


def pass_raw(model: Model) -> list[str]:
    """Drift when live semantics stop saying the rows go to the native controller as they are."""
    live = model.action_semantics
    if live is None or live.get("pass_raw") is True:
        return []
    return [f"{model.short_id}: action_semantics.pass_raw is not true"]


def verified_fields(model: Model, verified: Mapping[str, Any], fields: Sequence[str]) -> list[str]:
    """The checks every recipe makes: ordered views, the named fields, the state layout."""
    drift = views(model, verified["camera_views"])
    for name in fields:
        drift += same(model, name, verified[name])
    return drift + layout(model, verified["state_layout"]) + pass_raw(model)


def semantics(model: Optional[Model], fallback: Mapping[str, Any]) -> dict[str, Any]:
    """The live ``action_semantics`` when present, else a copy of the recipe's verified ones."""
    if model is not None and model.action_semantics:
        return dict(model.action_semantics)
    return copy.deepcopy(dict(fallback))


def prepared_rows(chunk: ActionChunk, model: Model, count: int) -> list[list[float]]:
    """The first ``count`` rows of the chunk, ``prepare()``d."""
    return [prepare(chunk, model, i) for i in range(min(count, len(chunk)))]
