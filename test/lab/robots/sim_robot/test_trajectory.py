"""The simulated arm's joint_trajectory_controller-like player, without ROS."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pytest

from sequence_ai_lab.robots.sim_robot.trajectory import (
    Replacement,
    Trajectory,
    TrajectoryController,
    TrajectoryPoint,
    TrajectoryRejected,
)

JOINTS = ("j1", "j2", "j3")
T0 = 1_700_000_000.0  # a ROS time in seconds, as sim_robot passes its clock
# Seconds since 1970 in a double resolve ~0.2 us, so values match to about 1e-6.
TOL = 1e-6
ZERO = np.zeros(3)
HOME = np.array([0.1, -0.2, 0.3])


def point(t: float, q: Sequence[float], v: Sequence[float] = ()) -> TrajectoryPoint:
    return TrajectoryPoint(t, list(q), list(v))


def trajectory(start: float, *points: TrajectoryPoint, names: Sequence[str] = JOINTS) -> Trajectory:
    return Trajectory(list(names), start, list(points))


def controller(**kwargs: object) -> TrajectoryController:
    return TrajectoryController(JOINTS, **kwargs)  # type: ignore[arg-type]


def close(actual: np.ndarray, expected: Sequence[float] | np.ndarray) -> None:
    np.testing.assert_allclose(actual, expected, rtol=0, atol=TOL)


def positions(ctl: TrajectoryController, t: float) -> np.ndarray:
    setpoint = ctl.sample(t)
    assert setpoint is not None
    return setpoint.positions


def test_idle_until_a_trajectory_arrives() -> None:
    ctl = controller()
    assert ctl.sample(T0) is None and not ctl.active


def test_linear_between_positions_only_points_and_the_last_point_held() -> None:
    ctl = controller()
    kept = ctl.receive(
        trajectory(T0, point(0.0, HOME), point(1.0, [1.1, -0.2, 0.3])), T0, HOME, ZERO
    )
    assert kept == 2
    close(positions(ctl, T0 + 0.25), [0.35, -0.2, 0.3])
    setpoint = ctl.sample(T0 + 0.5)
    assert setpoint is not None
    close(setpoint.velocities, [1.0, 0.0, 0.0])
    # At the end the last point is held, still.
    for t in (T0 + 1.0, T0 + 5.0):
        setpoint = ctl.sample(t)
        assert setpoint is not None
        close(setpoint.positions, [1.1, -0.2, 0.3])
        close(setpoint.velocities, ZERO)


def test_cubic_when_velocities_are_given_meets_positions_and_velocities() -> None:
    ctl = controller()
    q1, v1 = [1.0, 0.0, 0.0], [0.5, 0.0, 0.0]
    ctl.receive(trajectory(T0, point(0.0, ZERO, ZERO), point(1.0, q1, v1)), T0, ZERO, ZERO)
    # The Hermite cubic from (0, 0) to (1, 0.5) over 1 s: 2.5 t^2 - 1.5 t^3.
    for t in (0.1, 0.5, 0.9):
        setpoint = ctl.sample(T0 + t)
        assert setpoint is not None
        assert setpoint.positions[0] == pytest.approx(2.5 * t**2 - 1.5 * t**3, abs=TOL)
        assert setpoint.velocities[0] == pytest.approx(5.0 * t - 4.5 * t**2, abs=TOL)
    # Linear interpolation would be at 0.5 halfway; the cubic starts at rest, so it lags.
    assert positions(ctl, T0 + 0.5)[0] == pytest.approx(0.4375, abs=TOL)


def test_zero_stamp_starts_now() -> None:
    ctl = controller()
    ctl.receive(trajectory(0.0, point(1.0, [1.0, 0.0, 0.0])), T0, ZERO, ZERO)
    # From the measured position now to the point one second later.
    close(positions(ctl, T0 + 0.5), [0.5, 0.0, 0.0])


def test_future_stamp_waits_holding_the_measured_position() -> None:
    ctl = controller()
    ctl.receive(
        trajectory(T0 + 2.0, point(0.0, [1.0, 0.0, 0.0]), point(1.0, [2.0, 0.0, 0.0])),
        T0, HOME, ZERO,
    )  # fmt: skip
    close(positions(ctl, T0 + 1.0), HOME)
    close(positions(ctl, T0 + 2.5), [1.5, 0.0, 0.0])


def test_points_already_past_are_dropped() -> None:
    ctl = controller()
    # Started 1.5 s ago: points at 0 and 1 s are past; the arm joins the point at 2 s.
    kept = ctl.receive(
        trajectory(
            T0 - 1.5,
            point(0.0, [5.0, 5.0, 5.0]),
            point(1.0, [5.0, 5.0, 5.0]),
            point(2.0, [1.0, 0.0, 0.0]),
        ),
        T0, ZERO, ZERO,
    )  # fmt: skip
    assert kept == 1
    samples = [positions(ctl, T0 + dt)[0] for dt in np.arange(0.0, 0.5, 0.01)]
    assert max(samples) <= 1.0 + 1e-12  # never towards the dropped points at 5
    close(positions(ctl, T0 + 0.25), [0.5, 0.0, 0.0])


def test_a_trajectory_entirely_in_the_past_is_rejected_and_the_running_one_goes_on() -> None:
    ctl = controller()
    ctl.receive(trajectory(T0, point(1.0, [1.0, 0.0, 0.0])), T0, ZERO, ZERO)
    with pytest.raises(TrajectoryRejected, match="header.stamp"):
        ctl.receive(trajectory(T0 - 3.0, point(1.0, [9.0, 9.0, 9.0])), T0 + 0.5, ZERO, ZERO)
    close(positions(ctl, T0 + 0.75), [0.75, 0.0, 0.0])


def test_splice_keeps_the_running_trajectory_until_the_new_start() -> None:
    ctl = controller()
    ctl.receive(trajectory(T0, point(0.0, ZERO), point(2.0, [2.0, 0.0, 0.0])), T0, ZERO, ZERO)
    # At T0 + 0.5 a trajectory arrives that starts at T0 + 1.0 and goes the other way.
    ctl.receive(
        trajectory(T0 + 1.0, point(0.5, [0.0, 0.0, 0.0])), T0 + 0.5, [0.5, 0, 0], [1.0, 0, 0]
    )
    # Until the new start, the old one plays on (1 rad/s), then the new one from there.
    close(positions(ctl, T0 + 0.9), [0.9, 0.0, 0.0])
    close(positions(ctl, T0 + 1.0), [1.0, 0.0, 0.0])
    close(positions(ctl, T0 + 1.25), [0.5, 0.0, 0.0])
    close(positions(ctl, T0 + 3.0), ZERO)


def test_splice_is_velocity_continuous_when_velocities_are_given() -> None:
    ctl = controller()
    v = [1.0, 0.0, 0.0]
    ctl.receive(
        trajectory(T0, point(0.0, ZERO, v), point(1.0, [1.0, 0, 0], v), point(2.0, [2.0, 0, 0], v)),
        T0, ZERO, ZERO,
    )  # fmt: skip
    ctl.receive(
        trajectory(T0 + 0.5, point(0.5, [1.2, 0, 0], [0.2, 0, 0]), point(1.0, [1.3, 0, 0], ZERO)),
        T0 + 0.3, ZERO, ZERO,
    )  # fmt: skip
    before, after = ctl.sample(T0 + 0.5 - 1e-6), ctl.sample(T0 + 0.5 + 1e-6)
    assert before is not None and after is not None
    np.testing.assert_allclose(after.positions, before.positions, atol=1e-5)
    np.testing.assert_allclose(after.velocities, before.velocities, atol=1e-4)
    close(positions(ctl, T0 + 1.0), [1.2, 0.0, 0.0])
    close(positions(ctl, T0 + 9.0), [1.3, 0.0, 0.0])


def test_splice_after_the_running_one_ended_starts_from_its_held_last_point() -> None:
    ctl = controller()
    ctl.receive(trajectory(T0, point(0.5, [1.0, 0.0, 0.0])), T0, ZERO, ZERO)
    ctl.sample(T0 + 1.0)
    ctl.receive(trajectory(T0 + 2.0, point(1.0, [2.0, 0.0, 0.0])), T0 + 1.0, ZERO, ZERO)
    close(positions(ctl, T0 + 1.5), [1.0, 0.0, 0.0])
    close(positions(ctl, T0 + 2.5), [1.5, 0.0, 0.0])


def test_restart_forgets_the_running_trajectory_and_starts_from_the_measured_state() -> None:
    ctl = controller(replacement=Replacement.RESTART)
    ctl.receive(trajectory(T0, point(0.0, ZERO), point(2.0, [2.0, 0.0, 0.0])), T0, ZERO, ZERO)
    measured = np.array([0.4, 0.0, 0.0])  # behind the desired 0.5
    ctl.receive(trajectory(T0 + 1.0, point(0.5, ZERO)), T0 + 0.5, measured, ZERO)
    # Humble's controller: from the measured state now to the first point, old one forgotten.
    close(positions(ctl, T0 + 0.5), measured)
    close(positions(ctl, T0 + 1.0), [0.2, 0.0, 0.0])


def test_restart_interpolates_within_a_segment_that_began_in_the_past() -> None:
    ctl = controller(replacement=Replacement.RESTART)
    ctl.receive(
        trajectory(T0 - 1.0, point(0.0, ZERO), point(2.0, [2.0, 0.0, 0.0])),
        T0, np.array([9.0, 9.0, 9.0]), ZERO,
    )  # fmt: skip
    close(positions(ctl, T0), [1.0, 0.0, 0.0])


def test_timing_comes_from_the_stamps_not_from_when_the_message_arrived() -> None:
    plan = trajectory(T0 + 1.0, point(0.0, HOME), point(0.5, [1.0, 0, 0]), point(1.0, ZERO))
    early, late = controller(), controller()
    early.receive(plan, T0, HOME, ZERO)
    late.receive(plan, T0 + 0.9, HOME, ZERO)
    for t in np.arange(T0 + 1.0, T0 + 2.5, 0.01):
        np.testing.assert_allclose(positions(early, t), positions(late, t))


@pytest.mark.parametrize(
    ("plan", "field"),
    [
        (trajectory(0.0, point(1.0, [1.0, 2.0]), names=("j1", "j2")), "partial goals"),
        (trajectory(0.0, point(1.0, [1, 2, 3]), names=("j1", "j2", "elbow")), "'elbow'"),
        (trajectory(0.0, point(1.0, [1, 2, 3]), names=("j1", "j1", "j2")), "each joint once"),
        (trajectory(0.0), "points: the trajectory is empty"),
        (trajectory(0.0, point(1.0, [1, 2])), r"points\[0\].positions"),
        (trajectory(0.0, point(1.0, [1, 2, float("nan")])), r"points\[0\].positions"),
        (trajectory(0.0, point(1.0, [1, 2, 3], [1, 2])), r"points\[0\].velocities"),
        (trajectory(0.0, point(1.0, [1, 2, 3]), point(1.0, [1, 2, 3])), "strictly"),
        (trajectory(0.0, point(-0.1, [1, 2, 3])), "time_from_start"),
        (
            trajectory(0.0, TrajectoryPoint(1.0, [1, 2, 3], accelerations=[0, 0, 0])),
            "accelerations",
        ),
        (trajectory(0.0, TrajectoryPoint(1.0, [1, 2, 3], effort=[0, 0, 0])), "effort"),
    ],
)
def test_refuses_what_the_controller_cannot_play_naming_the_field(
    plan: Trajectory, field: str
) -> None:
    ctl = controller()
    with pytest.raises(TrajectoryRejected, match=field):
        ctl.receive(plan, T0, ZERO, ZERO)
    assert not ctl.active


def test_joints_in_any_order_are_mapped_by_name() -> None:
    ctl = controller()
    plan = trajectory(T0, point(0.0, [3.0, 1.0, 2.0]), names=("j3", "j1", "j2"))
    ctl.receive(plan, T0, ZERO, ZERO)
    close(positions(ctl, T0 + 1.0), [1.0, 2.0, 3.0])


def test_nonzero_end_velocity_accepted_by_default_refused_when_not_allowed() -> None:
    plan = trajectory(T0, point(1.0, [1.0, 0.0, 0.0], [0.5, 0.0, 0.0]))
    controller().receive(plan, T0, ZERO, ZERO)  # Humble's default: allowed
    strict = controller(allow_nonzero_velocity_at_trajectory_end=False)
    with pytest.raises(TrajectoryRejected, match="expected zeros at the end"):
        strict.receive(plan, T0, ZERO, ZERO)


def test_stop_hands_the_arm_to_another_controller() -> None:
    ctl = controller()
    ctl.receive(trajectory(0.0, point(1.0, [1.0, 0.0, 0.0])), T0, ZERO, ZERO)
    ctl.stop()
    assert ctl.sample(T0 + 0.5) is None and not ctl.active
