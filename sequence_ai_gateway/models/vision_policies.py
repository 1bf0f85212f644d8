"""The simulated pi05-droid and cosmos3-edge-policy-droid: models that decide from their frames.

Each request: find the cup and block in the catalogue's views (``scene_vision``), choose the
phase and the hand path (``grasp_policy``), solve the joints (``droid.kinematics``) and write them
in the model's own action space: pi05-droid's cumulative joint deltas from the request-time joints
(clipped to [-1, 1]), cosmos3's absolute joint targets; the gripper column is 0 open, 1 closed.
Determinism: the same frames, state, instruction and seed give the same rows.
"""

from __future__ import annotations

import abc
from typing import Any, Dict, List

import numpy as np

from sequence_ai_gateway.droid import kinematics
from sequence_ai_gateway.models import catalogue, grasp_policy, scene_vision
from sequence_ai_gateway.policies import (
    AbsoluteJointReach,
    Chunk,
    DroidJointDeltaReach,
    EeAbsoluteReach,
    PolicyObservation,
    Rows,
    StatelessEeDelta,
    observation_rng,
    simulated_inference_ms,
)

# How far inside the joint limits the looking models keep their targets (rows_for).
LIMIT_MARGIN_RAD = 1e-6


def _joints(observation: PolicyObservation) -> np.ndarray:
    joints = np.asarray(observation.joint_positions, dtype=float)
    return np.clip(joints, kinematics.LOWER, kinematics.UPPER)


class LookingDroidPolicy(abc.ABC):
    """The shared decision of the looking DROID models; subclasses write the rows."""

    def __init__(self, name: str) -> None:
        self.row: Dict[str, Any] = catalogue.simulated_row(name)
        self.inference_ms = simulated_inference_ms(self.row)

    def steps(self, observation: PolicyObservation) -> Rows:
        return self.chunk(observation).rows

    def chunk(self, observation: PolicyObservation) -> Chunk:
        plan = self.decide(observation)
        return Chunk(self.rows_for(observation, plan), list(plan.notes))

    def decide(self, observation: PolicyObservation) -> grasp_policy.Plan:
        """The phase, hand path and gripper values for this observation."""
        q = _joints(observation)
        n = int(self.row["action_horizon"])
        dt = 1.0 / float(self.row["control_hz"])
        goal = grasp_policy.goal_of(observation.instruction)
        tcp = kinematics.tcp_pose(q)[:3, 3]
        gripper = float(observation.gripper[0]) if observation.gripper else 0.0
        if goal is None:
            return grasp_policy.hold(
                tcp,
                n,
                gripper,
                f"instruction {observation.instruction!r} is not a task this simulated model "
                "knows (pick up the cup, put the cup on the blue block, or one of their steps): "
                "holding in place",
            )
        return grasp_policy.plan(goal, self.scene(observation, q, tcp, gripper), n, dt)

    def rows_for(self, observation: PolicyObservation, plan: grasp_policy.Plan) -> Rows:
        """The plan's rows in this model's action space, with the seed's per-chunk offset."""
        q = _joints(observation)
        dt = 1.0 / float(self.row["control_hz"])
        if plan.keeps_joints:
            joints = [q.copy() for _ in plan.positions]
        else:
            joints = grasp_policy.joint_path(q, plan.positions, dt)
        # A learned policy's error is mostly a per-chunk offset: one draw per request. Its
        # targets stay inside the joint limits (a plan at a limit is not pushed past it), by a
        # margin the robot's measured + (target - measured) cannot round across.
        rng = observation_rng(observation)
        offset = np.array([rng.gauss(0.0, grasp_policy.NOISE_RAD) for _ in range(7)])
        lower, upper = kinematics.LOWER + LIMIT_MARGIN_RAD, kinematics.UPPER - LIMIT_MARGIN_RAD
        targets = [np.clip(j + offset, lower, upper) for j in joints]
        measured = np.asarray(observation.joint_positions, dtype=float)
        return self.write(measured, targets, plan.gripper)

    def scene(
        self, observation: PolicyObservation, q: np.ndarray, tcp: np.ndarray, gripper: float
    ) -> grasp_policy.Scene:
        cups, blocks, sizes = scene_vision.sightings(observation.images, self.row["camera_views"])
        cup = scene_vision.locate(cups, sizes, q, scene_vision.CUP_HEIGHT / 2.0)
        block = scene_vision.locate(blocks, sizes, q, scene_vision.BLOCK_HEIGHT / 2.0)
        return grasp_policy.Scene(cup, block, tcp, gripper)

    @abc.abstractmethod
    def write(self, q: np.ndarray, joints: List[np.ndarray], gripper: List[float]) -> Rows:
        """The planned joints and gripper as rows of this model's action space."""


class LookingPi05Droid(LookingDroidPolicy):
    """pi05-droid: row = joints - request-time joints as measured (clipped to [-1, 1]),
    gripper."""

    def __init__(self) -> None:
        super().__init__("pi05-droid")

    def write(self, q: np.ndarray, joints: List[np.ndarray], gripper: List[float]) -> Rows:
        return [[*np.clip(j - q, -1.0, 1.0).tolist(), g] for j, g in zip(joints, gripper)]


class LookingCosmos3Droid(LookingDroidPolicy):
    """cosmos3-edge-policy-droid: row = absolute joint targets, gripper."""

    def __init__(self) -> None:
        super().__init__("cosmos3-edge-policy-droid")

    def write(self, q: np.ndarray, joints: List[np.ndarray], gripper: List[float]) -> Rows:
        lower, upper = kinematics.LOWER, kinematics.UPPER
        return [[*np.clip(j, lower, upper).tolist(), g] for j, g in zip(joints, gripper)]


def builtin_policies() -> List[Any]:
    """The simulated act models of the local catalogue, in the catalogue's order."""
    row = catalogue.simulated_row
    return [
        LookingPi05Droid(),
        LookingCosmos3Droid(),
        DroidJointDeltaReach(),
        AbsoluteJointReach(
            row("sim-droid-absolute-reach"),
            catalogue.PANDA_LOWER,
            catalogue.PANDA_UPPER,
            max_step=0.1,
        ),
        AbsoluteJointReach(
            row("sim-bimanual-reach"), [-2.6] * 12, [2.6] * 12, max_step=0.05, arms=2
        ),
        StatelessEeDelta(),
        EeAbsoluteReach(),
    ]
