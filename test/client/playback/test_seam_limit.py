"""SeamLimits: a seam's fade lengthens until no step it makes exceeds the step limit, and never
pushes a row past the lower or upper limit."""

from __future__ import annotations

import pytest

import sequence_ai
from sequence_ai import SeamLimits
from sequence_ai._playback.playhead import Playhead, Playing
from sequence_ai._playback.seam import fade_length, shift_seam

PERIOD = 1 / 15
# pi05-droid on a Panda: 2.175 rad/s over one 15 Hz period, and the simulated model's plans
# at 80 % of it.
LIMIT = 2.175 * PERIOD
PLAN_STEP = 0.8 * LIMIT


def moving(start: float, step: float, n: int = 15) -> list[list[float]]:
    return [[start + step * (i + 1), 1.0] for i in range(n)]


def steps(previous: float, rows: list[list[float]]) -> list[float]:
    values = [previous, *(row[0] for row in rows)]
    return [b - a for a, b in zip(values, values[1:])]


def test_a_seam_four_plan_steps_off_fades_within_the_limit() -> None:
    # The arm stood still at 0 while the new plan's first four rows fell due: its due row is
    # four steps away and it moves on away from the arm at the plan's speed (a demo episode).
    rows = moving(-4 * PLAN_STEP, -PLAN_STEP)
    unlimited = [list(row) for row in rows]
    shift_seam(unlimited, [0.0, 1.0], 3, [1])
    assert max(abs(s) for s in steps(0.0, unlimited)) > LIMIT
    n = fade_length(rows, [0.0, 1.0], [0.0, 1.0], 3, [LIMIT], [1])
    assert n is not None and n > 3
    shift_seam(rows, [0.0, 1.0], n, [1])
    assert max(abs(s) for s in steps(0.0, rows)) <= LIMIT + 1e-12
    # The fewest such: one command fewer steps beyond the limit.
    shorter = moving(-4 * PLAN_STEP, -PLAN_STEP)
    shift_seam(shorter, [0.0, 1.0], n - 1, [1])
    assert max(abs(s) for s in steps(0.0, shorter)) > LIMIT


def test_a_seam_within_the_limit_keeps_smooth_seam() -> None:
    rows = moving(0.01, PLAN_STEP / 2)
    assert fade_length(rows, [0.0, 0.0], [0.0, 0.0], 3, [LIMIT], [1]) == 3


def test_rows_that_step_beyond_the_limit_themselves_cannot_be_faded_within_it() -> None:
    rows = moving(0.5, 2 * LIMIT)
    assert fade_length(rows, [0.0, 0.0], [0.0, 0.0], 3, [LIMIT], [1]) is None


def test_dimensions_past_the_limit_and_grippers_are_not_bounded() -> None:
    # Dim 1 (past the limit's end) jumps by 5: it alone lengthens nothing.
    rows = [[0.0, 5.0 + 0.01 * i] for i in range(15)]
    assert fade_length(rows, [0.0, 0.0], [0.0, 0.0], 2, [LIMIT]) == 2


def play_seam(old: list[list[float]], played_old: int, new: list[list[float]]) -> list[float]:
    """Dim 0 of every command a limited Playhead sends: `played_old` of the old plan, then the
    new plan installed over the rest, to its end."""
    head = Playhead(PERIOD, 1.0, [1], smooth_seam=3, seam_limits=SeamLimits([LIMIT]))
    played: list[float] = []
    for number, rows in ((1, old), (2, new)):
        info = Playing(number=number, sequence=number - 1, origin=0.0, captured=0.0,
                       horizon_end=15, speed=1.0)
        assert head.install(rows, info, due=0.0, horizon=15, absolute=True, chunk_rows=15,
                            deadline=None, at_most=100) is not None
        for _ in range(played_old if number == 1 else len(head.tail)):
            command = head.next_command()
            head.played(command)
            played.append(command.row[0])
    return played


def test_the_playhead_fades_a_seam_within_its_step_limit() -> None:
    played = play_seam([[0.0, 1.0]] * 15, 5, moving(-4 * PLAN_STEP, -PLAN_STEP))
    assert max(abs(s) for s in steps(played[0], [[v] for v in played[1:]])) <= LIMIT + 1e-12
    # The plan's own speed is reached: the offset is faded, not kept.
    assert played[-1] < -4 * PLAN_STEP


def test_a_fade_starts_from_the_last_command_when_the_old_plan_s_next_step_leaves_no_room(
) -> None:
    # The old plan steps at 99 % of the limit; the new one lands 0.3 ahead of its next row:
    # from that row no fade keeps the first step within the limit, from the last command one
    # does.
    old = moving(0.0, 0.99 * LIMIT)
    played = play_seam(old, 3, moving(old[3][0] + 0.3, 0.02))
    assert max(abs(s) for s in steps(played[0], [[v] for v in played[1:]])) <= LIMIT + 1e-12


def test_a_fade_never_pushes_a_row_past_a_limit_the_model_kept_it_inside() -> None:
    # The arm's last target 0.05 below the new plan's first row: shifting the plan down by
    # that would carry its rows at the lower limit (-1) past it; they stop there instead. A
    # row the model put past the limit itself is left for the robot's check.
    rows = [[-0.95, 0.0], [-1.0, 0.0], [-1.0, 0.0], [-1.2, 0.0]]
    shift_seam(rows, [-1.0, 0.0], 4, [1], limits=SeamLimits([LIMIT], [-1.0], [1.0]))
    assert [row[0] for row in rows] == [pytest.approx(-0.99), -1.0, -1.0, -1.2]


@pytest.mark.parametrize(
    ("fields", "error", "words"),
    [({"step": []}, ValueError, "SeamLimits.step is empty"),
     ({"step": "0.1"}, TypeError, "SeamLimits.step"),
     ({"step": [0.1, 0.0]}, ValueError, "SeamLimits.step[1] is 0.0"),
     ({"step": [float("nan")]}, ValueError, "SeamLimits.step[0]"),
     ({"step": [True]}, ValueError, "SeamLimits.step[0] is True"),
     ({"step": [0.1], "lower": [0.0]}, ValueError, "as many of each"),
     ({"step": [0.1], "lower": [1.0], "upper": [0.0]}, ValueError, "lower below its upper")],
)
def test_bad_seam_limits_are_refused_naming_the_field(
    fields: dict, error: type, words: str
) -> None:
    with pytest.raises(error) as raised:
        SeamLimits(**fields)
    assert words in str(raised.value)


def test_seam_limits_are_kept_as_tuples_of_floats_and_only_as_seam_limits() -> None:
    limits = SeamLimits([1, 0.5], [-1, -2], [1, 2])
    assert (limits.step, limits.lower, limits.upper) == ((1.0, 0.5), (-1.0, -2.0), (1.0, 2.0))
    options = sequence_ai.RunOptions(observe=lambda: None, act=print, seam_limits=limits)
    assert options.seam_limits is limits
    with pytest.raises(TypeError, match="expected a sequence_ai.SeamLimits"):
        sequence_ai.RunOptions(observe=lambda: None, act=print, seam_limits=[0.1])
