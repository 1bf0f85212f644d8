"""A plug-in joint_delta policy for the seam test (served with ``policies=[...]``): pi05-droid's
row under its own id, whose chunks take turns standing still and moving joint 1 at 80 % of the
Panda's speed limit, away and back. A moving chunk lands with rows already due that the arm, on
the standing plan, never played: its seam jumps by about the request's latency of motion."""

from __future__ import annotations

import threading
from typing import Any, Dict, List

from sequence_ai_gateway.models.catalogue import simulated_row
from sequence_ai_gateway.policies import PolicyObservation

MODEL = "test-turning-reach"
# One row of joint 1 at 80 % of 2.175 rad/s, 15 Hz; a moving plan stops after MOVING_ROWS.
STEP_RAD = 0.8 * 2.175 / 15
MOVING_ROWS = 6


class _Turning:
    def __init__(self) -> None:
        self.row: Dict[str, Any] = dict(simulated_row("pi05-droid"), id=MODEL)
        self._lock = threading.Lock()
        self._requests = 0

    def steps(self, observation: PolicyObservation) -> List[List[float]]:
        with self._lock:
            n = self._requests
            self._requests += 1
        rows = int(self.row["action_horizon"])
        if n % 2 == 0:
            return [[0.0] * 8 for _ in range(rows)]
        way = 1.0 if n % 4 == 1 else -1.0
        return [[way * STEP_RAD * min(i + 1, MOVING_ROWS)] + [0.0] * 7 for i in range(rows)]


def turning() -> _Turning:
    return _Turning()
