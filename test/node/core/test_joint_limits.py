"""ros2_control joint limits: reading the layout (parameters and a joint_limits_file) with errors
that name the field, and the gate refusing steps, chunk points and holds beyond a joint's
velocity or acceleration limit while max_step lets them through."""

from __future__ import annotations

import math
from dataclasses import replace
from pathlib import Path

import pytest
from node.safety.test_gate import DUE_S, LIMITS, PERIOD_S, RULES, _chunk_gate, _gate, _play, _rows

from sequence_ai_ros.core.command_kinds import Interface
from sequence_ai_ros.core.joint_limits import (
    JointLimit,
    JointLimitsError,
    RateLimits,
    from_entry,
    load_file,
    resolve,
)
from sequence_ai_ros.safety.gate import SEAM_SHARE

# Joint a: 1.5 rad/s (0.1 rad per 1/15 s step), 15 rad/s² (a change of 1 rad/s per step);
# joint b: no speed limits. max_step (0.25 rad) lets every step below through.
RATES = RateLimits(("a", "b"), (1.5, math.inf), (15.0, math.inf))
LIMITED = replace(RULES, rates=RATES)
FULL = {
    "has_position_limits": True, "min_position": -1.0, "max_position": 1.0,
    "has_velocity_limits": True, "max_velocity": 1.5,
    "has_acceleration_limits": True, "max_acceleration": 15,
}


def test_an_entry_in_the_layout_becomes_the_joints_limits() -> None:
    assert from_entry("a", FULL) == JointLimit("a", -1.0, 1.0, 1.5, 15.0)
    # A group whose flag is false (or absent) is off, whatever values it carries; jerk and
    # effort are accepted and unused.
    entry = {**FULL, "has_velocity_limits": False, "has_jerk_limits": True, "max_jerk": 3.0}
    assert from_entry("a", entry).max_velocity is None
    assert from_entry("a", {}) == JointLimit("a")


@pytest.mark.parametrize(
    ("entry", "words"),
    [
        ({"has_velocity_limits": "yes"}, ("joint_limits.a.has_velocity_limits", "'yes'", "bool")),
        ({"has_velocity_limits": True, "max_velocity": "fast"}, ("max_velocity", "number")),
        ({"has_acceleration_limits": True}, ("has_acceleration_limits is true",
                                             "joint_limits.a.max_acceleration is missing")),
        ({"has_position_limits": True, "min_position": math.nan, "max_position": 1.0},
         ("min_position", "finite")),
    ],
    ids=["flag", "value", "missing", "nan"],
)
def test_a_malformed_entry_is_refused_naming_the_field(
    entry: dict[str, object], words: tuple[str, ...]
) -> None:
    with pytest.raises(JointLimitsError) as raised:
        from_entry("a", entry)
    assert all(w in str(raised.value) for w in words), raised.value


def test_insane_limits_are_reported() -> None:
    # Inverted position limits are refused whether or not has_position_limits switches them on.
    for flag in (True, False):
        with pytest.raises(JointLimitsError) as raised:
            from_entry("a", {**FULL, "has_position_limits": flag, "min_position": 1.0,
                             "max_position": -1.0})
        assert "joint_limits.a.min_position=1.0 is above joint_limits.a.max_position=-1.0" in (
            str(raised.value))
    pinned = from_entry("a", {**FULL, "min_position": 1.0, "max_position": 1.0})
    assert "min_position 1.0 is not below max_position 1.0" in pinned.problems()[0]
    stopped = from_entry("a", {**FULL, "max_velocity": 0.0})
    assert "joint_limits.a.max_velocity is 0.0; expected a finite value > 0" in (
        stopped.problems()[0]
    )


