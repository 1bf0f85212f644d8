"""Per-model recipes: what each served model was verified to expect, and a drift check.

``for_model(model)`` returns the recipe module for a model (or None). ``check(model)`` compares
a live catalogue row with the recipe and returns human-readable drift (empty = agreement).
``semantics(model)`` gives the live ``action_semantics``, else the recipe's, else ``{}``.
"""

from __future__ import annotations

from typing import Any, Optional, Protocol, Union

from .._model.catalogue import Model, full_model_id
from . import cosmos3_edge_policy_droid, pi05_droid

__all__ = [
    "RECIPES", "Recipe", "check", "cosmos3_edge_policy_droid", "for_model", "pi05_droid",
    "semantics",
]


class Recipe(Protocol):
    """What every recipe module provides; mypy checks each module of RECIPES against it."""

    @property
    def __name__(self) -> str: ...
    @property
    def MODEL_ID(self) -> str: ...

    def semantics(self, model: Optional[Model] = None) -> dict[str, Any]: ...

    def check(self, model: Model) -> list[str]: ...


RECIPES: tuple[Recipe, ...] = (pi05_droid, cosmos3_edge_policy_droid)


def _model_id(model_or_id: object) -> Optional[str]:
    if isinstance(model_or_id, Model):
        return model_or_id.id
    if isinstance(model_or_id, str) and model_or_id.strip():
        try:
            return full_model_id(model_or_id)
        except ValueError:
            return None
    return None


def for_model(model_or_id: Union[Model, str]) -> Optional[Recipe]:
    """The recipe module for a model or id: exact full id first, then the short-id tail."""
    ident = _model_id(model_or_id)
    if ident is None:
        return None
    for recipe in RECIPES:
        if recipe.MODEL_ID == ident:
            return recipe
    # Other account namespaces serving the same checkpoint still resolve by the tail.
    tail = ident.rsplit("/", 1)[-1]
    for recipe in RECIPES:
        if recipe.MODEL_ID.rsplit("/", 1)[-1] == tail:
            return recipe
    return None


def check(model: Model) -> list[str]:
    """Drift between the live catalogue row and the recipe; never raises ([] when unknown)."""
    recipe = for_model(model)
    if recipe is None or not isinstance(model, Model):
        return []
    try:
        return list(recipe.check(model))
    except Exception as exc:  # noqa: BLE001 - a check must report, never break the caller
        return [f"{model.short_id}: the recipe check could not run ({type(exc).__name__}: {exc})"]


def semantics(model: Model) -> dict[str, Any]:
    """Live ``action_semantics`` when the catalogue has them, else the recipe's fallback."""
    if isinstance(model, Model) and model.action_semantics:
        return dict(model.action_semantics)
    recipe = for_model(model)
    if recipe is None:
        return {}
    return recipe.semantics(model)
