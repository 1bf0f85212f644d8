"""End-effector pose arithmetic of the simulated Cartesian policies (pure Python, no numpy).

A pose vector is ``[x, y, z, roll, pitch, yaw]`` in the robot's base frame: metres, radians,
ROS RPY (fixed axes X, then Y, then Z: R = Rz(yaw) Ry(pitch) Rx(roll)).
"""

from __future__ import annotations

import math
from typing import List, Sequence, Tuple

Matrix = List[List[float]]
Vector = List[float]

# The hand pointing straight down, fingers along the base's y axis: the Panda ready pose's
# orientation, kept by the simulated policies so the wrist never winds up.
DOWNWARD_RPY: Tuple[float, float, float] = (math.pi, 0.0, 0.0)


def rpy_matrix(roll: float, pitch: float, yaw: float) -> Matrix:
    cr, sr = math.cos(roll), math.sin(roll)
    cp, sp = math.cos(pitch), math.sin(pitch)
    cy, sy = math.cos(yaw), math.sin(yaw)
    return [
        [cy * cp, cy * sp * sr - sy * cr, cy * sp * cr + sy * sr],
        [sy * cp, sy * sp * sr + cy * cr, sy * sp * cr - cy * sr],
        [-sp, cp * sr, cp * cr],
    ]


def matrix_rpy(m: Matrix) -> Vector:
    """ROS RPY of a rotation matrix (pitch in [-pi/2, pi/2])."""
    pitch = math.asin(max(-1.0, min(1.0, -m[2][0])))
    return [math.atan2(m[2][1], m[2][2]), pitch, math.atan2(m[1][0], m[0][0])]


def _matmul(a: Matrix, b: Matrix) -> Matrix:
    return [[sum(a[i][k] * b[k][j] for k in range(3)) for j in range(3)] for i in range(3)]


def _transpose(m: Matrix) -> Matrix:
    return [[m[j][i] for j in range(3)] for i in range(3)]


def rotation_vector(m: Matrix) -> Vector:
    """Axis times angle (rad, in [0, pi]) of a rotation matrix."""
    skew = [m[2][1] - m[1][2], m[0][2] - m[2][0], m[1][0] - m[0][1]]
    sine = 0.5 * math.sqrt(sum(v * v for v in skew))
    # atan2 of sine and cosine keeps small angles exact, where acos of the trace would not.
    angle = math.atan2(sine, (m[0][0] + m[1][1] + m[2][2] - 1.0) / 2.0)
    if sine > 1e-6:
        return [v * angle / (2.0 * sine) for v in skew]
    if angle < 1.0:
        return [v / 2.0 for v in skew]  # angle ~ sine: first order is exact enough
    # A half turn: the axis is the column of R + I with the largest norm.
    sym = [[m[i][j] + (1.0 if i == j else 0.0) for j in range(3)] for i in range(3)]
    column = max(range(3), key=lambda j: sum(sym[i][j] ** 2 for i in range(3)))
    axis = [sym[i][column] for i in range(3)]
    norm = math.sqrt(sum(a * a for a in axis))
    return [angle * a / norm for a in axis]


def axis_angle_matrix(vector: Sequence[float]) -> Matrix:
    """Rotation matrix of an axis-times-angle vector (Rodrigues)."""
    angle = math.sqrt(sum(v * v for v in vector))
    if angle < 1e-12:
        return [[1.0, 0.0, 0.0], [0.0, 1.0, 0.0], [0.0, 0.0, 1.0]]
    x, y, z = (v / angle for v in vector)
    c, s, t = math.cos(angle), math.sin(angle), 1.0 - math.cos(angle)
    return [
        [t * x * x + c, t * x * y - s * z, t * x * z + s * y],
        [t * x * y + s * z, t * y * y + c, t * y * z - s * x],
        [t * x * z - s * y, t * y * z + s * x, t * z * z + c],
    ]


def orientation_error(rpy: Sequence[float], goal_rpy: Sequence[float]) -> Vector:
    """The base-frame rotation vector turning orientation ``rpy`` into ``goal_rpy``."""
    current, goal = rpy_matrix(*rpy), rpy_matrix(*goal_rpy)
    return rotation_vector(_matmul(goal, _transpose(current)))


def rotate(rpy: Sequence[float], vector: Sequence[float]) -> Vector:
    """RPY of orientation ``rpy`` turned by the base-frame rotation vector ``vector``."""
    return matrix_rpy(_matmul(axis_angle_matrix(vector), rpy_matrix(*rpy)))


def unwrap(angles: Sequence[float], near: Sequence[float]) -> Vector:
    """Each angle plus a multiple of 2 pi that brings it within pi of its ``near`` value."""
    return [a + 2.0 * math.pi * round((n - a) / (2.0 * math.pi)) for a, n in zip(angles, near)]


def distance(a: Sequence[float], b: Sequence[float]) -> float:
    return math.sqrt(sum((x - y) ** 2 for x, y in zip(a, b)))


def step_towards(position: Sequence[float], goal: Sequence[float], max_step: float) -> Vector:
    """``position`` moved straight towards ``goal`` by at most ``max_step`` (Euclidean)."""
    gap = distance(position, goal)
    if gap <= max_step:
        return list(goal)
    k = max_step / gap
    return [p + k * (g - p) for p, g in zip(position, goal)]
