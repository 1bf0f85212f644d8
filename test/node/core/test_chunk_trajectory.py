"""Chunk playback's trajectories, without ROS: stamps, points, velocities, and motion that is
continuous across seams under both ways a controller takes a new trajectory (the simulated
arm's controller plays them: `splice` like ROS 1 / later ros2_controllers, `restart` like
Humble's joint_trajectory_controller)."""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

import numpy as np
import pytest

from sequence_ai_lab.robots.sim_robot.trajectory import (
    Replacement,
    Trajectory,
    TrajectoryController,
    TrajectoryPoint,
)
from sequence_ai_ros.core import chunk_trajectory
from sequence_ai_ros.core.chunk_trajectory import (
    BLEND_POINTS,
    LEAD_PERIODS,
    ChunkTrajectory,
    build_trajectory,
    knot_velocities,
)

P = 1 / 15
T0 = 1000.0
JOINTS = ("j1", "j2")


def _at(position: Sequence[float]) -> Callable[[float], Sequence[float]]:
    return lambda _t: position


def _on_path(q0: float, v: float, start: int, due: float) -> Callable[[float], Sequence[float]]:
    """What a trajectory already on `_path(q0, v, start, …)` commands at t, its first row due
    at `due`: a new chunk on the same path has nothing to blend."""
    return lambda t: [q0 + v * (start * P + (t - due)), 0.5]


def _path(q0: float, v: float, start: int, n: int) -> list[list[float]]:
    """n rows of a straight path: joint 1 at q0 + v·k·P from row `start`, joint 2 still."""
    return [[q0 + v * (start + k) * P, 0.5] for k in range(n)]


def test_rows_due_after_the_lead_are_points_one_period_apart_from_a_stamp_at_the_seam() -> None:
    rows = _path(0.0, 0.6, 1, 5)
    # Installed mid-period: the first row is due 0.3 periods after the lead.
    due = T0 + (LEAD_PERIODS + 0.3) * P
    plan = build_trajectory(rows, due, P, T0, _on_path(0.0, 0.6, 1, due))
    assert plan is not None and not plan.immediate
    # The stamp is one period before the first point: where its left neighbour was due.
    assert plan.start_s == pytest.approx(due - P)
    assert plan.times_s == pytest.approx([(k + 1) * P for k in range(5)])
    assert np.allclose(plan.positions, rows)
    assert plan.seam == pytest.approx((0.0, 0.5))


def test_rows_due_before_the_lead_are_left_to_the_controllers_join() -> None:
    rows = _path(0.0, 0.6, 1, 5)
    # The first chunk of a goal is due at once: rows due within the lead are not sent.
    plan = build_trajectory(rows, T0, P, T0, _on_path(0.0, 0.6, 1, T0))
    assert plan is not None
    skipped = math.ceil(LEAD_PERIODS)
    assert np.allclose(plan.positions, rows[skipped:])
    assert plan.start_s == pytest.approx(T0 + (skipped - 1) * P)
    # Due just inside the lead: skipped as well; just outside it: kept.
    inside = build_trajectory(rows, T0 + (LEAD_PERIODS - 0.01) * P, P, T0, _at([0, 0]))
    outside = build_trajectory(rows, T0 + (LEAD_PERIODS + 0.01) * P, P, T0, _at([0, 0]))
    assert len(inside.positions) == 4
    assert len(outside.positions) == 5
    # Every row already due: nothing to send.
    assert build_trajectory(rows[:1], T0, P, T0, _at([0.0, 0.5])) is None


def test_a_new_plans_offset_from_the_motion_in_force_is_taken_up_over_the_blend_points() -> None:
    rows = [[0.3, 0.5]] * (BLEND_POINTS + 3)
    due = T0 + (LEAD_PERIODS + 0.3) * P
    plan = build_trajectory(rows, due, P, T0, _at([0.0, 0.5]))
    assert plan is not None
    shares = [min(1.0, (k + 1) / (BLEND_POINTS + 1)) for k in range(len(rows))]
    assert [p[0] for p in plan.positions] == pytest.approx([0.3 * w for w in shares])
    assert all(p[1] == pytest.approx(0.5) for p in plan.positions)


