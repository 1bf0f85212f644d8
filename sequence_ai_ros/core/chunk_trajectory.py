"""A chunk as one joint trajectory: which rows become points, when, with which velocities, and
what the controller commands at any moment of it.

Pure Python, no ROS: the arm gate checks every point of a `ChunkTrajectory` and the output stage
turns it into a `trajectory_msgs/JointTrajectory`. docs/node.md ("Chunk playback") states the
scheme and why it is continuous under both ways a controller can take a new trajectory.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

# The first point is at least this many periods after publishing. Humble's
# joint_trajectory_controller joins a new trajectory smoothly (from the state it measures) only
# at a first point still ahead when it takes the message; rows due sooner are left to that join.
# Half a period left trajectories arriving after their first point under camera load (bench
# section command_modes); one and a half leaves room for that delivery, and smaller seams.
LEAD_PERIODS = 1.5
# Points over which a new chunk's offset from the trajectory it replaces is taken up.
BLEND_POINTS = 4
# A secant this small (rad/s) counts as standing still: the knot gets no velocity.
_STILL = 1e-12

Position = tuple[float, ...]


@dataclass(frozen=True)
class ChunkTrajectory:
    """One trajectory in the node's monotonic clock.

    `start_s` is the header stamp: the seam, where the trajectory takes over, with the position
    commanded there (`seam`, the first point's left neighbour). Point k is reached at
    `start_s + times_s[k]`, with `positions[k]` and `velocities[k]`. `first_row` is the row of
    the first point before the blend: its jump from the seam is what a step would have made. A
    plan with `immediate` set is sent with a zero stamp ("now"): a hold.
    """

    start_s: float
    seam: Position
    times_s: tuple[float, ...]
    positions: tuple[Position, ...]
    velocities: tuple[Position, ...]
    immediate: bool = False
    first_row: Position = ()

    @classmethod
    def still(cls, positions: Sequence[float], now_s: float) -> ChunkTrajectory:
        """Stay at `positions` from now on, with zero velocity: the stop and the hold. Never
        empty: on Humble an empty trajectory stopped nothing (ros2_controllers#683)."""
        at = tuple(float(v) for v in positions)
        return cls(now_s, at, (0.0,), (at,), ((0.0,) * len(at),), immediate=True)

    @property
    def end_s(self) -> float:
        return self.start_s + self.times_s[-1]

    def position_at(self, t: float) -> list[float]:
        """What the controller commands at `t`: the seam before the start, the last point after
        the end, cubic Hermite between points (as joint_trajectory_controller interpolates
        positions with velocities). Between the seam and the first point the controller joins
        from the state it measures; the straight line between them stands in for that join."""
        if t <= self.start_s:
            return list(self.seam)
        if t >= self.end_s:
            return list(self.positions[-1])
        offset = t - self.start_s
        if offset < self.times_s[0]:
            share = offset / self.times_s[0]
            return [a + (b - a) * share for a, b in zip(self.seam, self.positions[0])]
        k = next(i for i in range(len(self.times_s) - 1) if offset < self.times_s[i + 1])
        span = self.times_s[k + 1] - self.times_s[k]
        return _hermite(
            (offset - self.times_s[k]) / span, span,
            self.positions[k], self.velocities[k], self.positions[k + 1], self.velocities[k + 1],
        )


def build_trajectory(
    rows: Sequence[Sequence[float]],
    first_due_s: float,
    period_s: float,
    now_s: float,
    commanded: Callable[[float], Sequence[float]],
) -> ChunkTrajectory | None:
    """The trajectory that plays `rows` (arm joint targets; row k due at `first_due_s +
    k * period_s`), published at `now_s`; None when every row is due before the lead.

    Rows due within LEAD_PERIODS of now are not sent; the first BLEND_POINTS points sent are
    blended from `commanded` at their times towards their rows. The stamp is one period before
    the first point sent, at the seam: a splicing controller hands over there, Humble's from the
    moment it takes the message; both join the old motion to the first point. `commanded(t)` is
    the position commanded at t so far (the trajectory being replaced, or the measured joints):
    the seam, the first point's left neighbour for its velocity and its step check.
    """
    lead_s = now_s + LEAD_PERIODS * period_s
    skip = max(0, math.ceil((lead_s - first_due_s) / period_s - 1e-9))
    if skip >= len(rows):
        return None
    start_s = first_due_s + (skip - 1) * period_s
    seam = tuple(float(v) for v in commanded(start_s))
    points: list[Position] = []
    for k, row in enumerate(rows[skip:]):
        # The new plan's offset from the motion in force is taken up over BLEND_POINTS
        # points, not at the first one: a seam's velocity change is spread the same way.
        share = min(1.0, (k + 1) / (BLEND_POINTS + 1))
        if share < 1.0:
            before = commanded(start_s + (k + 1) * period_s)
            points.append(tuple((1.0 - share) * float(b) + share * float(v)
                                for b, v in zip(before, row)))
        else:
            points.append(tuple(float(v) for v in row))
    return ChunkTrajectory(
        start_s=start_s,
        seam=seam,
        times_s=tuple((k + 1) * period_s for k in range(len(points))),
        positions=tuple(points),
        velocities=knot_velocities(seam, points, period_s),
        first_row=tuple(float(v) for v in rows[skip]),
    )


def knot_velocities(
    left: Sequence[float], points: Sequence[Sequence[float]], period_s: float
) -> tuple[Position, ...]:
    """Each point's velocity: the central difference of its neighbours (the first point's left
    neighbour is `left`, the seam), limited per joint so every segment stays between its two
    points (Fritsch–Carlson: zero where the joint turns, at most three times the smaller
    secant); zero at the last point, where the arm comes to rest if nothing follows."""
    velocities = []
    previous = left
    for k, point in enumerate(points):
        if k == len(points) - 1:
            velocities.append((0.0,) * len(point))
            break
        following = points[k + 1]
        velocities.append(tuple(
            _monotone_slope((q - p) / period_s, (n - q) / period_s)
            for p, q, n in zip(previous, point, following)
        ))
        previous = point
    return tuple(velocities)


def _monotone_slope(before: float, after: float) -> float:
    if before * after <= 0.0 or abs(before) < _STILL or abs(after) < _STILL:
        return 0.0
    central = 0.5 * (before + after)
    bound = 3.0 * min(abs(before), abs(after))
    return math.copysign(min(abs(central), bound), central)


def _hermite(
    tau: float, span: float, q0: Position, v0: Position, q1: Position, v1: Position
) -> list[float]:
    """Cubic Hermite at `tau` in [0, 1] of a segment `span` seconds long."""
    t2, t3 = tau * tau, tau * tau * tau
    h00, h10 = 2 * t3 - 3 * t2 + 1, t3 - 2 * t2 + tau
    h01, h11 = -2 * t3 + 3 * t2, t3 - t2
    return [
        h00 * a + h10 * span * va + h01 * b + h11 * span * vb
        for a, va, b, vb in zip(q0, v0, q1, v1)
    ]
