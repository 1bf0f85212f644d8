"""Simulated reach policies: determinism, limits, and an arm executing the rows reaches the
target."""

from __future__ import annotations

import pytest

pytest.importorskip("fastapi")

import math  # noqa: E402

from hypothesis import given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

from sequence_ai_gateway.droid import poses  # noqa: E402
from sequence_ai_gateway.models.catalogue import (  # noqa: E402
    EE_TARGET_LOWER,
    EE_TARGET_UPPER,
    PANDA_LOWER,
    PANDA_UPPER,
)
from sequence_ai_gateway.models.vision_policies import builtin_policies  # noqa: E402
from sequence_ai_gateway.policies import (  # noqa: E402
    PolicyObservation,
    ee_target,
    instruction_target,
    load_policy,
)

# The looking DROID models are tested in test_vision_policies.py; REACH and ABSOLUTE_REACH are
# sim-droid-reach and sim-droid-absolute-reach (pi05's and cosmos3's spaces, hashed targets).
PI05, COSMOS3, REACH, ABSOLUTE_REACH, BIMANUAL, STATELESS, EE_ABSOLUTE = builtin_policies()
HOME = [0.0, -0.785, 0.0, -2.356, 0.0, 1.571, 0.785]
# The Panda ready pose's hand TCP in panda_link0 (x, y, z, roll, pitch, yaw).
READY_POSE = [0.307, 0.0, 0.487, math.pi, 0.0, 0.0]


def observe(joints, gripper, instruction="put the red cup in the sink", seed=0, pose=None):
    return PolicyObservation(
        instruction, list(joints), list(gripper), seed=seed, end_effector_pose=pose
    )


def follow_twists(pose, rows, hz=25.0, linear=0.4, rotational=0.8):
    """Integrate unitless twist rows as Servo does at its Panda scales: the pose after them."""
    position, rpy = list(pose[:3]), list(pose[3:6])
    for row in rows:
        position = [p + v * linear / hz for p, v in zip(position, row[:3])]
        rpy = poses.rotate(rpy, [w * rotational / hz for w in row[3:6]])
    return position + rpy


@settings(max_examples=200, deadline=None)
@given(st.text(max_size=80))
def test_instruction_target_is_stable_and_inside_joint_limits(text):
    target = instruction_target(text, PANDA_LOWER, PANDA_UPPER)
    assert target == instruction_target(text, PANDA_LOWER, PANDA_UPPER)
    assert all(lo < t < hi for t, lo, hi in zip(target, PANDA_LOWER, PANDA_UPPER))


def test_target_ignores_case_and_spacing_but_not_words():
    a = instruction_target("Put the cup  in the sink", PANDA_LOWER, PANDA_UPPER)
    b = instruction_target("put the cup in the sink ", PANDA_LOWER, PANDA_UPPER)
    c = instruction_target("put the cup in the bin", PANDA_LOWER, PANDA_UPPER)
    assert a == b and a != c


def test_droid_reach_rows_respect_droid_scale_and_value_range():
    rows = REACH.steps(observe(HOME, [0.0]))
    assert len(rows) == 15 and all(len(r) == 8 for r in rows)
    previous = [0.0] * 7
    for row in rows:
        assert all(-1.0 <= v <= 1.0 for v in row)
        assert all(abs(v - p) <= 0.2 + 0.01 for v, p in zip(row[:7], previous))
        assert row[7] in (0.0, 1.0)
        previous = row[:7]


def test_arm_following_droid_reach_joint_position_conversion_converges():
    # The verified conversion: target_i = q_reference + row_i[:7], 8 steps per chunk.
    instruction = "stack the blocks"
    target = instruction_target(instruction, PANDA_LOWER, PANDA_UPPER)
    q = list(HOME)
    gripper = [0.0]
    for _ in range(40):
        rows = REACH.steps(observe(q, gripper, instruction))
        q_reference = list(q)
        for row in rows[:8]:
            q = [r + d for r, d in zip(q_reference, row[:7])]
            gripper = [1.0 if row[7] > 0.5 else 0.0]
    assert max(abs(a - b) for a, b in zip(q, target)) < 0.05
    assert gripper == [1.0]