def test_the_seam_is_what_the_replaced_trajectory_commands_at_the_stamp() -> None:
    old = build_trajectory(_path(0.0, 0.6, 1, 15), T0 + 0.9 * P, P, T0, _at([0.0, 0.5]))
    assert old is not None
    later = T0 + 5.3 * P
    new = build_trajectory(_path(0.1, 0.6, 6, 10), later + 0.7 * P, P, later, old.position_at)
    assert new is not None
    assert new.seam == pytest.approx(old.position_at(new.start_s))


def test_velocities_are_central_differences_with_the_seam_as_left_neighbour() -> None:
    seam = (0.0, 1.0)
    points = [(0.1, 1.0), (0.25, 1.0), (0.45, 1.0)]
    velocities = knot_velocities(seam, points, P)
    assert velocities[0] == pytest.approx(((0.25 - 0.0) / (2 * P), 0.0))
    assert velocities[1] == pytest.approx(((0.45 - 0.1) / (2 * P), 0.0))
    # At rest at the last point: where the arm stops if no chunk follows (and what Jazzy's
    # allow_nonzero_velocity_at_trajectory_end: false requires).
    assert velocities[-1] == (0.0, 0.0)


def test_velocities_keep_each_segment_between_its_points() -> None:
    # A joint that turns gets no velocity there; a sudden rest ramp is limited to 3x the
    # smaller secant, so no segment overshoots its points (limit checks on points suffice).
    seam = (0.0,)
    points = [(0.2,), (0.1,), (0.11,), (0.5,), (0.5,)]
    velocities = [v[0] for v in knot_velocities(seam, points, P)]
    assert velocities[0] == 0.0  # turns
    assert velocities[1] == 0.0  # turns
    assert velocities[2] == pytest.approx(3 * 0.01 / P)  # limited, not (0.5 - 0.1) / 2P
    assert velocities[3] == 0.0  # stops
    plan = ChunkTrajectory(T0, seam, tuple((k + 1) * P for k in range(5)), tuple(points),
                          knot_velocities(seam, points, P))
    for k in range(4):
        low, high = sorted((points[k][0], points[k + 1][0]))
        for t in np.linspace(plan.start_s + plan.times_s[k], plan.start_s + plan.times_s[k + 1]):
            assert low - 1e-12 <= plan.position_at(float(t))[0] <= high + 1e-12


def test_a_plan_passes_through_its_points_at_their_times_and_holds_the_last() -> None:
    plan = build_trajectory(_path(0.0, 0.6, 1, 6), T0 + 0.7 * P, P, T0, _at([0.0, 0.5]))
    assert plan is not None
    for t, q in zip(plan.times_s, plan.positions):
        assert plan.position_at(plan.start_s + t) == pytest.approx(list(q))
    assert plan.position_at(plan.end_s + 5.0) == list(plan.positions[-1])
    assert plan.position_at(plan.start_s - 1.0) == list(plan.seam)


def test_a_stop_holds_one_point_with_zero_velocity_never_an_empty_trajectory() -> None:
    stop = ChunkTrajectory.still([0.3, -0.2], T0)
    assert stop.immediate and stop.times_s == (0.0,)
    assert stop.positions == ((0.3, -0.2),) and stop.velocities == ((0.0, 0.0),)
    assert stop.position_at(T0 + 3.0) == [0.3, -0.2]


# ----- seams played by a controller -----


def _message(plan: ChunkTrajectory, publish_s: float) -> Trajectory:
    start = publish_s if plan.immediate else plan.start_s
    return Trajectory(
        JOINTS, start,
        [TrajectoryPoint(t, list(q), list(v))
         for t, q, v in zip(plan.times_s, plan.positions, plan.velocities)],
    )