@pytest.mark.parametrize(
    "text",
    [
        # MoveIt's joint_limits.yaml.
        "joint_limits:\n  a: {has_velocity_limits: true, max_velocity: 2.0}\n",
        # A ros2_control params file.
        "controller_manager:\n  ros__parameters:\n    joint_limits:\n"
        "      a: {has_velocity_limits: true, max_velocity: 2.0}\n",
    ],
    ids=["moveit", "ros2_control"],
)
def test_a_joint_limits_file_is_read_in_either_layout(tmp_path: Path, text: str) -> None:
    path = tmp_path / "joint_limits.yaml"
    path.write_text(text, encoding="utf-8")
    (a, b) = resolve(["a", "b"], {}, load_file(str(path)))
    assert a.max_velocity == 2.0 and b == JointLimit("b")


def test_the_parameters_override_the_file_group_by_group() -> None:
    table = {"a": {**FULL}}
    given = {"a": {"has_velocity_limits": True, "max_velocity": 0.5, "max_acceleration": 1.0}}
    (a,) = resolve(["a"], given, table)
    # The velocity group from the parameters; acceleration (its flag not set there) from the file.
    assert (a.max_velocity, a.max_acceleration, a.max_position) == (0.5, 15.0, 1.0)


def test_an_unreadable_or_empty_file_is_refused_naming_it(tmp_path: Path) -> None:
    with pytest.raises(JointLimitsError, match="cannot be read"):
        load_file(str(tmp_path / "absent.yaml"))
    other = tmp_path / "other.yaml"
    other.write_text("robot: {a: 1}\n", encoding="utf-8")
    with pytest.raises(JointLimitsError, match="has no joint_limits mapping"):
        load_file(str(other))


# ----- the gate -----


def test_a_step_within_max_step_but_too_fast_for_the_joint_is_refused() -> None:
    gate, output, _, _ = _gate()
    gate.begin_goal(LIMITED)
    # 0.12 rad in one step is 1.8 rad/s: within max_step, beyond joint a's 1.5 rad/s.
    reason = gate.check([0.12, 0.0])
    assert reason is not None and "joint a" in reason and "max_velocity 1.5000" in reason
    # Joint b has no speed limit: its 0.2 rad step passes; a first step's acceleration (from an
    # arm whose velocity the gate does not know) is not checked.
    _play(gate, [0.09, 0.2])
    assert output.arm == [[0.09, 0.2]]


def test_a_step_that_changes_speed_too_fast_is_refused() -> None:
    gate, output, _, _ = _gate()
    gate.begin_goal(LIMITED)
    _play(gate, [0.02, 0.0])  # 0.3 rad/s
    # To 1.35 rad/s in one period: 15.75 rad/s², beyond joint a's 15.
    reason = gate.check([0.11, 0.0])
    assert reason is not None and "joint a accelerates" in reason and "max_acceleration" in reason
    _play(gate, [0.10, 0.0])  # 1.2 rad/s: 13.5 rad/s²
    # Stopping at once from 1.2 rad/s is refused the same way.
    assert "max_acceleration" in (gate.check([0.10, 0.0]) or "")
    assert output.arm == [[0.02, 0.0], [0.10, 0.0]]


def test_after_a_wait_the_acceleration_starts_over() -> None:
    gate, _, arm, _ = _gate()
    gate.begin_goal(LIMITED)
    _play(gate, [0.02, 0.0])
    _play(gate, [0.10, 0.0])
    gate.pause()
    arm.positions = [0.10, 0.0]
    # From a fresh measurement: the velocity limit applies, not the acceleration from before.
    assert gate.check([0.10, 0.0]) is None


def test_after_a_wait_the_speed_is_the_setpoint_s_and_the_step_is_bounded_from_the_arm() -> None:
    gate, _, arm, _ = _gate()
    gate.begin_goal(LIMITED)
    _play(gate, [0.05, 0.0])
    _play(gate, [0.15, 0.0])
    gate.pause()
    # The arm lags its target (a position controller under load): still 0.12 rad behind it
    # as the wait ends. The next step moves the held setpoint 0.02 rad (0.3 rad/s), not the
    # 0.14 rad from the lagging arm (2.1 rad/s, beyond joint a's 1.5).
    arm.positions = [0.03, 0.0]
    arm.now += 3 * PERIOD_S
    arm.frames["front"] = arm.now
    assert gate.check([0.17, 0.0]) is None
    # A step near the arm but far from the setpoint it held moves that setpoint too fast...
    assert "max_velocity" in (gate.check([0.03, 0.0]) or "")
    # ... and max_step still bounds the step from where the arm is.
    arm.positions = [-0.15, 0.0]
    assert "max_step" in (gate.check([0.17, 0.0]) or "")