def test_droid_reach_brakes_into_its_target_within_the_pandas_accelerations():
    # An arm playing 8 rows of each chunk, as above, from home to a target: within a chunk the
    # speed of each joint (rad/s at 15 Hz) never changes faster than 5 rad/s² (the 4 rad/s²
    # brake, rounded to steps, and the chunk's offset), from full speed to a stop included;
    # joint 2's limit is 7.5 (config/droid.yaml).
    instruction = "stack the blocks"
    q = list(HOME)
    for _ in range(40):
        rows = REACH.steps(observe(q, [0.0], instruction))
        q_reference = list(q)
        chunk = [q_reference] + [[r + d for r, d in zip(q_reference, row[:7])] for row in rows]
        speeds = [[(b - a) * 15.0 for a, b in zip(p, n)] for p, n in zip(chunk, chunk[1:])]
        changes = [abs(b - a) * 15.0 for v, w in zip(speeds, speeds[1:]) for a, b in zip(v, w)]
        assert max(changes) <= 5.0
        q = chunk[8]
    assert max(abs(a - b) for a, b in zip(q, instruction_target(
        instruction, PANDA_LOWER, PANDA_UPPER))) < 0.05


def test_arm_following_absolute_reach_rows_converges():
    instruction = "Put the banana in the bowl"
    target = instruction_target(instruction, PANDA_LOWER, PANDA_UPPER)
    q = list(HOME)
    for _ in range(20):
        rows = ABSOLUTE_REACH.steps(observe(q, [0.0], instruction))
        assert len(rows) == 32
        q = rows[-1][:7]
    assert max(abs(a - b) for a, b in zip(q, target)) < 0.05
    assert rows[-1][7] == 1.0


def test_bimanual_rows_converge_and_close_both_grippers():
    q = [0.0] * 12
    for _ in range(40):
        rows = BIMANUAL.steps(observe(q, [0.0, 0.0], "fold the towel"))
        assert len(rows) == 25 and all(len(r) == 14 for r in rows)
        q = rows[-1][:12]
    assert rows[-1][12:] == [1.0, 1.0]


def test_stateless_rows_ignore_the_state():
    a = STATELESS.steps(observe([], [], "pick up the sponge"))
    assert len(a) == 16 and all(len(r) == 7 for r in a)
    assert all(-1.0 <= v <= 1.0 for r in a for v in r)
    assert {r[6] for r in a} == {1.0}


@settings(max_examples=100, deadline=None)
@given(st.text(max_size=60))
def test_ee_target_is_stable_and_inside_the_target_box(text):
    target = ee_target(text)
    assert target == ee_target(text)
    assert all(lo <= t <= hi for t, lo, hi in zip(target, EE_TARGET_LOWER, EE_TARGET_UPPER))


poses_in_workspace = st.tuples(
    st.floats(0.2, 0.8), st.floats(-0.45, 0.45), st.floats(0.05, 0.8),
    st.floats(-math.pi, math.pi), st.floats(-1.2, 1.2), st.floats(-math.pi, math.pi),
)


@settings(max_examples=60, deadline=None)
@given(poses_in_workspace, st.sampled_from(["pick up the sponge", "wipe the table", "go left"]))
def test_ee_delta_rows_with_a_pose_stay_unitless_and_bring_the_hand_closer(pose, instruction):
    pose = list(pose)
    target = ee_target(instruction)
    rows = STATELESS.steps(observe([], [], instruction, pose=pose))
    assert len(rows) == 16 and all(len(r) == 7 for r in rows)
    assert all(-1.0 <= v <= 1.0 for r in rows for v in r[:6])
    assert all(r[6] in (0.0, 1.0) for r in rows)
    after = follow_twists(pose, rows)
    start_gap = poses.distance(pose[:3], target)
    if start_gap > 0.01:
        assert poses.distance(after[:3], target) < start_gap
    turn_before = math.dist(poses.orientation_error(pose[3:], poses.DOWNWARD_RPY), [0, 0, 0])
    turn_after = math.dist(poses.orientation_error(after[3:], poses.DOWNWARD_RPY), [0, 0, 0])
    assert turn_after <= turn_before + 1e-6


