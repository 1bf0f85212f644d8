"""The per-step safety check (finite, within limits, bounded change) and the arm gate that
applies it, with fresh measurements, to every command."""

from __future__ import annotations

import ast
import math
from collections.abc import Sequence
from pathlib import Path

import pytest

import sequence_ai_ros
from sequence_ai_ros.core.chunk_trajectory import BLEND_POINTS, LEAD_PERIODS, ChunkTrajectory
from sequence_ai_ros.core.command_kinds import CommandMode, Interface
from sequence_ai_ros.core.freshness import StaleObservation
from sequence_ai_ros.core.readings import JointSnapshot
from sequence_ai_ros.safety.gate import ArmGate, CommandRefused, MotionRules
from sequence_ai_ros.safety.joint_rules import (
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


# ----- the arm gate: the one path to the motors -----


class _Output:
    """Records what the gate publishes."""

    def __init__(self, interface: Interface) -> None:
        self.interface = interface
        self.arm: list[list[float]] = []
        self.gripper: list[float] = []

    def publish_arm(self, values: Sequence[float]) -> None:
        self.arm.append(list(values))

    def publish_gripper(self, values: Sequence[float]) -> None:
        self.gripper.extend(values)

    def command_rate_hz(self) -> float:
        return 0.0

    def destroy(self) -> None:
        pass


class _Arm:
    """The gate's measurements: joint positions and input ages the test sets."""

    def __init__(self) -> None:
        self.now = 100.0
        self.positions = [0.0, 0.0]
        self.joint_age_s = 0.0
        # Receive time of each camera's newest frame.
        self.frames = {"front": self.now}
        self.age_lookups = 0

    def joints(self, max_age_s: float) -> JointSnapshot:
        if self.joint_age_s > max_age_s:
            raise StaleObservation(
                f"joint_states: newest positions are {self.joint_age_s:.3f} s old (a is the "
                f"oldest); max_state_age_s is {max_age_s:.3f}"
            )
        return JointSnapshot(list(self.positions), None, self.joint_age_s, "a")

    def ages(self) -> dict[str, float | None]:
        self.age_lookups += 1
        return {view: self.now - received for view, received in self.frames.items()}


class _Log:
    def __init__(self) -> None:
        self.errors: list[str] = []
        self.warnings: list[str] = []

    def error(self, message: str) -> None:
        self.errors.append(message)

    def warning(self, message: str) -> None:
        self.warnings.append(message)


RULES = MotionRules(
    limits=LIMITS, max_state_age_s=0.25, max_image_age_s=0.5, camera_views=("front",),
    velocity_scale=1.0, gripper=True,
)
PERIOD_S = 1 / 15


def _gate(interface: Interface = Interface.POSITION) -> tuple[ArmGate, _Output, _Arm, _Log]:
    output, arm, log = _Output(interface), _Arm(), _Log()
    gate = ArmGate(output, arm, joints=2, period_s=PERIOD_S, log=log, clock=lambda: arm.now)
    return gate, output, arm, log


def _play(gate: ArmGate, row: list[float]) -> None:
    assert gate.check(row) is None
    gate.publish(row)


def test_the_first_step_of_a_goal_is_checked_against_the_arm_not_the_last_target() -> None:
    gate, output, arm, _ = _gate()
    gate.begin_goal(RULES)
    _play(gate, [0.0, 0.0])
    gate.end_goal()
    # Between goals the arm was pushed 0.6 rad: a step near the old target is a jump now.
    arm.positions = [0.6, 0.0]
    arm.now += 1.0
    arm.frames["front"] = arm.now
    gate.begin_goal(RULES)
    reason = gate.check([0.05, 0.0])
    assert reason is not None and "joint a" in reason and "max_step" in reason
    with pytest.raises(CommandRefused):
        gate.publish([0.05, 0.0])
    assert gate.check([0.62, 0.0]) is None
    assert output.arm == [[0.0, 0.0]]


def test_later_steps_continue_from_the_last_target() -> None:
    gate, output, arm, _ = _gate()
    gate.begin_goal(RULES)
    _play(gate, [0.2, 0.0])
    _play(gate, [0.4, 0.0])
    # The arm lags its target; continuity is measured from the target, not the lagging arm.
    assert gate.check([0.6, 0.0]) is None
    assert "max_step" in (gate.check([0.7, 0.0]) or "")
    assert output.arm == [[0.2, 0.0], [0.4, 0.0]]


def test_the_first_step_after_a_wait_is_checked_against_a_fresh_measurement() -> None:
    gate, _, arm, _ = _gate()
    gate.begin_goal(RULES)
    _play(gate, [0.1, 0.0])
    gate.pause()
    arm.positions = [0.7, 0.0]
    arm.now += 1.0
    arm.frames["front"] = arm.now
    assert "max_step" in (gate.check([0.2, 0.0]) or "")
    assert gate.check([0.72, 0.0]) is None


def test_a_first_step_soon_after_a_command_is_checked_against_that_command_too() -> None:
    gate, output, arm, _ = _gate()
    gate.begin_goal(RULES)
    _play(gate, [0.2, 0.0])
    gate.end_goal()
    # Preempted at once: the joint state the next goal starts from predates the last step.
    arm.now += 0.05
    gate.begin_goal(RULES)
    reason = gate.check([-0.1, 0.0])
    assert reason is not None and "last command sent" in reason and "joint a" in reason
    assert gate.check([0.1, 0.0]) is None
    # A measurement that arrived a period after the step shows the arm wherever it went.
    arm.now += PERIOD_S
    assert gate.check([-0.1, 0.0]) is None
    # The same measurement, had it arrived before then, still counts the step.
    arm.joint_age_s = PERIOD_S
    assert "last command sent" in (gate.check([-0.1, 0.0]) or "")
    assert output.arm == [[0.2, 0.0]]


def test_a_stale_joint_state_stops_any_step() -> None:
    gate, output, arm, _ = _gate()
    gate.begin_goal(RULES)
    _play(gate, [0.1, 0.0])
    arm.joint_age_s = 0.3
    with pytest.raises(StaleObservation, match="max_state_age_s"):
        gate.check([0.1, 0.0])
    with pytest.raises(StaleObservation):
        gate.publish([0.1, 0.0])
    assert output.arm == [[0.1, 0.0]]


def test_a_camera_is_watched_by_its_age_without_a_lookup_per_step() -> None:
    gate, _, arm, _ = _gate()
    gate.begin_goal(RULES)
    arm.frames["front"] = arm.now - 0.1
    steps_before_due = 0
    while arm.now < 100.0 + 0.4 - 1e-9:
        gate.check([0.0, 0.0])
        steps_before_due += 1
        arm.now += PERIOD_S
    # One lookup at the first step; none until the newest frame could be too old.
    assert arm.age_lookups == 1 and steps_before_due > 1
    arm.now = 100.0 + 0.45
    with pytest.raises(StaleObservation, match="camera front.*max_image_age_s"):
        gate.check([0.0, 0.0])
    # A newer frame arrived in time: the next look finds it and playing goes on.
    arm.frames["front"] = arm.now - 0.01
    assert gate.check([0.0, 0.0]) is None


def test_a_hold_is_the_fresh_measurement() -> None:
    gate, output, arm, log = _gate()
    gate.begin_goal(RULES)
    _play(gate, [0.2, 0.0])
    arm.positions = [0.21, 0.01]
    assert gate.hold() is None
    assert output.arm[-1] == [0.21, 0.01] and not log.errors


def test_with_stale_joints_mid_goal_the_hold_is_the_last_target() -> None:
    gate, output, arm, _ = _gate()
    gate.begin_goal(RULES)
    _play(gate, [0.2, 0.0])
    arm.positions = [-0.8, 0.0]  # an old pose the node still has
    arm.joint_age_s = 1.8
    assert gate.hold() is None
    assert output.arm[-1] == [0.2, 0.0]


def test_a_goal_refused_for_stale_joints_commands_nothing() -> None:
    gate, output, arm, log = _gate()
    arm.joint_age_s = 1.8
    gate.begin_goal(RULES)
    problem = gate.hold()
    assert problem is not None and "max_state_age_s" in problem
    assert output.arm == [] and log.errors and "cannot hold" in log.errors[0]


def test_a_hold_passes_the_limit_and_step_checks() -> None:
    gate, output, arm, _ = _gate()
    arm.positions = [0.85, 0.0]
    gate.begin_goal(RULES)
    _play(gate, [0.9, 0.0])
    # Measured beyond the configured limit: not a command the gate sends; the target is.
    arm.positions = [1.05, 0.0]
    assert gate.hold() is None and output.arm[-1] == [0.9, 0.0]
    # After a wait, the last target must be within max_step of a fresh measurement too.
    gate.begin_goal(RULES)
    arm.positions = [0.3, 1.9]
    arm.joint_age_s = 0.0
    assert gate.hold() is None and output.arm[-1] == [0.3, 1.9]
    arm.positions = [0.3, 2.5]
    gate.begin_goal(RULES)
    problem = gate.hold()
    assert problem is not None and "limits" in problem and "max_step" in problem


def test_a_velocity_arm_is_held_with_zeros_and_stopped_while_waiting() -> None:
    gate, output, arm, log = _gate(Interface.VELOCITY)
    gate.begin_goal(RULES)
    _play(gate, [1.0, -1.0])
    gate.pause()
    assert output.arm[-1] == [0.0, 0.0]
    arm.joint_age_s = 5.0
    assert gate.hold() is None and output.arm[-1] == [0.0, 0.0] and not log.errors
    assert "moves" in (check_velocity_command([4.5, 0.0], [0.0, 0.0], PERIOD_S, LIMITS) or "")


def test_the_gripper_is_checked_and_published_with_its_step() -> None:
    gate, output, _, _ = _gate()
    gate.begin_goal(RULES)
    assert "outside [0, 1]" in (gate.check([0.0, 0.0, 1.5]) or "")
    _play(gate, [0.0, 0.0, 1.0])
    assert output.gripper == [1.0]


def test_every_gripper_of_a_two_gripper_row_is_checked_and_published() -> None:
    gate, output, _, _ = _gate()
    gate.begin_goal(RULES)
    reason = gate.check([0.0, 0.0, 1.0, 1.5]) or ""
    assert "gripper 1" in reason and "outside [0, 1]" in reason
    _play(gate, [0.0, 0.0, 1.0, 0.25])
    assert output.gripper == [1.0, 0.25]


def test_an_idle_gate_republishes_only_a_hold_that_still_passes() -> None:
    gate, output, arm, log = _gate()
    gate.begin_goal(RULES)
    _play(gate, [0.2, 0.0])
    gate.republish_hold(RULES)
    assert len(output.arm) == 1  # a goal runs: nothing but its steps
    arm.positions = [0.21, 0.0]
    gate.hold()
    gate.end_goal()
    gate.republish_hold(RULES)
    gate.republish_hold(RULES)
    assert output.arm[-3:] == [[0.21, 0.0]] * 3
    # Joints stale, or the arm moved away since: the hold is not sent again.
    arm.joint_age_s = 1.0
    gate.republish_hold(RULES)
    arm.joint_age_s, arm.positions = 0.0, [0.9, 0.0]
    gate.republish_hold(RULES)
    gate.republish_hold(RULES)
    assert len(output.arm) == 4
    assert len(log.warnings) == 2  # once per distinct reason
    # A goal that ended without a hold leaves nothing to republish.
    arm.now += 1.0
    arm.frames["front"] = arm.now
    gate.begin_goal(RULES)
    _play(gate, [0.9, 0.0])
    gate.end_goal()
    gate.republish_hold(RULES)
    assert output.arm[-1] == [0.9, 0.0] and len(output.arm) == 5


@pytest.mark.slow  # over half a second of wall time
def test_nothing_but_the_gate_holds_a_command_publisher() -> None:
    """A command output is made in one place, straight into the gate, so that no path can
    command the arm around the gate's checks: `command_output` (commands/group_output.py, the only
    maker of a CommandPublisher or GroupedCommands for the arm) is called inside ArmGate(...)."""
    from sequence_ai_ros.commands.dry_run import DRY_RUN_TOPIC

    package = Path(sequence_ai_ros.__file__).parent
    made_in: list[str] = []
    planned_in: list[str] = []
    outputs_in: list[str] = []
    makers = ("CommandPublisher", "GroupedCommands")
    for source in package.rglob("*.py"):
        tree = ast.parse(source.read_text(encoding="utf-8"))
        parents = {child: node for node in ast.walk(tree) for child in ast.iter_child_nodes(node)}
        for call in ast.walk(tree):
            if not isinstance(call, ast.Call):
                continue
            name = getattr(call.func, "id", "")
            if name == "command_output":
                outer = parents.get(call)
                assert isinstance(outer, ast.Call) and getattr(outer.func, "id", "") == "ArmGate"
                made_in.append(source.name)
            elif name in makers and source.name == "group_output.py":
                outputs_in.append(name)
            elif name == "CommandPublisher":
                # Else only a dry run's sink, on its own topics (its gate checks it as well).
                topic = next(k.value for k in call.keywords if k.arg == "command_topic")
                assert getattr(topic, "id", "") == "DRY_RUN_TOPIC", ast.dump(topic)
                planned_in.append(source.name)
            else:
                assert name not in makers, f"{source.name} makes a {name}"
    assert made_in == ["configuration.py"] and planned_in == ["dry_run.py"]
    # command_output makes either; GroupedCommands makes one CommandPublisher per arm group.
    assert sorted(outputs_in) == ["CommandPublisher", "CommandPublisher", "GroupedCommands"]
    assert DRY_RUN_TOPIC.startswith("~/")


# ----- chunk mode: every point of a chunk's trajectory passes the gate -----


class _TrajectoryOutput(_Output):
    """Records the trajectories a chunk-mode gate publishes."""

    def __init__(self) -> None:
        super().__init__(Interface.POSITION)
        self.trajectories: list[ChunkTrajectory] = []

    def publish_trajectory(self, plan: ChunkTrajectory) -> None:
        self.trajectories.append(plan)


def _chunk_gate() -> tuple[ArmGate, _TrajectoryOutput, _Arm, _Log]:
    output, arm, log = _TrajectoryOutput(), _Arm(), _Log()
    gate = ArmGate(output, arm, joints=2, period_s=PERIOD_S, log=log, mode=CommandMode.CHUNK,
                   clock=lambda: arm.now)
    return gate, output, arm, log


# A chunk installed mid-period, its first row due just after the lead: every row is sent.
DUE_S = (LEAD_PERIODS + 0.3) * PERIOD_S


def _rows(start: float, step: float, n: int, gripper: float = 0.0) -> list[list[float]]:
    return [[start + step * (k + 1), 0.0, gripper] for k in range(n)]


def test_a_chunk_goes_out_as_one_trajectory_of_its_rows() -> None:
    gate, output, arm, _ = _chunk_gate()
    gate.begin_goal(RULES)
    rows = _rows(0.0, 0.05, 6)
    assert gate.publish_chunk(rows, arm.now + DUE_S) is None
    (plan,) = output.trajectories
    # From the measured joints (0, 0) at a goal's start, blended into the rows.
    shares = [min(1.0, (k + 1) / (BLEND_POINTS + 1)) for k in range(len(rows))]
    assert [p[0] for p in plan.positions] == pytest.approx([w * r[0] for w, r in zip(shares, rows)])
    assert all(p[1] == 0.0 for p in plan.positions)
    assert plan.seam == (0.0, 0.0) and output.arm == []
    # The gripper goes with each step, on its own topic; the arm's targets went with the chunk.
    _play(gate, rows[0])
    assert output.gripper == [0.0] and output.arm == [] and len(output.trajectories) == 1


@pytest.mark.parametrize(
    ("row", "change", "words"),
    [
        (3, [1.5, 0.0], ("row 3", "joint a", "limits")),
        (5, [math.nan, 0.0], ("row 5", "joint a", "finite")),
        (6, [0.0, 0.3], ("trajectory point 6", "joint b", "max_step")),
        # A jump at the seam is refused as a step's would be, whatever the blend makes of it.
        (0, [0.3, 0.0], ("trajectory point 0", "before the seam blend", "joint a", "max_step")),
        (4, [0.0, 0.0, 1.5], ("row 4", "gripper", "outside [0, 1]")),
    ],
    ids=["limits", "nan", "step", "seam", "gripper"],
)
def test_every_point_of_a_chunk_is_checked_before_anything_is_published(
    row: int, change: list[float], words: tuple[str, ...]
) -> None:
    gate, output, arm, _ = _chunk_gate()
    gate.begin_goal(RULES)
    rows = _rows(0.0, 0.05, 8)
    for i, value in enumerate(change):
        rows[row][i] += value
    reason = gate.publish_chunk(rows, arm.now + DUE_S)
    assert reason is not None and all(w in reason for w in words), reason
    assert output.trajectories == [] and output.arm == []


def test_a_chunk_continues_from_the_trajectory_it_replaces_and_after_a_wait_from_the_arm() -> None:
    gate, output, arm, _ = _chunk_gate()
    gate.begin_goal(RULES)
    assert gate.publish_chunk(_rows(0.0, 0.05, 15), arm.now + DUE_S) is None
    arm.now += 5.3 * PERIOD_S
    # The arm lags the trajectory; the seam is what the trajectory commands, not the arm.
    arm.positions = [0.1, 0.0]
    assert gate.publish_chunk(_rows(0.25, 0.03, 15), arm.now + DUE_S - 0.1 * PERIOD_S) is None
    first, second = output.trajectories
    assert second.seam == pytest.approx(first.position_at(second.start_s))
    assert second.seam[0] > 0.2
    # After a wait the arm is where it stopped: the next chunk starts from the measurement.
    gate.pause()
    arm.now += 30 * PERIOD_S
    arm.frames["front"] = arm.now
    arm.positions = [0.95, 0.0]
    reason = gate.publish_chunk(_rows(0.2, 0.0, 4), arm.now + DUE_S)
    assert reason is not None and "max_step" in reason
    assert gate.publish_chunk(_rows(0.9, 0.01, 4), arm.now + DUE_S) is None
    assert output.trajectories[-1].seam == (0.95, 0.0)


def test_a_stale_input_stops_a_chunk_and_every_step_of_it() -> None:
    gate, output, arm, _ = _chunk_gate()
    gate.begin_goal(RULES)
    rows = _rows(0.0, 0.05, 6)
    assert gate.publish_chunk(rows, arm.now + DUE_S) is None
    arm.joint_age_s = 0.3
    with pytest.raises(StaleObservation, match="max_state_age_s"):
        gate.check(rows[0])
    with pytest.raises(StaleObservation, match="max_state_age_s"):
        gate.publish_chunk(rows, arm.now + DUE_S)
    assert len(output.trajectories) == 1


def test_a_chunk_mode_stop_holds_the_measured_position_with_zero_velocity() -> None:
    gate, output, arm, log = _chunk_gate()
    gate.begin_goal(RULES)
    assert gate.publish_chunk(_rows(0.0, 0.05, 15), arm.now + DUE_S) is None
    arm.now += 4 * PERIOD_S
    arm.positions = [0.17, 0.01]
    assert gate.hold() is None and not log.errors
    stop = output.trajectories[-1]
    assert stop.immediate and stop.positions == ((0.17, 0.01),)
    assert stop.velocities == ((0.0, 0.0),) and output.arm == []


def test_with_stale_joints_a_chunk_mode_stop_holds_what_the_trajectory_commands_now() -> None:
    gate, output, arm, _ = _chunk_gate()
    gate.begin_goal(RULES)
    assert gate.publish_chunk(_rows(0.0, 0.05, 15), arm.now + DUE_S) is None
    playing = output.trajectories[-1]
    arm.now += 4 * PERIOD_S
    arm.joint_age_s = 1.8
    assert gate.hold() is None
    assert list(output.trajectories[-1].positions[0]) == pytest.approx(
        playing.position_at(arm.now)
    )


def test_an_idle_chunk_mode_gate_republishes_its_stop() -> None:
    gate, output, arm, _ = _chunk_gate()
    gate.begin_goal(RULES)
    assert gate.publish_chunk(_rows(0.0, 0.05, 3), arm.now + DUE_S) is None
    arm.positions = [0.15, 0.0]
    gate.hold()
    gate.end_goal()
    arm.now += 1.0
    gate.republish_hold(RULES)
    stops = output.trajectories[-2:]
    assert [s.positions for s in stops] == [((0.15, 0.0),)] * 2
    assert all(s.immediate and s.velocities == ((0.0, 0.0),) for s in stops)
