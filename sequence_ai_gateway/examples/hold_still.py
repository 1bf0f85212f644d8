"""A minimal plug-in policy: serve it with

    python -m sequence_ai_gateway --policy sequence_ai_gateway.examples.hold_still:make_policy

It answers every observation with a chunk that keeps the arm where it is (absolute joint
targets equal to the observed joints) and the gripper as observed. Replace ``steps`` with a
call into your own model; the gateway handles auth, queueing, checks and the wire format.
"""

from __future__ import annotations

from typing import Any, Dict, List

from sequence_ai_gateway.policies import PolicyObservation


class HoldStill:
    """Catalogue row + ``steps``: the whole plug-in interface."""

    inference_ms = 120.0  # median simulated inference time on its worker (times --scale)

    def __init__(self) -> None:
        self.row: Dict[str, Any] = {
            "id": "my-lab-hold-still",  # short ids get the accounts/sequences/models/ prefix
            "endpoint": "act",
            "architecture": "example",
            "robot": "droid_franka",
            "action_dim": 8,
            "state_dim": 8,
            "state_layout": {"joint_positions": 7, "gripper": 1},
            "action_horizon": 10,
            "control_hz": 10.0,
            "camera_views": ["exterior_1"],
            "training_frame_size": [320, 180],
            "input_aspect_ratio": 1.7778,
            "action_space": "joint_absolute",
            "action_semantics": {
                "space": "joint_absolute",
                "pass_raw": True,
                "native_target": None,
                "value_range": None,
                "exceptions": [],
                "conversions": {},
            },
            "description": "Example plug-in: holds the observed pose.",
        }

    def steps(self, observation: PolicyObservation) -> List[List[float]]:
        # The gateway already fitted the state to state_layout and decoded the frames
        # (observation.images: view -> PIL.Image, RGB).
        hold = list(observation.joint_positions) + list(observation.gripper)
        return [list(hold) for _ in range(self.row["action_horizon"])]


def make_policy() -> HoldStill:
    return HoldStill()
