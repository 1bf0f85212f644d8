"""Closed loop without the node: the Cartesian simulator's arm executing the gateway's simulated
Cartesian policies (called in-process) reaches the instruction's target."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pytest

pytest.importorskip("fastapi")

from sequence_ai_gateway.policies import (  # noqa: E402
    EeAbsoluteReach,
    PolicyObservation,
    StatelessEeDelta,
    ee_target,
)
from sequence_ai_lab.robots.sim_cartesian.cartesian_arm import CartesianArm  # noqa: E402
from sequence_ai_ros.core.pose_math import (  # noqa: E402
    matrix_to_quaternion,
    pose_to_vector,
    quaternion_to_matrix,
    rpy_to_quaternion,
)

SIM_DT = 0.01  # sim_cartesian's 100 Hz step
GOAL_S = 10.0


def measured_pose(arm: CartesianArm) -> list[float]:
    tcp = arm.tcp()
    return pose_to_vector(tcp[:3, 3].tolist(), matrix_to_quaternion(tcp[:3, :3].tolist()))


def play(
    arm: CartesianArm,
    policy: StatelessEeDelta | EeAbsoluteReach,
    instruction: str,
    send: Callable[[list[float], float], None],
) -> float:
    """Request a chunk from the measured pose, send each row at the model's rate while the arm
    steps at 100 Hz, request again when the chunk is done; for GOAL_S. Returns the end time."""
    hz = policy.row["control_hz"]
    substeps = round(1.0 / (hz * SIM_DT))
    now = 0.0
    for _ in range(round(GOAL_S * hz / policy.row["action_horizon"])):
        observation = PolicyObservation(
            instruction, [], [arm.gripper], seed=0, end_effector_pose=measured_pose(arm)
        )
        for row in policy.steps(observation):
            send(row, now)
            for _ in range(substeps):
                arm.step(SIM_DT, now)
                now += SIM_DT
    return now


@pytest.mark.slow  # over half a second of wall time
@pytest.mark.parametrize("instruction", ["pick up the sponge", "put the cup on the shelf"])
def test_ee_delta_policy_brings_the_tcp_to_the_target_in_10_s_of_25_hz_steps(instruction):
    arm = CartesianArm()
    target = np.array(ee_target(instruction))
    start = np.linalg.norm(arm.tcp()[:3, 3] - target)

    def send(row: list[float], now: float) -> None:
        arm.command_twist(row[:3], row[3:6], now)
        arm.command_gripper(row[6])

    play(arm, StatelessEeDelta(), instruction, send)
    end = np.linalg.norm(arm.tcp()[:3, 3] - target)
    assert start > 0.1 and end < 0.01, (start, end)
    assert arm.refused == 0 and arm.gripper == 1.0


@pytest.mark.slow  # over half a second of wall time
def test_ee_absolute_policy_brings_the_tcp_to_the_target_in_10_s_of_20_hz_steps():
    instruction = "stack the cups"
    arm = CartesianArm()
    target = np.array(ee_target(instruction))
    start = np.linalg.norm(arm.tcp()[:3, 3] - target)

    def send(row: list[float], now: float) -> None:
        rotation = np.array(quaternion_to_matrix(rpy_to_quaternion(*row[3:6])))
        arm.command_pose(row[:3], rotation, now)
        arm.command_gripper(row[6])

    play(arm, EeAbsoluteReach(), instruction, send)
    end = np.linalg.norm(arm.tcp()[:3, 3] - target)
    assert start > 0.1 and end < 0.005, (start, end)
    assert arm.refused == 0 and arm.gripper == 1.0
