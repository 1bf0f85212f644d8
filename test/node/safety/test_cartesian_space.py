"""The arm gate in Cartesian space (issue 21): ee_delta twists and ee_absolute pose targets go
through the one ArmGate flow — fresh pose and cameras, every check before anything is
published, refusals never rescaled — and its holds are a zero twist or the measured pose."""

from __future__ import annotations

import ast
import math
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path

import pytest
from geometry_msgs.msg import PoseStamped, TransformStamped

import sequence_ai_ros
from sequence_ai_ros.core import pose_math
from sequence_ai_ros.core.command_kinds import EE_ABSOLUTE, EE_DELTA, Interface
from sequence_ai_ros.core.freshness import StaleObservation
from sequence_ai_ros.core.node_config import NodeConfig
from sequence_ai_ros.core.readings import JointSnapshot
from sequence_ai_ros.geometry.command_frame import CommandFrame
from sequence_ai_ros.goals.stop_policy import ArmCommand, StopCause, arm_command
from sequence_ai_ros.inputs.pose_source import TfPoses, TopicPoses
from sequence_ai_ros.params.spec_table import SPECS
from sequence_ai_ros.safety.cartesian_space import CartesianRules, CartesianSpace
from sequence_ai_ros.safety.gate import ArmGate, CommandRefused, MotionRules
from sequence_ai_ros.safety.joint_rules import SafetyLimits

PERIOD_S = 1 / 25
# The simulated arm's bounds (config/sim-stateless-ee-delta.yaml).
EE_RULES = CartesianRules.from_config(
    NodeConfig.from_values({name: spec.default for name, spec in SPECS.items()})
)
RULES = MotionRules(
    limits=SafetyLimits((), (), (), 0.25), max_state_age_s=0.25, max_image_age_s=0.5,
    camera_views=("front",), velocity_scale=1.0, gripper=True, cartesian=EE_RULES,
)
DOWN = (1.0, 0.0, 0.0, 0.0)  # the Panda's hand pointing down: roll pi


class _Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


class _Output:
    def __init__(self, interface: Interface) -> None:
        self.interface = interface
        self.arm: list[list[float]] = []
        self.gripper: list[list[float]] = []

    def publish_arm(self, values: Sequence[float]) -> None:
        self.arm.append([float(v) for v in values])

    def publish_gripper(self, values: Sequence[float]) -> None:
        self.gripper.append([float(v) for v in values])

    def command_rate_hz(self) -> float:
        return 0.0

    def destroy(self) -> None:
        pass


class _Inputs:
    """No joints (an ee model), one camera whose frame is always fresh."""

    def __init__(self, clock: _Clock) -> None:
        self._clock = clock

    def joints(self, max_age_s: float) -> JointSnapshot:
        return JointSnapshot([], None, 0.0)

    def ages(self) -> dict[str, float | None]:
        return {"front": 0.0}


class _Log:
    def __init__(self) -> None:
        self.errors: list[str] = []
        self.warnings: list[str] = []

    def error(self, message: str) -> None:
        self.errors.append(message)

    def warning(self, message: str) -> None:
        self.warnings.append(message)


def _pose_msg(position: Sequence[float], orientation: Sequence[float] = DOWN,
              frame: str = "panda_link0") -> PoseStamped:
    msg = PoseStamped()
    msg.header.frame_id = frame
    msg.pose.position.x, msg.pose.position.y, msg.pose.position.z = position
    q = msg.pose.orientation
    q.x, q.y, q.z, q.w = orientation
    return msg


def _gate(space: str, *, rules: MotionRules = RULES, frame: CommandFrame | None = None):
    clock = _Clock()
    poses = TopicPoses("panda_link0", "ee_pose", clock=clock)
    poses.store(_pose_msg((0.5, 0.0, 0.4)))
    output = _Output(Interface.VELOCITY if space == EE_DELTA else Interface.POSITION)
    log = _Log()
    gate = ArmGate(
        output, _Inputs(clock), joints=0, period_s=PERIOD_S, log=log, clock=clock,
        space=CartesianSpace(space, poses, PERIOD_S, frame),
    )
    gate.begin_goal(rules)
    return gate, output, poses, clock, log


