"""The Cartesian gate's rules: finite values, the workspace box, speed bounds per command and
MoveIt Servo's unitless range; a refused command names what failed and is never rescaled."""

from __future__ import annotations

import math

import pytest

from sequence_ai_ros.core.pose_math import Pose
from sequence_ai_ros.safety.cartesian_rules import (
    SPEED_UNITS,
    UNITLESS,
    CartesianLimits,
    check_pose_target,
    check_twist,
    rotation_angle,
    twist_speeds,
)

LIMITS = CartesianLimits((0.2, -0.5, 0.05), (0.8, 0.5, 0.9), 0.25, 1.0)
PERIOD_S = 1 / 25
HOME = Pose((0.5, 0.0, 0.4))


def test_a_slow_twist_inside_the_workspace_passes() -> None:
    reason, linear, angular = twist_speeds([0.5, 0, 0, 0, 0, 0.2, 1.0], UNITLESS, 0.2, 0.8)
    assert reason is None and linear == [0.1, 0.0, 0.0]
    assert angular == pytest.approx([0.0, 0.0, 0.16])
    assert check_twist(linear, angular, HOME, PERIOD_S, LIMITS) is None


def test_unitless_rows_outside_minus_one_one_are_refused_not_clipped() -> None:
    reason, _, _ = twist_speeds([1.2, 0, 0, 0, 0, 0], UNITLESS, 0.2, 0.8)
    assert reason is not None and "outside [-1, 1]" in reason and "unitless" in reason
    # speed_units has no range of its own: the speed bound decides.
    reason, linear, angular = twist_speeds([1.2, 0, 0, 0, 0, 0], SPEED_UNITS, 0.25, 1.0)
    assert reason is None
    assert "max_linear_speed" in (check_twist(linear, angular, HOME, PERIOD_S, LIMITS) or "")


@pytest.mark.parametrize(
    ("linear", "angular", "measured", "expected"),
    [
        ([math.nan, 0, 0], [0, 0, 0], HOME, "non-finite"),
        ([0.3, 0, 0], [0, 0, 0], HOME, "max_linear_speed"),
        ([0, 0, 0], [0, 0, 1.5], HOME, "max_angular_speed"),
        ([0, 0, -0.2], [0, 0, 0], Pose((0.5, 0.0, 0.055)), "z would be"),
    ],
    ids=["nan", "linear", "angular", "workspace"],
)
def test_each_twist_refusal_names_its_limit(
    linear: list[float], angular: list[float], measured: Pose, expected: str
) -> None:
    assert expected in (check_twist(linear, angular, measured, PERIOD_S, LIMITS) or "")


def test_pose_targets_are_bounded_by_the_workspace_and_the_speed_per_period() -> None:
    assert check_pose_target(Pose((0.505, 0.0, 0.4)), HOME, PERIOD_S, LIMITS) is None
    far = check_pose_target(Pose((0.6, 0.0, 0.4)), HOME, PERIOD_S, LIMITS) or ""
    assert "m per period" in far
    outside = check_pose_target(Pose((0.9, 0.0, 0.4)), Pose((0.9, 0.0, 0.4)), PERIOD_S, LIMITS)
    assert "workspace" in (outside or "")
    half = math.sqrt(0.5)
    turned = check_pose_target(Pose((0.5, 0.0, 0.4), (0.0, 0.0, half, half)), HOME, PERIOD_S,
                               LIMITS)
    assert "rad per period" in (turned or "")
    skewed = check_pose_target(Pose((0.5, 0.0, 0.4), (0.0, 0.0, 0.0, 2.0)), HOME, PERIOD_S,
                               LIMITS)
    assert "unit quaternion" in (skewed or "")


def test_rotation_angle_of_a_quarter_turn() -> None:
    half = math.sqrt(0.5)
    assert rotation_angle((0, 0, 0, 1), (0, 0, half, half)) == pytest.approx(math.pi / 2)


def test_unusable_limits_name_their_parameter() -> None:
    bad = CartesianLimits((0.8, 0, 0), (0.2, 1, 1), 0.0, math.inf)
    problems = bad.problems()
    assert any("expected min < max" in p for p in problems)
    assert any(p.startswith("max_linear_speed") for p in problems)
    assert any(p.startswith("max_angular_speed") for p in problems)
