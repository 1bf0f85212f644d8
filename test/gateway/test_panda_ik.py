"""The Panda's kinematics (the gateway's, which the sim's arm also uses): Franka's published
zero pose, and an IK that puts the hand where the looking models need it over the whole layout
area."""

from __future__ import annotations

import numpy as np
import pytest

from sequence_ai_gateway.droid import kinematics

HOME = [0.0, -0.785, 0.0, -2.356, 0.0, 1.571, 0.785]


def test_the_zero_pose_puts_flange_and_hand_where_franka_documents_them():
    # Franka's zero pose: the flange at (0.088, 0, 0.926) m, the hand's TCP 0.1034 m below it.
    poses = kinematics.frames([0.0] * 7)
    assert poses[8][:3, 3] == pytest.approx([0.088, 0.0, 0.926], abs=1e-9)
    assert poses[9][:3, 3] == pytest.approx([0.088, 0.0, 0.926 - 0.1034], abs=1e-9)


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
