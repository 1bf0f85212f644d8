"""Panda kinematics for the Cartesian simulator: hand TCP pose, Jacobian, one damped IK step.

The forward kinematics are arm.py's (the Panda's modified DH parameters, flange, then the hand
TCP 0.1034 m further along the flange axis and turned -45 degrees: `panda_hand_tcp`). No ROS.
"""

from __future__ import annotations

import math

import numpy as np

from sequence_ai_lab.robots.shared.arm import (
    HOME,
    LOWER_LIMITS,
    UPPER_LIMITS,
    VELOCITY_LIMITS,
    forward_kinematics,
)

READY_POSE = HOME
# Damping of the least-squares step (m-equivalent): small enough to track well, large enough
# that the step stays bounded near a singularity (the Panda's wrist at joint 6 = 0, say).
DEFAULT_DAMPING = 0.05


def tcp_pose(q: np.ndarray) -> np.ndarray:
    """4x4 pose of the hand TCP in panda_link0."""
    return forward_kinematics(np.asarray(q, dtype=float))[-1]


def jacobian(q: np.ndarray) -> np.ndarray:
    """6x7 geometric Jacobian of the TCP (linear rows, then angular), in panda_link0."""
    poses = forward_kinematics(np.asarray(q, dtype=float))
    tip = poses[-1][:3, 3]
    columns = []
    # Modified DH: joint i turns about the z axis of frame i (poses[i], i = 1..7).
    for pose in poses[1:8]:
        axis, origin = pose[:3, 2], pose[:3, 3]
        columns.append(np.concatenate([np.cross(axis, tip - origin), axis]))
    return np.array(columns).T


def rotation_vector(rotation: np.ndarray) -> np.ndarray:
    """Axis times angle (rad, in [0, pi]) of a 3x3 rotation matrix."""
    skew = np.array([
        rotation[2, 1] - rotation[1, 2],
        rotation[0, 2] - rotation[2, 0],
        rotation[1, 0] - rotation[0, 1],
    ])
    sine = 0.5 * float(np.linalg.norm(skew))
    # atan2 of sine and cosine keeps small angles exact, where acos of the trace would not.
    angle = math.atan2(sine, (float(np.trace(rotation)) - 1.0) / 2.0)
    if sine > 1e-6:
        return skew * (angle / (2.0 * sine))
    if angle < 1.0:
        return skew / 2.0  # angle ~ sine: first order is exact enough
    # A half turn: the axis is the longest column of R + I.
    sym = rotation + np.eye(3)
    axis = sym[:, int(np.argmax(np.linalg.norm(sym, axis=0)))]
    return angle * axis / np.linalg.norm(axis)


def rotation_matrix(vector: np.ndarray) -> np.ndarray:
    """3x3 rotation of an axis-times-angle vector (Rodrigues)."""
    angle = float(np.linalg.norm(vector))
    if angle < 1e-12:
        return np.eye(3)
    x, y, z = np.asarray(vector, dtype=float) / angle
    k = np.array([[0.0, -z, y], [z, 0.0, -x], [-y, x, 0.0]])
    return np.eye(3) + math.sin(angle) * k + (1.0 - math.cos(angle)) * (k @ k)


def pose_error(current: np.ndarray, position: np.ndarray, rotation: np.ndarray) -> np.ndarray:
    """6-vector from TCP pose `current` (4x4) to a goal: position difference (m), then the
    base-frame rotation vector (rad) turning the current orientation into `rotation`."""
    linear = np.asarray(position, dtype=float) - current[:3, 3]
    angular = rotation_vector(np.asarray(rotation, dtype=float) @ current[:3, :3].T)
    return np.concatenate([linear, angular])


def ik_step(
    q: np.ndarray, displacement: np.ndarray, dt: float, damping: float = DEFAULT_DAMPING
) -> np.ndarray:
    """Joints after moving the TCP by the 6-vector `displacement` (m, rad) over `dt` seconds.

    Damped least squares, dq = J^T (J J^T + d^2 I)^-1 x; the step is scaled down as a whole
    to the joint velocity limits (so the TCP keeps its direction), and a joint that would
    cross a limit is taken out and the step solved again with the others, so the result
    always lies within the limits.
    """
    q = np.asarray(q, dtype=float)
    if dt <= 0.0:
        return q.copy()
    full = jacobian(q)
    free = np.ones(7, dtype=bool)
    dq = np.zeros(7)
    for _ in range(7):
        j = full * free  # a locked joint's column is zero: the others make up for it
        dq = j.T @ np.linalg.solve(j @ j.T + damping**2 * np.eye(6), displacement)
        ratio = float(np.max(np.abs(dq) / (VELOCITY_LIMITS * dt)))
        if ratio > 1.0:
            dq = dq / ratio
        crossing = ((q + dq < LOWER_LIMITS) | (q + dq > UPPER_LIMITS)) & free
        if not crossing.any():
            break
        free &= ~crossing
    return np.clip(q + dq, LOWER_LIMITS, UPPER_LIMITS)

