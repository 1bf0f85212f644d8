"""Comparisons shared by the recipe checks; each returns drift lines, never raises."""

from __future__ import annotations

from collections.abc import Collection, Sequence
from typing import Any

from ..catalogue import Model

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
