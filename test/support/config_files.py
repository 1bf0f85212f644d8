"""A node's parameters as the project's config/ files give them, for tests that run those."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

CONFIG = Path(__file__).resolve().parents[2] / "config"


def config_parameters(name: str, **changes: Any) -> dict[str, Any]:
    """config/<name>.yaml's `sequence_ai` parameters with `changes` applied."""
    document = yaml.safe_load((CONFIG / f"{name}.yaml").read_text(encoding="utf-8"))
    values = dict(document["/**/sequence_ai"]["ros__parameters"])
    values.update(changes)
    return values