def _play(
    replacement: Replacement,
    chunks: list[tuple[float, float, list[list[float]]]],
    step_s: float,
    until_s: float,
    delay_s: float = 0.003,
) -> tuple[np.ndarray, np.ndarray]:
    """Desired positions and velocities sampled every `step_s` while chunks (publish time,
    first row due, rows) are sent the node's way and taken `delay_s` later."""
    controller = TrajectoryController(JOINTS, replacement=replacement)
    start = np.array([0.0, 0.5])
    controller.receive(_message(ChunkTrajectory.still(start, T0 - 1.0), T0 - 1.0), T0 - 1.0,
                       start, np.zeros(2))
    sent: ChunkTrajectory | None = None
    pending = []
    for publish_s, first_due_s, rows in chunks:
        sent = build_trajectory(rows, first_due_s, P, publish_s,
                          sent.position_at if sent is not None else _at(start))
        assert sent is not None
        pending.append((publish_s + delay_s, _message(sent, publish_s)))
    positions, velocities = [], []
    t = T0
    while t < until_s:
        while pending and pending[0][0] <= t:
            _, message = pending.pop(0)
            # The arm is where it was commanded (Humble reads the measured state).
            now = controller.sample(t)
            assert now is not None
            controller.receive(message, t, now.positions, now.velocities)
        setpoint = controller.sample(t)
        assert setpoint is not None
        positions.append(setpoint.positions.copy())
        velocities.append(setpoint.velocities.copy())
        t += step_s
    return np.array(positions), np.array(velocities)


def _chunks(lead_periods: float) -> list[tuple[float, float, list[list[float]]]]:
    """Three chunks of a path at 0.6 rad/s; each later one is a new plan 0.04 rad off the one
    playing (the seam jump) and arrives mid-chunk, its first row due `lead_periods` later."""
    first = (T0, T0, _path(0.0, 0.6, 0, 15))
    second_at = T0 + 6.4 * P
    second = (second_at, second_at + lead_periods * P, _path(0.04, 0.6, 7, 15))
    third_at = T0 + 12.2 * P
    third = (third_at, third_at + lead_periods * P, _path(0.0, 0.6, 13, 15))
    return [first, second, third]


@pytest.mark.parametrize("replacement", list(Replacement), ids=lambda r: r.value)
@pytest.mark.parametrize("lead_periods", [0.9, 0.55, 0.1], ids=lambda x: f"lead {x} period")
def test_motion_is_continuous_in_position_and_velocity_across_seams(
    replacement: Replacement, lead_periods: float
) -> None:
    """A jump stays a jump however finely it is sampled; continuous motion changes less the
    finer the step. Sampled at 1 ms and at 0.1 ms, the largest change of the desired position
    and velocity between samples shrinks about tenfold: no jump at any seam, either way a
    controller takes the new trajectory, whenever in the period the chunk arrives."""
    until = T0 + 30 * P
    coarse_q, coarse_v = _play(replacement, _chunks(lead_periods), 1e-3, until)
    fine_q, fine_v = _play(replacement, _chunks(lead_periods), 1e-4, until)
    for coarse, fine in ((coarse_q, fine_q), (coarse_v, fine_v)):
        big = np.max(np.abs(np.diff(coarse, axis=0)))
        small = np.max(np.abs(np.diff(fine, axis=0)))
        assert small < 0.2 * big, (small, big)
    # The path is followed: each seam's new plan is reached.
    assert coarse_q[-1][0] == pytest.approx(0.6 * 27 * P, abs=1e-9)


def test_the_literal_stamp_would_jump_where_a_controller_splices(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Why the stamp is at the seam and not at the first row: a splicing controller keeps the
    old trajectory until the stamp and then starts at the first point, a position jump."""
    # Unblended, so that the first point carries the whole seam jump.
    monkeypatch.setattr(chunk_trajectory, "BLEND_POINTS", 0)
    controller = TrajectoryController(JOINTS, replacement=Replacement.SPLICE)
    old = build_trajectory(_path(0.0, 0.6, 0, 15), T0, P, T0, _at([0.0, 0.5]))
    assert old is not None
    controller.receive(_message(old, T0), T0, np.array([0.0, 0.5]), np.zeros(2))
    publish = T0 + 6.4 * P
    new = build_trajectory(_path(0.04, 0.6, 7, 15), publish + 0.9 * P, P, publish, old.position_at)
    assert new is not None
    literal = Trajectory(JOINTS, new.start_s + P, [
        TrajectoryPoint(t - P, list(q), list(v))
        for t, q, v in zip(new.times_s, new.positions, new.velocities)
    ])
    now = controller.sample(publish)
    assert now is not None
    controller.receive(literal, publish, now.positions, now.velocities)
    before = controller.sample(new.start_s + P - 1e-6)
    after = controller.sample(new.start_s + P)
    assert before is not None and after is not None
    # In 1 us the arm moves 0.6 urad on its path; the new first point is 0.028 rad ahead.
    assert after.positions[0] - before.positions[0] > 0.02
