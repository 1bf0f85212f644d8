"""Pose conversions at the message boundary (issue 21): pose vectors <-> quaternions.

A pose vector is `[x, y, z, roll, pitch, yaw]` (metres, radians) with ROS RPY: fixed axes X,
then Y, then Z, i.e. R = Rz(yaw) * Ry(pitch) * Rx(roll). Quaternions are (x, y, z, w), as in
geometry_msgs. Pure `math`, so the simulator and the node share this one file.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

Quaternion = tuple[float, float, float, float]
Position = tuple[float, float, float]


def rpy_to_quaternion(roll: float, pitch: float, yaw: float) -> Quaternion:
    """The unit quaternion (x, y, z, w) of ROS roll, pitch, yaw (radians)."""
    cr, sr = math.cos(roll / 2.0), math.sin(roll / 2.0)
    cp, sp = math.cos(pitch / 2.0), math.sin(pitch / 2.0)
    cy, sy = math.cos(yaw / 2.0), math.sin(yaw / 2.0)
    return (
        sr * cp * cy - cr * sp * sy,
        cr * sp * cy + sr * cp * sy,
        cr * cp * sy - sr * sp * cy,
        cr * cp * cy + sr * sp * sy,
    )


def normalized(q: Sequence[float]) -> Quaternion:
    """`q` scaled to unit length; ValueError for a zero or non-finite quaternion."""
    x, y, z, w = (float(v) for v in q)
    norm = math.sqrt(x * x + y * y + z * z + w * w)
    if not (math.isfinite(norm) and norm > 0.0):
        raise ValueError(f"quaternion {list(q)} has norm {norm}; expected a finite norm > 0")
    return (x / norm, y / norm, z / norm, w / norm)


def quaternion_to_rpy(q: Sequence[float]) -> tuple[float, float, float]:
    """ROS roll, pitch, yaw (radians) of quaternion (x, y, z, w); it is normalised first.

    At pitch = +-pi/2 (gimbal lock) roll and yaw are not unique; the pair returned still
    gives back the same rotation."""
    x, y, z, w = normalized(q)
    roll = math.atan2(2.0 * (w * x + y * z), 1.0 - 2.0 * (x * x + y * y))
    # Clamped: rounding can push the sine just past 1 near gimbal lock.
    pitch = math.asin(max(-1.0, min(1.0, 2.0 * (w * y - z * x))))
    yaw = math.atan2(2.0 * (w * z + x * y), 1.0 - 2.0 * (y * y + z * z))
    return (roll, pitch, yaw)


def pose_vector_to_pose(vector: Sequence[float]) -> tuple[Position, Quaternion]:
    """(position, quaternion) of a pose vector [x, y, z, roll, pitch, yaw]."""
    if len(vector) != 6:
        raise ValueError(
            f"pose vector has {len(vector)} values; expected 6 (x, y, z, roll, pitch, yaw)"
        )
    x, y, z, roll, pitch, yaw = (float(v) for v in vector)
    return (x, y, z), rpy_to_quaternion(roll, pitch, yaw)


def pose_to_vector(position: Sequence[float], quaternion: Sequence[float]) -> list[float]:
    """The pose vector [x, y, z, roll, pitch, yaw] of a position and quaternion (x, y, z, w)."""
    if len(position) != 3 or len(quaternion) != 4:
        raise ValueError(
            f"pose has {len(position)} position and {len(quaternion)} orientation values; "
            "expected 3 (x, y, z) and 4 (x, y, z, w)"
        )
    return [float(v) for v in position] + list(quaternion_to_rpy(quaternion))


def matrix_to_quaternion(matrix: Sequence[Sequence[float]]) -> Quaternion:
    """The unit quaternion (x, y, z, w) of a 3x3 rotation matrix (rows), with w >= 0."""
    (m00, m01, m02), (m10, m11, m12), (m20, m21, m22) = (
        [float(v) for v in row[:3]] for row in matrix[:3]
    )
    trace = m00 + m11 + m22
    # Branch on the largest diagonal term so the square root never nears zero.
    if trace > 0.0:
        s = 2.0 * math.sqrt(trace + 1.0)
        q = ((m21 - m12) / s, (m02 - m20) / s, (m10 - m01) / s, 0.25 * s)
    elif m00 > m11 and m00 > m22:
        s = 2.0 * math.sqrt(1.0 + m00 - m11 - m22)
        q = (0.25 * s, (m01 + m10) / s, (m02 + m20) / s, (m21 - m12) / s)
    elif m11 > m22:
        s = 2.0 * math.sqrt(1.0 + m11 - m00 - m22)
        q = ((m01 + m10) / s, 0.25 * s, (m12 + m21) / s, (m02 - m20) / s)
    else:
        s = 2.0 * math.sqrt(1.0 + m22 - m00 - m11)
        q = ((m02 + m20) / s, (m12 + m21) / s, 0.25 * s, (m10 - m01) / s)
    x, y, z, w = normalized(q)
    return (-x, -y, -z, -w) if w < 0.0 else (x, y, z, w)


def quaternion_to_matrix(q: Sequence[float]) -> list[list[float]]:
    """The 3x3 rotation matrix (rows) of quaternion (x, y, z, w); it is normalised first."""
    x, y, z, w = normalized(q)
    return [
        [1.0 - 2.0 * (y * y + z * z), 2.0 * (x * y - z * w), 2.0 * (x * z + y * w)],
        [2.0 * (x * y + z * w), 1.0 - 2.0 * (x * x + z * z), 2.0 * (y * z - x * w)],
        [2.0 * (x * z - y * w), 2.0 * (y * z + x * w), 1.0 - 2.0 * (x * x + y * y)],
    ]


Matrix = tuple[Position, Position, Position]


@dataclass(frozen=True)
class Pose:
    """An end-effector pose: position (m) and orientation as a unit quaternion (x, y, z, w)."""

    position: tuple[float, float, float]
    orientation: tuple[float, float, float, float] = (0.0, 0.0, 0.0, 1.0)


@dataclass(frozen=True)
class Transform:
    """A rigid transform: a point p maps to rotation · p + translation (rotation as rows)."""

    rotation: Matrix = ((1.0, 0.0, 0.0), (0.0, 1.0, 0.0), (0.0, 0.0, 1.0))
    translation: Position = (0.0, 0.0, 0.0)

    @classmethod
    def of_pose(cls, position: Sequence[float], quaternion: Sequence[float]) -> Transform:
        """The transform that a frame's pose (in another frame) is: its points to the other's."""
        rows = quaternion_to_matrix(quaternion)
        x, y, z = (float(v) for v in position)
        return cls(_matrix(rows), (x, y, z))

    def vector(self, v: Sequence[float]) -> Position:
        """A free vector (a velocity, an angular velocity): rotated only."""
        return _rows_times(self.rotation, v)

    def point(self, p: Sequence[float]) -> Position:
        x, y, z = _rows_times(self.rotation, p)
        tx, ty, tz = self.translation
        return (x + tx, y + ty, z + tz)

    def pose_vector(self, vector: Sequence[float]) -> list[float]:
        """A pose vector [x, y, z, roll, pitch, yaw] expressed in the target frame."""
        position, quaternion = pose_vector_to_pose(vector)
        rows = quaternion_to_matrix(quaternion)
        turned = [[sum(self.rotation[i][k] * rows[k][j] for k in range(3)) for j in range(3)]
                  for i in range(3)]
        return pose_to_vector(self.point(position), matrix_to_quaternion(turned))


def _rows_times(rows: Matrix, v: Sequence[float]) -> Position:
    a, b, c = (float(x) for x in v)
    x, y, z = (r[0] * a + r[1] * b + r[2] * c for r in rows)
    return (x, y, z)


def _matrix(rows: Sequence[Sequence[float]]) -> Matrix:
    first, second, third = ((float(r[0]), float(r[1]), float(r[2])) for r in rows[:3])
    return (first, second, third)
