"""A plug-in policy for the many-robots bench whose steps say which request they answer.

Geometry of pi05-droid (two views, 15 steps at 15 Hz, 8 played) but absolute joint rows, so
the node publishes them unchanged. Every row holds the observed joints except joint 7, which
carries a code: ``CODE_BASE + (request number mod CODE_WRAP) * CODE_STRIDE + step * CODE_STEP``.
The request number counts this instruction's requests in the order the gateway served them,
so a robot that plays chunk k+1 before chunk k, or a step twice, shows it in what it plays.
"""

from __future__ import annotations

import threading
from typing import Any

from sequence_ai_gateway.models import catalogue
from sequence_ai_gateway.policies import PolicyObservation

MODEL_ID = "bench-order-echo-droid"
HORIZON = 15
CODE_BASE = 0.6
CODE_STEP = 0.0002
CODE_STRIDE = 0.004  # > HORIZON * CODE_STEP, so step and request number never overlap
CODE_WRAP = 50  # codes stay within 0.6..0.8 rad of joint 7: inside max_step of the home pose


def encode(request: int, step: int) -> float:
    return CODE_BASE + (request % CODE_WRAP) * CODE_STRIDE + step * CODE_STEP


def decode(value: float) -> tuple[int, int]:
    """(request number mod CODE_WRAP, step index) from a joint-7 value."""
    units = round((value - CODE_BASE) / CODE_STEP)
    per_request = round(CODE_STRIDE / CODE_STEP)
    return units // per_request, units % per_request


class OrderEcho:
    """Catalogue row + ``steps``: absolute joint targets that encode (request, step)."""

    inference_ms = 50.0

    def __init__(self) -> None:
        row = catalogue.simulated_row("pi05-droid")
        row.update(
            id=MODEL_ID,
            architecture="bench",
            action_space="joint_absolute",
            action_semantics={
                "space": "joint_absolute",
                "pass_raw": True,
                "native_target": None,
                "value_range": None,
                "exceptions": [],
                "conversions": {},
            },
            training=None,
            description="Bench plug-in: rows encode the request number and step index.",
        )
        self.row: dict[str, Any] = row
        self._lock = threading.Lock()
        self._served: dict[str, int] = {}

    def steps(self, observation: PolicyObservation) -> list[list[float]]:
        with self._lock:
            request = self._served.get(observation.instruction, 0)
            self._served[observation.instruction] = request + 1
        joints = list(observation.joint_positions[:7])
        rows = []
        for step in range(HORIZON):
            row = joints[:6] + [encode(request, step), 0.0]
            rows.append(row)
        return rows


def make_policy() -> OrderEcho:
    return OrderEcho()
