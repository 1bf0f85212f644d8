"""pose_math: ROS RPY <-> quaternion, pose vectors, rotation matrices."""

import math

import pytest

from sequence_ai_ros.core import pose_math


def _rx(a: float) -> list[list[float]]:
    c, s = math.cos(a), math.sin(a)
    return [[1.0, 0.0, 0.0], [0.0, c, -s], [0.0, s, c]]


def _ry(a: float) -> list[list[float]]:
    c, s = math.cos(a), math.sin(a)
    return [[c, 0.0, s], [0.0, 1.0, 0.0], [-s, 0.0, c]]


def _rz(a: float) -> list[list[float]]:
    c, s = math.cos(a), math.sin(a)
    return [[c, -s, 0.0], [s, c, 0.0], [0.0, 0.0, 1.0]]


def _mul(a: list[list[float]], b: list[list[float]]) -> list[list[float]]:
    return [[sum(a[i][k] * b[k][j] for k in range(3)) for j in range(3)] for i in range(3)]


def _same_rotation(a: tuple[float, ...], b: tuple[float, ...]) -> bool:
    return abs(abs(sum(x * y for x, y in zip(a, b))) - 1.0) < 1e-9


def test_known_quaternions():
    assert pose_math.rpy_to_quaternion(0.0, 0.0, 0.0) == pytest.approx((0, 0, 0, 1))
    half = math.sqrt(0.5)
    assert pose_math.rpy_to_quaternion(0.0, 0.0, math.pi / 2) == pytest.approx((0, 0, half, half))
    assert pose_math.rpy_to_quaternion(math.pi / 2, 0.0, 0.0) == pytest.approx((half, 0, 0, half))
    assert pose_math.rpy_to_quaternion(0.0, math.pi / 2, 0.0) == pytest.approx((0, half, 0, half))
    # The Panda's hand points down: roll pi about X.
    assert pose_math.rpy_to_quaternion(math.pi, 0.0, 0.0) == pytest.approx((1, 0, 0, 0), abs=1e-12)


@pytest.mark.parametrize(
    "rpy", [(0.1, -0.2, 0.3), (math.pi, 0.0, 0.0), (-2.5, 1.2, -3.0), (0.4, -1.5, 2.9)]
)
def test_rpy_is_fixed_axis_xyz_and_round_trips(rpy):
    roll, pitch, yaw = rpy
    q = pose_math.rpy_to_quaternion(roll, pitch, yaw)
    expected = _mul(_rz(yaw), _mul(_ry(pitch), _rx(roll)))
    for row, want in zip(pose_math.quaternion_to_matrix(q), expected):
        assert row == pytest.approx(want, abs=1e-12)
    assert _same_rotation(pose_math.matrix_to_quaternion(expected), q)
    back = pose_math.quaternion_to_rpy(q)
    assert _same_rotation(pose_math.rpy_to_quaternion(*back), q)
    if abs(pitch) < math.pi / 2 - 1e-3 and abs(roll) < math.pi:
        assert back == pytest.approx(rpy, abs=1e-9)


def test_matrix_branches_and_sign():
    for matrix in (_rx(math.pi), _ry(math.pi), _rz(math.pi), _rz(-2.9), _mul(_rx(3.0), _ry(0.2))):
        q = pose_math.matrix_to_quaternion(matrix)
        assert q[3] >= 0.0
        assert math.isclose(sum(v * v for v in q), 1.0)
        for row, want in zip(pose_math.quaternion_to_matrix(q), matrix):
            assert row == pytest.approx(want, abs=1e-12)


def test_pose_vector_round_trip():
    vector = [0.4, -0.1, 0.3, math.pi - 0.1, 0.2, -0.7]
    position, q = pose_math.pose_vector_to_pose(vector)
    assert position == pytest.approx((0.4, -0.1, 0.3))
    assert pose_math.pose_to_vector(position, q) == pytest.approx(vector, abs=1e-12)
    # A non-unit quaternion from a message still gives its rotation.
    scaled = tuple(2.0 * v for v in q)
    assert pose_math.pose_to_vector(position, scaled) == pytest.approx(vector, abs=1e-12)


def test_bad_input_names_what_was_expected():
    with pytest.raises(ValueError, match="expected 6"):
        pose_math.pose_vector_to_pose([0.0] * 5)
    with pytest.raises(ValueError, match="expected 3"):
        pose_math.pose_to_vector([0.0, 0.0], (0, 0, 0, 1))
    with pytest.raises(ValueError, match="norm"):
        pose_math.quaternion_to_rpy((0.0, 0.0, 0.0, 0.0))
    with pytest.raises(ValueError, match="norm"):
        pose_math.normalized((math.nan, 0.0, 0.0, 1.0))
