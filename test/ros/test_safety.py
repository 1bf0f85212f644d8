"""The per-step safety check: finite, within limits, bounded change."""

from __future__ import annotations

import math

import pytest

from sequence_ai_ros.safety import (
    SafetyLimits,
    check_gripper,
    check_position_target,
    check_velocity_command,
)

LIMITS = SafetyLimits(("a", "b"), (-1.0, -2.0), (1.0, 2.0), 0.25)


def test_a_small_step_inside_limits_passes() -> None:
    assert check_position_target([0.1, -0.2], [0.0, 0.0], LIMITS) is None


@pytest.mark.parametrize("bad", [math.nan, math.inf, -math.inf])
def test_non_finite_target_is_refused(bad: float) -> None:
    reason = check_position_target([0.0, bad], [0.0, 0.0], LIMITS)
    assert reason is not None and "joint b" in reason and "finite" in reason


def test_target_outside_limits_names_joint_and_limits() -> None:
    reason = check_position_target([1.1, 0.0], [1.0, 0.0], LIMITS)
    assert reason is not None and "joint a" in reason and "limits" in reason


def test_step_larger_than_max_step_is_refused() -> None:
    reason = check_position_target([0.0, 0.3], [0.0, 0.0], LIMITS)
    assert reason is not None and "max_step" in reason and "joint b" in reason


def test_narrow_step_is_refused() -> None:
    reason = check_position_target([0.0], [0.0, 0.0], LIMITS)
    assert reason is not None and "expected 2" in reason


def test_velocity_is_bounded_by_max_step_per_period() -> None:
    assert check_velocity_command([3.0, 0.0], [0.0, 0.0], 1 / 15, LIMITS) is None
    reason = check_velocity_command([4.5, 0.0], [0.0, 0.0], 1 / 15, LIMITS)
    assert reason is not None and "max_step" in reason


def test_velocity_toward_a_limit_is_refused() -> None:
    reason = check_velocity_command([3.0, 0.0], [0.95, 0.0], 1 / 15, LIMITS)
    assert reason is not None and "limits" in reason


def test_gripper_must_be_a_closure_fraction() -> None:
    assert check_gripper(1.0) is None
    assert "outside" in (check_gripper(1.5) or "")
    assert "finite" in (check_gripper(math.nan) or "")


def test_limits_are_checked_for_consistency() -> None:
    with pytest.raises(ValueError, match="expected one per joint_names"):
        SafetyLimits(("a",), (0.0, 1.0), (1.0,), 0.1)
    with pytest.raises(ValueError, match="lower < upper"):
        SafetyLimits(("a",), (1.0,), (0.0,), 0.1)
    with pytest.raises(ValueError, match="max_step"):
        SafetyLimits(("a",), (0.0,), (1.0,), 0.0)