def _play(gate: ArmGate, row: list[float]) -> None:
    assert gate.check(row) is None
    gate.publish(row)


# ----- ee_delta: MoveIt Servo twists -----


def test_a_unitless_twist_goes_out_as_the_row_and_the_gripper_apart() -> None:
    gate, output, _, _, _ = _gate(EE_DELTA)
    _play(gate, [0.5, 0.0, -0.25, 0.0, 0.0, 0.3, 1.0])
    assert output.arm == [[0.5, 0.0, -0.25, 0.0, 0.0, 0.3]]
    assert output.gripper == [[1.0]]


def test_speed_units_sends_the_row_times_the_scales() -> None:
    rules = replace(RULES, cartesian=replace(EE_RULES, command_type="speed_units"))
    gate, output, _, _, _ = _gate(EE_DELTA, rules=rules)
    _play(gate, [0.5, 0.0, 0.0, 0.0, 0.0, 0.5, 0.0])
    assert output.arm == [pytest.approx([0.2, 0.0, 0.0, 0.0, 0.0, 0.4])]


@pytest.mark.parametrize(
    ("row", "words"),
    [
        ([math.nan, 0, 0, 0, 0, 0, 0.0], "non-finite"),
        ([0, 0, math.inf, 0, 0, 0, 0.0], "non-finite"),
        ([1.2, 0, 0, 0, 0, 0, 0.0], "outside [-1, 1]"),
        ([0, 0, 0, 0, 0, -1.01, 0.0], "unitless"),
        # 1.0 x 0.4 m/s on two axes: 0.57 m/s, over max_linear_speed 0.5.
        ([1.0, 1.0, 0, 0, 0, 0, 0.0], "max_linear_speed"),
        ([0, 0, 0, 1.0, 1.0, 0, 0.0], "max_angular_speed"),
        ([0.1, 0, 0, 0, 0, 0, 1.5], "gripper"),
        ([0.1, 0, 0], "expected 6"),
    ],
)
def test_a_bad_twist_is_refused_and_nothing_is_published(row: list[float], words: str) -> None:
    gate, output, _, _, _ = _gate(EE_DELTA)
    reason = gate.check(row)
    assert reason is not None and words in reason
    with pytest.raises(CommandRefused):
        gate.publish(row)
    assert output.arm == [] and output.gripper == []


def test_a_twist_that_would_leave_the_workspace_within_one_period_is_refused() -> None:
    gate, output, poses, _, _ = _gate(EE_DELTA)
    # 3 mm inside x max 0.8: one period at 0.4 m/s moves 16 mm.
    poses.store(_pose_msg((0.797, 0.0, 0.4)))
    reason = gate.check([1.0, 0, 0, 0, 0, 0, 0.0])
    assert reason is not None and "outside the workspace" in reason and "x" in reason
    # Away from the wall it passes: refused rows are not scaled down, the direction decides.
    assert gate.check([-1.0, 0, 0, 0, 0, 0, 0.0]) is None
    assert output.arm == []


def test_a_stale_pose_stops_the_next_step() -> None:
    gate, output, _, clock, _ = _gate(EE_DELTA)
    _play(gate, [0.2, 0, 0, 0, 0, 0, 0.0])
    # One period later the newest pose is older than max_pose_age_s (0.25 s).
    clock.now += 0.26
    with pytest.raises(StaleObservation, match="max_pose_age_s"):
        gate.check([0.2, 0, 0, 0, 0, 0, 0.0])
    with pytest.raises(StaleObservation):
        gate.publish([0.2, 0, 0, 0, 0, 0, 0.0])
    assert len(output.arm) == 1


