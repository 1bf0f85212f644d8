"""Plug-in policies used by the gateway tests (served with ``policies=[...]``)."""

from __future__ import annotations

from typing import Any, Dict, List

from sequence_ai_gateway.policies import PolicyObservation


def _row(name: str, endpoint: str = "act") -> Dict[str, Any]:
    return {"id": name, "endpoint": endpoint, "action_dim": 2, "control_hz": 10.0,
            "action_horizon": 3, "camera_views": [], "state_dim": 2,
            "state_layout": {"joint_positions": 2}}


class _Plugin:
    def __init__(self, row: Dict[str, Any], rows: Any) -> None:
        self.row = row
        self._rows = rows

    def steps(self, observation: PolicyObservation) -> List[List[float]]:
        if isinstance(self._rows, Exception):
            raise self._rows
        return self._rows


def chat_model() -> _Plugin:
    return _Plugin(_row("test-chat", endpoint="chat"), [[0.0, 0.0]])


def too_wide() -> _Plugin:
    return _Plugin(_row("test-too-wide"), [[0.0, 0.0, 0.0]])


def crashing() -> _Plugin:
    return _Plugin(_row("test-crashing"), RuntimeError("weights not found"))


def echo_options() -> _Plugin:
    plugin = _Plugin(_row("test-echo"), [])

    def steps(observation: PolicyObservation) -> List[List[float]]:
        return [[float(observation.options.get("action_horizon", 0)),
                 float(len(observation.joint_positions))]]

    plugin.steps = steps  # type: ignore[method-assign]
    return plugin