def test_a_goal_s_first_step_is_measured_from_the_arm_not_an_earlier_goal_s_target() -> None:
    gate, _, arm, _ = _gate()
    gate.begin_goal(LIMITED)
    _play(gate, [0.05, 0.0])
    gate.pause()
    gate.end_goal()
    arm.positions = [0.2, 0.0]
    arm.now += 1.0
    arm.frames["front"] = arm.now
    gate.begin_goal(LIMITED)
    # 0.15 rad from the earlier goal's target, 0.02 from the arm: from the arm.
    assert gate.check([0.22, 0.0]) is None
    assert "max_velocity" in (gate.check([0.05, 0.0]) or "")


def test_a_velocity_command_is_held_to_the_joint_speeds() -> None:
    gate, output, _, _ = _gate(Interface.VELOCITY)
    gate.begin_goal(LIMITED)
    gate.pause()  # zeros: the arm's velocity is known
    reason = gate.check([1.6, 0.0])
    assert reason is not None and "velocity command 1.6000 rad/s, beyond its max_velocity" in reason
    # From zero to 1.2 rad/s in one period is 18 rad/s².
    assert "max_acceleration" in (gate.check([1.2, 0.0]) or "")
    _play(gate, [0.9, 0.0])
    assert output.arm[-1] == [0.9, 0.0]


def test_a_hold_must_not_jump_faster_than_the_joint_may_move() -> None:
    gate, output, arm, log = _gate()
    gate.begin_goal(LIMITED)
    _play(gate, [0.09, 0.0])
    # The arm was pushed 0.2 rad from the target: holding there would be a 3 rad/s jump
    # from the motion in force; the hold keeps the last target instead.
    arm.positions = [0.29, 0.0]
    assert gate.hold() is None
    assert output.arm[-1] == [0.09, 0.0] and not log.errors


def test_a_chunk_point_too_fast_for_the_joint_refuses_the_chunk() -> None:
    gate, output, arm, _ = _chunk_gate()
    gate.begin_goal(LIMITED)
    # 0.12 rad per period (1.8 rad/s) once the blend is done: within max_step.
    reason = gate.publish_chunk(_rows(0.0, 0.12, 7), arm.now + DUE_S)
    assert reason is not None and "trajectory point" in reason and "max_velocity" in reason
    assert output.trajectories == []
    assert gate.publish_chunk(_rows(0.0, 0.05, 10), arm.now + DUE_S) is None


def test_a_first_chunk_is_held_to_the_speeds_of_its_points_not_of_its_skipped_rows() -> None:
    gate, output, arm, _ = _chunk_gate()
    gate.begin_goal(LIMITED)
    # Due now: the rows due within the lead are skipped, so the first row sent is 0.12 rad from
    # the arm at rest (1.8 rad/s were it one step), within max_step; the blend takes it up
    # over several points, each within joint a's 1.5 rad/s.
    rows = _rows(0.0, 0.04, 12)
    assert gate.publish_chunk(rows, arm.now) is None
    (plan,) = output.trajectories
    assert plan.first_row[0] == pytest.approx(0.12)
    speeds = [abs(b[0] - a[0]) / PERIOD_S
              for a, b in zip((plan.seam, *plan.positions), plan.positions)]
    assert max(speeds) <= 1.5


