"""The gateway's own Panda kinematics: the same forward kinematics as the sim's arm, and an IK
that puts the hand where the looking models need it over the whole layout area."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sequence_ai_gateway.droid import kinematics
from sequence_ai_lab.robots.shared.arm import forward_kinematics

HOME = [0.0, -0.785, 0.0, -2.356, 0.0, 1.571, 0.785]
joint_vectors = st.tuples(
    *[st.floats(lo, hi) for lo, hi in zip(kinematics.LOWER, kinematics.UPPER)]
)


@settings(max_examples=50, deadline=None)
@given(joint_vectors)
def test_forward_kinematics_agree_with_the_sims_arm(q):
    ours, theirs = kinematics.frames(q), forward_kinematics(np.array(q))
    assert len(ours) == len(theirs)
    for a, b in zip(ours, theirs):
        assert a == pytest.approx(b, abs=1e-12)


@pytest.mark.parametrize("x", [0.40, 0.525, 0.65])
@pytest.mark.parametrize("y", [-0.25, 0.0, 0.25])
@pytest.mark.parametrize("z", [0.055, 0.22])
def test_ik_reaches_the_layout_area_pointing_down_within_the_limits(x, y, z):
    # As the models use it: each call seeded by the last, a few centimetres apart.
    start = kinematics.tcp_pose(HOME)[:3, 3]
    goal = np.array([x, y, z])
    q = np.array(HOME)
    for k in range(1, 41):
        q = kinematics.solve(q, start + (goal - start) * min(1.0, k / 30))
    pose = kinematics.tcp_pose(q)
    assert pose[:3, 3] == pytest.approx(goal, abs=1e-3)
    assert pose[:3, :3] == pytest.approx(kinematics.DOWNWARD, abs=1e-3)
    assert np.all(q >= kinematics.LOWER) and np.all(q <= kinematics.UPPER)
