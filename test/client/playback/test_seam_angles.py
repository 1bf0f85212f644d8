"""ee_absolute rows across a seam: roll, pitch and yaw by the shortest arc, positions at the
plan's own speed.

A hand pointing down sits at roll pi or -pi, whichever the measured pose (a quaternion turned
into RPY) gives: one request's chunk starts at 3.13, the next at -3.13. A straight blend between
them turns the hand half a turn through 0, and a jump measured straight reads 2 pi.
"""

from __future__ import annotations

import math
from types import SimpleNamespace
from typing import Any

import pytest
from support.policy_support import Robot, open_policy

from sequence_ai import ImageFrame, Observation, Proprioception
from sequence_ai._model.actions import angle_columns, gripper_columns
from sequence_ai._model.catalogue import Model, find_model, models
from sequence_ai._playback.playback import commands_for
from sequence_ai._playback.playhead import Playhead, Playing
from sequence_ai._playback.seam import seam_jump
from sequence_ai._run.control_loop import playhead_for

EE_ABSOLUTE = "sim-ee-absolute-reach"
PERIOD = 0.05
# The model's largest step (m) and what the node's gate allows per period at 0.5 m/s, 20 Hz.
STEP = 0.02
GATE_STEP = 0.025
SMOOTH_SEAM = 12  # config/sim-ee-absolute-reach.yaml
ROLL = math.pi - 0.0116  # 3.13
# A 32x32 grey JPEG: the model's front view is square.
FRAME_SQUARE = (
    "/9j/4AAQSkZJRgABAQAAAQABAAD/2wBDABALDA4MChAODQ4SERATGCgaGBYWGDEjJR0oOjM9PDkzODdASFxOQERXRTc4"
    "UG1RV19iZ2hnPk1xeXBkeFxlZ2P/wAALCAAgACABAREA/8QAHwAAAQUBAQEBAQEAAAAAAAAAAAECAwQFBgcICQoL/8QA"
    "tRAAAgEDAwIEAwUFBAQAAAF9AQIDAAQRBRIhMUEGE1FhByJxFDKBkaEII0KxwRVS0fAkM2JyggkKFhcYGRolJicoKSo0"
    "NTY3ODk6Q0RFRkdISUpTVFVWV1hZWmNkZWZnaGlqc3R1dnd4eXqDhIWGh4iJipKTlJWWl5iZmqKjpKWmp6ipqrKztLW2"
    "t7i5usLDxMXGx8jJytLT1NXW19jZ2uHi4+Tl5ufo6erx8vP09fb3+Pn6/9oACAEBAAA/ACiiiiiiiiiiiiiiiv/Z"
)


def wrapped(d: float) -> float:
    return math.remainder(d, 2.0 * math.pi)


def model(gw: Any, name: str) -> Model:
    found = find_model(models("act", base_url=gw.url), name)
    assert found is not None
    return found


def head_for(gw: Any, smooth_seam: int) -> Playhead:
    # What playhead_for reads of a session and a run's options: the playback speed, the seam.
    session = SimpleNamespace(defaults=SimpleNamespace(playback_speed=1.0))
    options = SimpleNamespace(playback_speed=None, smooth_seam=smooth_seam,
                              seam_limits=None)
    return playhead_for(session, options, model(gw, EE_ABSOLUTE), PERIOD)  # type: ignore[arg-type]


def path(start: float, roll: float, n: int = 10, lateral: float = 0.0) -> list[list[float]]:
    """An ee_absolute chunk along x at the model's full step, hand down at ``roll``."""
    return [[start + STEP * (i + 1), 0.3 + lateral, 0.4, roll, 0.0, 0.0, 0.0] for i in range(n)]


def install(head: Playhead, rows: list[list[float]], number: int, instruction: str = "reach"):
    playing = Playing(number=number, sequence=number, origin=0.0, captured=0.0,
                      horizon_end=10.0, speed=1.0, instruction=instruction)
    return head.install(rows, playing, due=0.0, horizon=10, absolute=True, chunk_rows=10,
                        deadline=None, at_most=100)


def steps(rows: list[list[float]]) -> list[tuple[float, float]]:
    """(position step m, largest angle step rad) between consecutive commands."""
    return [
        (math.dist(a[:3], b[:3]), max(abs(wrapped(b[d] - a[d])) for d in (3, 4, 5)))
        for a, b in zip(rows, rows[1:])
    ]


def test_only_ee_absolute_rows_have_angle_columns(gw) -> None:
    assert angle_columns(model(gw, EE_ABSOLUTE)) == {3, 4, 5}
    assert gripper_columns(model(gw, EE_ABSOLUTE)) == {6}
    # ee_delta's dims 3..5 are angular velocities; joint rows have no angle columns here.
    assert angle_columns(model(gw, "sim-stateless-ee-delta")) == set()
    assert angle_columns(model(gw, "cosmos3-edge-policy-droid")) == set()


def test_a_seam_jump_across_the_wrap_is_the_short_arc() -> None:
    last = [0.5, 0.3, 0.4, ROLL, 0.0, 0.0, 0.0]
    row = [0.5, 0.3, 0.4, -ROLL, 0.0, 0.0, 1.0]
    jump = seam_jump(row, last, skip_dims=[6], angle_dims=[3, 4, 5])
    assert jump == pytest.approx(2.0 * math.pi - 2.0 * ROLL)
    assert jump == pytest.approx(0.0232, abs=1e-4)