def test_a_chunk_that_changes_speed_too_fast_between_points_is_refused() -> None:
    gate, output, arm, _ = _chunk_gate()
    gate.begin_goal(LIMITED)
    rows = _rows(0.0, 0.05, 12)
    # From 0.75 rad/s to a stop between two points: 11.25 rad/s² is fine, but a reversal to
    # -0.75 rad/s (22.5 rad/s²) is not.
    for k in range(8, 12):
        rows[k][0] = rows[7][0] - 0.05 * (k - 7)
    reason = gate.publish_chunk(rows, arm.now + DUE_S)
    assert reason is not None and "trajectory point" in reason and "accelerates" in reason
    assert output.trajectories == []


def test_a_chunk_continues_from_the_speed_of_the_one_it_replaces() -> None:
    gate, output, arm, _ = _chunk_gate()
    # Fast enough for the blend that catches up with the rows at a goal's start.
    gate.begin_goal(replace(LIMITED, rates=replace(RATES, max_velocity=(3.0, math.inf))))
    assert gate.publish_chunk(_rows(0.0, 0.08, 10), arm.now + DUE_S) is None
    arm.now += 5 * PERIOD_S
    seam = output.trajectories[0].position_at(arm.now + DUE_S)
    # The next chunk turns back at 1.2 rad/s from where the first one is: its blend spreads
    # the reversal over a few points, still beyond 15 rad/s² at the seam.
    back = [[seam[0] - 0.08 * (k + 1), 0.0, 0.0] for k in range(6)]
    reason = gate.publish_chunk(back, arm.now + DUE_S)
    assert reason is not None and "trajectory point 0: joint a accelerates" in reason
    assert len(output.trajectories) == 1
    # A chunk that carries on at the first one's speed passes.
    on = [[seam[0] + 0.08 * (k + 1), 0.0, 0.0] for k in range(6)]
    assert gate.publish_chunk(on, arm.now + DUE_S) is None


def test_without_joint_limits_only_max_step_applies() -> None:
    gate, _, _, _ = _gate()
    gate.begin_goal(RULES)
    assert RULES.rates is None and LIMITS.max_step == 0.25
    assert gate.check([0.24, 0.0]) is None


def test_rules_are_refused_for_insane_or_unreadable_limits() -> None:
    from sequence_ai_ros.core.node_config import NodeConfig
    from sequence_ai_ros.params.spec_table import SPECS
    from sequence_ai_ros.safety.gate import MotionRules

    defaults = {name: spec.default for name, spec in SPECS.items()}
    pinned = from_entry("panda_joint1", {**FULL, "min_position": 1.0, "max_position": 1.0})
    with pytest.raises(ValueError, match="min_position 1.0 is not below"):
        MotionRules.from_config(NodeConfig.from_values({**defaults, "joint_limits": (pinned,)}))
    broken = NodeConfig.from_values({**defaults, "joint_limits_problem": "file gone"})
    with pytest.raises(ValueError, match="file gone"):
        MotionRules.from_config(broken)
    # Sane limits narrow the position limits and carry the speeds.
    narrow = from_entry("panda_joint1", {**FULL, "min_position": -1.0, "max_position": 1.0})
    rules = MotionRules.from_config(NodeConfig.from_values({**defaults, "joint_limits": (narrow,)}))
    assert rules.limits.lower[0] == -1.0 and rules.limits.upper[0] == 1.0
    assert rules.rates is not None and rules.rates.max_velocity[0] == 1.5


def test_a_seam_is_faded_within_the_gate_s_step_speed_and_position_limits() -> None:
    gate, _, _, _ = _gate()
    # Joint a: 1.5 rad/s over a period (0.1 rad) is below max_step; joint b: max_step alone.
    limits = gate.seam_limits(LIMITED)
    assert limits is not None
    assert limits.step == pytest.approx(
        (SEAM_SHARE * 1.5 * PERIOD_S, SEAM_SHARE * LIMITS.max_step)
    )
    assert (limits.lower, limits.upper) == (LIMITS.lower, LIMITS.upper)
    # Velocity rows are not targets: nothing to fade.
    assert _gate(Interface.VELOCITY)[0].seam_limits(LIMITED) is None
