"""The Franka Panda's kinematics for the simulated DROID models: DH forward kinematics and a
damped least-squares inverse kinematics (the gateway's own; it imports nothing of the robot's).

Modified DH parameters as Franka publishes them, read from the robot's description
(``description.FRANKA_DROID``): the flange 0.107 m along joint 7's axis, the hand TCP
(``panda_hand_tcp``) 0.1034 m further and turned -45 degrees about that axis.
"""

from __future__ import annotations

import math
from typing import List, Sequence

import numpy as np

from sequence_ai_gateway.droid.description import FRANKA_DROID

# (a, d, alpha) of joints 1..7, metres and radians (Craig's modified convention).
PANDA_DH = FRANKA_DROID.dh
FLANGE_D = FRANKA_DROID.flange_d
TCP_D = FRANKA_DROID.tcp_d
TCP_TURN = FRANKA_DROID.tcp_turn
# Franka's published joint speed limits (rad/s).
VELOCITY_LIMITS = np.array(FRANKA_DROID.velocity)
LOWER = np.array(FRANKA_DROID.lower)
UPPER = np.array(FRANKA_DROID.upper)
# The hand pointing straight down, fingers closing along the base's y axis (the ready pose's).
DOWNWARD = np.diag([1.0, -1.0, -1.0])
# Least-squares damping (m-equivalent): bounded steps near a singularity, close tracking else.
DAMPING = 0.02


def _dh(a: float, d: float, alpha: float, theta: float) -> np.ndarray:
    ca, sa, ct, st = math.cos(alpha), math.sin(alpha), math.cos(theta), math.sin(theta)
    return np.array(
        [
            [ct, -st, 0.0, a],
            [st * ca, ct * ca, -sa, -d * sa],
            [st * sa, ct * sa, ca, d * ca],
            [0.0, 0.0, 0.0, 1.0],
        ]
    )


def frames(q: Sequence[float]) -> List[np.ndarray]:
    """4x4 base-frame poses: base, joints 1..7, flange, hand TCP."""
    pose = np.eye(4)
    out = [pose]
    for (a, d, alpha), theta in zip(PANDA_DH, q):
        pose = pose @ _dh(a, d, alpha, float(theta))
        out.append(pose)
    pose = pose @ _dh(0.0, FLANGE_D, 0.0, 0.0)
    out.append(pose)
    out.append(pose @ _dh(0.0, TCP_D, 0.0, TCP_TURN))
    return out


def flange_pose(q: Sequence[float]) -> np.ndarray:
    return frames(q)[8]


def tcp_pose(q: Sequence[float]) -> np.ndarray:
    return frames(q)[9]


def _jacobian(poses: List[np.ndarray]) -> np.ndarray:
    """6x7 geometric Jacobian of the TCP: joint i turns about frame i's z axis."""
    tip = poses[9][:3, 3]
    columns = [np.concatenate([np.cross(p[:3, 2], tip - p[:3, 3]), p[:3, 2]]) for p in poses[1:8]]
    return np.array(columns).T


def _rotation_error(goal: np.ndarray, current: np.ndarray) -> np.ndarray:
    """Small-angle base-frame rotation vector from ``current`` to ``goal`` (exact direction)."""
    r = goal @ current.T
    skew = np.array([r[2, 1] - r[1, 2], r[0, 2] - r[2, 0], r[1, 0] - r[0, 1]])
    sine = 0.5 * float(np.linalg.norm(skew))
    angle = math.atan2(sine, (float(np.trace(r)) - 1.0) / 2.0)
    if sine < 1e-9:
        return skew / 2.0
    return skew * (angle / (2.0 * sine))


def _rotation(vector: np.ndarray) -> np.ndarray:
    """3x3 rotation of an axis-times-angle vector (Rodrigues)."""
    angle = float(np.linalg.norm(vector))
    if angle < 1e-12:
        return np.eye(3)
    x, y, z = vector / angle
    k = np.array([[0.0, -z, y], [z, 0.0, -x], [-y, x, 0.0]])
    return np.eye(3) + math.sin(angle) * k + (1.0 - math.cos(angle)) * (k @ k)


def solve(
    q_seed: Sequence[float],
    position: Sequence[float],
    rotation: np.ndarray = DOWNWARD,
    iterations: int = 6,
    tolerance_m: float = 5e-4,
    max_turn_rad: float = 0.15,
) -> np.ndarray:
    """Joints near ``q_seed`` putting the TCP at ``position`` with ``rotation`` (DLS iterations).

    A hand more than ``max_turn_rad`` from ``rotation`` is aimed only that far towards it, so
    it turns over several calls instead of swinging the wrist in one. The result stays within
    the joint limits.
    """
    q = np.clip(np.asarray(q_seed, dtype=float), LOWER, UPPER)
    goal = np.asarray(position, dtype=float)
    current = frames(q)[9][:3, :3]
    turn = _rotation_error(rotation, current)
    angle = float(np.linalg.norm(turn))
    if angle > max_turn_rad:
        rotation = _rotation(turn * (max_turn_rad / angle)) @ current
    eye6 = DAMPING**2 * np.eye(6)
    for _ in range(iterations):
        poses = frames(q)
        linear = goal - poses[9][:3, 3]
        angular = _rotation_error(rotation, poses[9][:3, :3])
        if float(np.linalg.norm(linear)) < tolerance_m and float(np.linalg.norm(angular)) < 1e-3:
            break
        j = _jacobian(poses)
        dq = j.T @ np.linalg.solve(j @ j.T + eye6, np.concatenate([linear, angular]))
        q = np.clip(q + dq, LOWER, UPPER)
    return q