def test_a_smoothed_seam_across_the_wrap_turns_the_short_way_at_the_gate_speed(gw) -> None:
    head = head_for(gw, SMOOTH_SEAM)
    install(head, path(0.3, ROLL), 1)
    played = []
    for _ in range(3):
        command = head.next_command()
        head.played(command)
        played.append(command.row)
    # The next chunk starts from a measured pose two steps behind the last target, its roll
    # given as -3.13 (the same hand).
    installed = install(head, path(0.3 + 3 * STEP - 2 * STEP, -ROLL), 2)
    assert installed is not None and installed.seam_jump == pytest.approx(2 * math.pi - 2 * ROLL)
    rows = played + [command.row for command in head.tail]
    # The hand turns the 0.023 rad from 3.13 to -3.13 over the blend, never through 0.
    for linear, angular in steps(rows):
        assert linear <= GATE_STEP and angular <= 0.01
    assert all(abs(wrapped(row[3] - ROLL)) <= 0.024 for row in rows)
    # Shifted rows keep the new chunk's branch plus the short offset: below -pi (unwrapped),
    # the gate compares rotations.
    assert min(row[3] for row in rows) < -math.pi


@pytest.mark.parametrize("offset", [(-2 * STEP, 0.0), (3 * STEP, 0.0), (0.0, 3 * STEP)],
                         ids=["behind", "ahead", "aside"])
def test_a_seam_offset_of_up_to_three_steps_fades_within_the_gate_speed(gw, offset) -> None:
    # The rows are a moving plan: smoothing keeps its speed and adds 1/(N+1) of the offset per
    # step, 0.02 + 0.06 / 13 m, rather than ramping out of a standing row (up to twice the speed).
    along, aside = offset
    head = head_for(gw, SMOOTH_SEAM)
    install(head, path(0.3, ROLL), 1)
    played = []
    for _ in range(3):
        command = head.next_command()
        head.played(command)
        played.append(command.row)
    install(head, path(0.36 + along, ROLL, lateral=aside), 2)
    rows = played + [command.row for command in head.tail]
    offset_m = math.hypot(along, aside)
    largest = max(linear for linear, _ in steps(rows))
    assert largest <= STEP + offset_m / (SMOOTH_SEAM + 1) + 1e-9 and largest <= GATE_STEP


def test_a_hand_over_shift_across_the_wrap_turns_the_short_way(gw) -> None:
    head = head_for(gw, 0)
    install(head, path(0.3, ROLL), 1, instruction="pick up the cup")
    head.played(head.next_command())
    install(head, path(0.32, -ROLL), 2, instruction="put it down")
    rows = [command.row for command in head.tail]
    assert all(angular <= 0.01 for _, angular in steps(rows))
    assert all(abs(wrapped(row[3] - ROLL)) <= 0.024 for row in rows)


def test_the_rest_ramp_interpolates_angles_the_short_way() -> None:
    # A chunk whose own rows cross the wrap (3.13, then -3.13): every command in between is
    # the same hand, never a half turn through 0.
    rows = [[0.5, 0.0, 0.4, ROLL if i < 2 else -ROLL, 0.0, 0.0, 0.0] for i in range(4)]
    commands = commands_for(rows, 0.0, speed=0.5, horizon=4, absolute=True, gripper_dims=[6],
                            ramp_rows=2, angle_dims=[3, 4, 5])
    assert len(commands) > len(rows)
    assert all(abs(wrapped(c.row[3] - ROLL)) <= 0.024 for c in commands)
    assert all(angular <= 0.024 for _, angular in steps([c.row for c in commands]))


class DownwardHand(Robot):
    """An ee_absolute arm two commands behind its targets, whose measured roll of the same
    downward hand reads 3.13 and -3.13 on alternate observations."""

    start = [0.75, 0.4, 0.7]

    def observe(self) -> Observation:
        with self.lock:
            n = len(self.observations)
            self.observed_at.append(len(self.acts))
            position = self.acts[-3][:3] if len(self.acts) >= 3 else self.start
        roll = ROLL if n % 2 == 0 else -ROLL
        obs = Observation(
            images=[ImageFrame(view="front", data=FRAME_SQUARE)],
            proprioception=Proprioception(
                joint_positions=[], gripper=[0.0],
                end_effector_pose=[*position, roll, 0.0, 0.0],
            ),
            instruction=self.instruction,
        )
        with self.lock:
            self.observations.append(obs)
        return obs


@pytest.mark.slow  # over half a second of wall time
def test_a_run_across_the_wrap_measures_and_plays_the_short_arc(gw) -> None:
    robot = DownwardHand(EE_ABSOLUTE)
    with open_policy(gw, model=EE_ABSOLUTE) as policy:
        outcome = policy.run(robot.observe, robot.act, max_actions=40, smooth_seam=SMOOTH_SEAM,
                             **robot.callbacks())
    assert outcome.reason == "completed" and outcome.action_space == "ee_absolute"
    assert outcome.chunks >= 2 and len(robot.observations) >= 2
    # A seam from 3.13 to -3.13 is 0.023 rad of roll, not 2 pi; positions move at most a step
    # and a thirteenth of the offset.
    assert outcome.max_seam_jump is not None and outcome.max_seam_jump < 0.1
    for linear, angular in steps(robot.acts):
        assert linear <= GATE_STEP and angular <= 0.06
