"""A plug-in ee_absolute policy for the node tests (served with ``policies=[...]``): every row
is one pose target just beside the test arm's start pose (test/support/ee_harness.py), hand down,
gripper closing — a simulated model of action space ee_absolute."""

from __future__ import annotations

import math
from typing import Any, Dict, List

from sequence_ai_gateway.policies import PolicyObservation

MODEL = "test-ee-absolute"
# 8 mm from the start along x: within one 20 Hz period at 0.5 m/s (25 mm).
TARGET = [0.508, 0.0, 0.4, math.pi, 0.0, 0.0]


class _EeAbsolute:
    def __init__(self) -> None:
        self.row: Dict[str, Any] = {
            "id": MODEL, "endpoint": "act", "action_dim": 7, "control_hz": 20.0,
            "action_horizon": 10, "camera_views": ["front"], "state_dim": 7,
            "state_layout": {"end_effector_pose": 6, "gripper": 1},
            "action_space": "ee_absolute",
        }

    def steps(self, observation: PolicyObservation) -> List[List[float]]:
        return [TARGET + [1.0] for _ in range(self.row["action_horizon"])]


def ee_absolute() -> _EeAbsolute:
    return _EeAbsolute()