def test_the_ee_delta_hold_and_pause_are_zero_twists_even_with_a_stale_pose() -> None:
    gate, output, _, clock, _ = _gate(EE_DELTA)
    _play(gate, [0.2, 0, 0, 0, 0, 0, 0.0])
    gate.pause()
    clock.now += 5.0
    assert gate.hold() is None
    assert output.arm[1:] == [[0.0] * 6, [0.0] * 6]
    # A velocity-like arm is always held at a goal's end, preempted or not.
    command = arm_command(StopCause.PREEMPTED, interrupted=True, interface=gate.interface,
                          mode=gate.mode, hold_between_goals=False)
    assert command is ArmCommand.HOLD
    gate.end_goal()
    gate.republish_hold(RULES)
    assert output.arm[-1] == [0.0] * 6


def test_a_pose_in_another_frame_or_never_received_is_stale() -> None:
    gate, _, poses, _, _ = _gate(EE_DELTA)
    poses.store(_pose_msg((0.5, 0.0, 0.4), frame="world"))
    with pytest.raises(StaleObservation, match="base_frame"):
        gate.check([0.1, 0, 0, 0, 0, 0, 0.0])
    empty = TopicPoses("panda_link0", "ee_pose")
    assert empty.age() is None
    with pytest.raises(StaleObservation, match="no message"):
        empty.pose(1.0)


# ----- ee_absolute: pose targets -----


def _target(position: Sequence[float], rpy: Sequence[float] = (math.pi, 0.0, 0.0),
            gripper: float = 0.0) -> list[float]:
    return [*position, *rpy, gripper]


def test_pose_targets_continue_from_the_last_target() -> None:
    gate, output, _, _, _ = _gate(EE_ABSOLUTE)
    _play(gate, _target((0.51, 0.0, 0.4)))
    # The arm lags; continuity is from the last target: 0.5 m/s allows 0.02 m per period.
    _play(gate, _target((0.525, 0.0, 0.4)))
    reason = gate.check(_target((0.546, 0.0, 0.4)))
    assert reason is not None and "max_linear_speed" in reason
    assert output.arm[0] == pytest.approx(_target((0.51, 0.0, 0.4))[:6])


@pytest.mark.parametrize(
    ("row", "words"),
    [
        (_target((math.nan, 0.0, 0.4)), "non-finite"),
        (_target((0.5, 0.0, 0.4), (math.pi, math.inf, 0.0)), "non-finite"),
        (_target((0.5, 0.0, 0.04)), "outside the workspace"),
        (_target((0.53, 0.0, 0.4)), "max_linear_speed"),
        (_target((0.5, 0.0, 0.4), (math.pi, 0.0, 0.2)), "max_angular_speed"),
    ],
)
def test_a_bad_pose_target_is_refused(row: list[float], words: str) -> None:
    gate, output, poses, _, _ = _gate(EE_ABSOLUTE)
    poses.store(_pose_msg((0.5, 0.0, 0.06) if "workspace" in words else (0.5, 0.0, 0.4)))
    reason = gate.check(row)
    assert reason is not None and words in reason
    with pytest.raises(CommandRefused):
        gate.publish(row)
    assert output.arm == []


def test_the_ee_absolute_hold_is_the_measured_pose_else_the_last_target() -> None:
    gate, output, poses, clock, log = _gate(EE_ABSOLUTE)
    _play(gate, _target((0.51, 0.0, 0.4)))
    poses.store(_pose_msg((0.505, 0.0, 0.4)))
    assert gate.hold() is None
    held = output.arm[-1]
    assert held[:3] == pytest.approx([0.505, 0.0, 0.4])
    assert pose_math.rpy_to_quaternion(*held[3:6]) == pytest.approx(DOWN, abs=1e-9) or (
        [-v for v in pose_math.rpy_to_quaternion(*held[3:6])] == pytest.approx(DOWN, abs=1e-9)
    )
    # With a stale pose the last target (the hold just sent) is held instead.
    clock.now += 1.0
    assert gate.hold() is None
    assert output.arm[-1] == pytest.approx(held)
    # A position arm preempted with hold_between_goals off is left at its last target, as
    # for joints.
    command = arm_command(StopCause.PREEMPTED, interrupted=True, interface=gate.interface,
                          mode=gate.mode, hold_between_goals=False)
    assert command is ArmCommand.LEAVE
    assert log.errors == []


