"""Panda kinematics of the Cartesian simulator: known TCP poses, Jacobian, the damped IK step."""

from __future__ import annotations

import math

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from sequence_ai_lab.robots.sim_cartesian import panda_kinematics as kin
from sequence_ai_ros.core.pose_math import matrix_to_quaternion, quaternion_to_rpy


def test_ready_pose_tcp_is_the_published_panda_value():
    # Franka's ready pose puts panda_hand_tcp at (0.307, 0, 0.487), pointing straight down.
    tcp = kin.tcp_pose(kin.READY_POSE)
    np.testing.assert_allclose(tcp[:3, 3], [0.307, 0.0, 0.487], atol=0.003)
    roll, pitch, yaw = quaternion_to_rpy(matrix_to_quaternion(tcp[:3, :3].tolist()))
    assert abs(abs(roll) - math.pi) < 0.01 and abs(pitch) < 0.01 and abs(yaw) < 0.01


def test_zero_pose_tcp_is_straight_above_the_flange_offset():
    # All joints 0: flange at (0.088, 0, 0.926), the TCP 0.1034 m below it.
    tcp = kin.tcp_pose(np.zeros(7))
    np.testing.assert_allclose(tcp[:3, 3], [0.088, 0.0, 0.926 - 0.1034], atol=0.001)


joints = st.tuples(*[
    st.floats(lo + 0.1, hi - 0.1) for lo, hi in zip(kin.LOWER_LIMITS, kin.UPPER_LIMITS)
]).map(np.array)


@settings(max_examples=30, deadline=None)
@given(joints)
def test_jacobian_matches_finite_differences(q):
    jac = kin.jacobian(q)
    h = 1e-6
    for i in range(7):
        dq = np.zeros(7)
        dq[i] = h
        before, after = kin.tcp_pose(q), kin.tcp_pose(q + dq)
        np.testing.assert_allclose((after[:3, 3] - before[:3, 3]) / h, jac[:3, i], atol=1e-4)
        turn = kin.rotation_vector(after[:3, :3] @ before[:3, :3].T) / h
        np.testing.assert_allclose(turn, jac[3:, i], atol=1e-4)


@settings(max_examples=40, deadline=None)
@given(joints, st.tuples(*[st.floats(-0.01, 0.01)] * 3), st.tuples(*[st.floats(-0.02, 0.02)] * 3))
def test_ik_step_reduces_the_pose_error_and_respects_the_limits(q, dx, dw):
    start = kin.tcp_pose(q)
    goal_position = start[:3, 3] + np.array(dx)
    goal_rotation = kin.rotation_matrix(np.array(dw)) @ start[:3, :3]
    error = kin.pose_error(start, goal_position, goal_rotation)
    moved = kin.ik_step(q, error, dt=0.01)
    assert np.all(moved >= kin.LOWER_LIMITS) and np.all(moved <= kin.UPPER_LIMITS)
    assert np.all(np.abs(moved - q) <= kin.VELOCITY_LIMITS * 0.01 + 1e-12)
    after = kin.pose_error(kin.tcp_pose(moved), goal_position, goal_rotation)
    if np.linalg.norm(error) > 1e-4:
        assert np.linalg.norm(after) < np.linalg.norm(error)


def test_ik_step_at_a_joint_limit_stays_inside_and_still_moves_the_tcp():
    q = kin.READY_POSE.copy()
    q[3] = kin.UPPER_LIMITS[3]  # elbow at its limit: -0.0698 rad, the arm stretched out
    start = kin.tcp_pose(q)
    for _ in range(50):
        q = kin.ik_step(q, np.array([0.004, 0.0, 0.0, 0.0, 0.0, 0.0]), dt=0.01)
        assert np.all(q >= kin.LOWER_LIMITS) and np.all(q <= kin.UPPER_LIMITS)
    # The other joints make up for the locked elbow: the TCP still goes forward.
    assert kin.tcp_pose(q)[0, 3] > start[0, 3] + 0.05


def test_ik_step_is_bounded_by_the_joint_velocity_limits():
    big = np.array([1.0, 0.0, 0.0, 0.0, 0.0, 0.0])  # a metre in one step: far beyond reach
    moved = kin.ik_step(kin.READY_POSE, big, dt=0.01)
    assert np.all(np.abs(moved - kin.READY_POSE) <= kin.VELOCITY_LIMITS * 0.01 + 1e-12)
    assert kin.tcp_pose(moved)[0, 3] > kin.tcp_pose(kin.READY_POSE)[0, 3]


def test_zero_time_step_moves_nothing():
    np.testing.assert_array_equal(kin.ik_step(kin.READY_POSE, np.ones(6), 0.0), kin.READY_POSE)