def test_ee_delta_rows_with_a_pose_converge_and_close_the_gripper():
    instruction = "pick up the sponge"
    target = ee_target(instruction)
    pose = list(READY_POSE)
    for _ in range(30):
        rows = STATELESS.steps(observe([], [], instruction, pose=pose))
        pose = follow_twists(pose, rows)
    assert poses.distance(pose[:3], target) < 0.01
    assert rows[-1][6] == 1.0


def test_ee_delta_without_a_pose_keeps_todays_push():
    rows = STATELESS.steps(observe([], [], "wipe the table"))
    assert all(r[3:6] == [0.0, 0.0, 0.0] for r in rows)
    assert rows != STATELESS.steps(observe([], [], "wipe the table", pose=list(READY_POSE)))


@settings(max_examples=60, deadline=None)
@given(poses_in_workspace, st.sampled_from(["pick up the sponge", "stack the cups"]))
def test_ee_absolute_rows_step_at_most_2cm_towards_the_target(pose, instruction):
    pose = list(pose)
    target = ee_target(instruction)
    rows = EE_ABSOLUTE.steps(observe([], [0.0], instruction, pose=pose))
    assert len(rows) == 10 and all(len(r) == 7 for r in rows)
    previous = pose
    for row in rows:
        assert poses.distance(row[:3], previous[:3]) <= 0.02 + 1e-9
        assert poses.distance(row[:3], target) <= poses.distance(previous[:3], target) + 1e-9
        turn = poses.orientation_error(previous[3:6], row[3:6])
        assert math.dist(turn, [0, 0, 0]) <= EE_ABSOLUTE.max_turn_rad + 1e-6
        # Angles continue from the row before: no 2 pi jumps (roll pi vs -pi).
        assert all(abs(a - b) <= math.pi for a, b in zip(row[3:6], previous[3:6]))
        assert row[6] in (0.0, 1.0)
        previous = row


def test_ee_absolute_rows_keep_the_measured_pose_s_side_of_the_roll_wrap():
    for roll in (math.pi - 1e-9, -math.pi + 1e-9):
        rows = EE_ABSOLUTE.steps(observe([], [0.0], pose=[0.5, 0.0, 0.4, roll, 0.0, 0.0]))
        assert all(math.copysign(1.0, r[3]) == math.copysign(1.0, roll) for r in rows)


def test_ee_absolute_rows_converge_and_close_the_gripper():
    instruction = "stack the cups"
    pose = list(READY_POSE)
    for _ in range(10):
        rows = EE_ABSOLUTE.steps(observe([], [0.0], instruction, pose=pose))
        pose = rows[-1][:6]
    assert pose[:3] == pytest.approx(ee_target(instruction), abs=1e-9)
    assert math.dist(poses.orientation_error(pose[3:], poses.DOWNWARD_RPY), [0, 0, 0]) < 1e-6
    assert rows[-1][6] == 1.0


@settings(max_examples=50, deadline=None)
@given(st.lists(st.floats(-10, 10), min_size=7, max_size=7), st.integers(0, 2**31))
def test_same_observation_and_seed_same_rows(joints, seed):
    obs = observe(joints, [0.0], seed=seed)
    for policy in (PI05, COSMOS3, REACH, ABSOLUTE_REACH):
        assert policy.steps(obs) == policy.steps(obs)


def test_example_plug_in_loads_and_holds_the_pose():
    policy = load_policy("sequence_ai_gateway.examples.hold_still:make_policy")
    rows = policy.steps(observe(HOME, [1.0]))
    assert rows == [HOME + [1.0]] * 10


@pytest.mark.parametrize(("spec", "message"), [
    ("no_colon", "package.module:factory"),
    ("sequence_ai_gateway.examples.hold_still:nothing", "no callable"),
    ("sequence_ai_gateway.examples.hold_still:HoldStill.inference_ms", "no callable"),
])
def test_bad_plug_in_spec_is_refused(spec, message):
    with pytest.raises(ValueError, match=message):
        load_policy(spec)