def test_an_idle_pose_hold_is_republished_only_against_a_fresh_pose() -> None:
    gate, output, poses, clock, log = _gate(EE_ABSOLUTE)
    _play(gate, _target((0.51, 0.0, 0.4)))
    assert gate.hold() is None
    gate.end_goal()
    sent = len(output.arm)
    gate.republish_hold(RULES)
    assert len(output.arm) == sent + 1
    clock.now += 1.0
    gate.republish_hold(RULES)
    gate.republish_hold(RULES)
    assert len(output.arm) == sent + 1
    assert len(log.warnings) == 1 and "max_pose_age_s" in log.warnings[0]


# ----- tf2 as the pose source (a stand-in buffer: tf2_ros does not import here) -----


class _Buffer:
    def __init__(self) -> None:
        self.transform: TransformStamped | None = None
        self.asked: list[tuple[str, str]] = []

    def lookup_transform(self, target: str, source: str, time: object) -> TransformStamped:
        self.asked.append((target, source))
        if self.transform is None:
            raise LookupError(f'"{source}" passed to lookupTransform does not exist')
        return self.transform


def test_tf2_poses_look_up_base_to_ee_and_age_by_the_stamp() -> None:
    buffer, now = _Buffer(), [50.0]
    poses = TfPoses(buffer, "panda_link0", "panda_hand_tcp", lambda: now[0])
    assert poses.name == "tf2" and poses.age() is None
    with pytest.raises(StaleObservation, match="panda_hand_tcp"):
        poses.pose(1.0)
    found = TransformStamped()
    found.header.stamp.sec = 49
    found.transform.translation.x, found.transform.translation.z = 0.3, 0.5
    found.transform.rotation.x, found.transform.rotation.w = 1.0, 0.0
    buffer.transform = found
    pose = poses.pose(1.5)
    assert buffer.asked[-1] == ("panda_link0", "panda_hand_tcp")
    assert pose.age_s == pytest.approx(1.0)
    assert pose.vector[:3] == pytest.approx([0.3, 0.0, 0.5])
    assert abs(pose.vector[3]) == pytest.approx(math.pi)
    with pytest.raises(StaleObservation, match="max_pose_age_s"):
        poses.pose(0.5)


@pytest.mark.slow  # over half a second of wall time
def test_only_the_gate_and_the_dry_run_make_cartesian_outputs() -> None:
    """A twist or pose target publisher is made by `command_output` (inside ArmGate(...),
    test_arm.py checks) or as the dry run's sink on ~/planned, nowhere else."""
    package = Path(sequence_ai_ros.__file__).parent
    made: list[str] = []
    for source in package.rglob("*.py"):
        tree = ast.parse(source.read_text(encoding="utf-8"))
        for call in ast.walk(tree):
            name = getattr(getattr(call, "func", None), "id", "")
            if isinstance(call, ast.Call) and name in (
                "CartesianCommands", "DryRunCartesian", "cartesian_output"
            ):
                made.append(f"{source.name}:{name}")
                if name == "DryRunCartesian":
                    topic = next(k.value for k in call.keywords if k.arg == "topic")
                    assert getattr(topic, "id", "") == "DRY_RUN_TOPIC", ast.dump(topic)
    assert sorted(made) == [
        "cartesian_output.py:CartesianCommands", "dry_run.py:DryRunCartesian",
        "group_output.py:cartesian_output",
    ]
