"""Simulated policies: determinism, limits, and an arm executing the rows reaches the target."""

from __future__ import annotations

import pytest

pytest.importorskip("fastapi")

from hypothesis import given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

from sequence_ai_gateway.catalogue import PANDA_LOWER, PANDA_UPPER  # noqa: E402
from sequence_ai_gateway.policies import (  # noqa: E402
    PolicyObservation,
    builtin_policies,
    instruction_target,
    load_policy,
)

PI05, COSMOS3, BIMANUAL, STATELESS = builtin_policies()
HOME = [0.0, -0.785, 0.0, -2.356, 0.0, 1.571, 0.785]


def observe(joints, gripper, instruction="put the red cup in the sink", seed=0):
    return PolicyObservation(instruction, list(joints), list(gripper), seed=seed)


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


def test_pi05_rows_respect_droid_scale_and_value_range():
    rows = PI05.steps(observe(HOME, [0.0]))
    assert len(rows) == 15 and all(len(r) == 8 for r in rows)
    previous = [0.0] * 7
    for row in rows:
        assert all(-1.0 <= v <= 1.0 for v in row)
        assert all(abs(v - p) <= 0.2 + 0.01 for v, p in zip(row[:7], previous))
        assert row[7] in (0.0, 1.0)
        previous = row[:7]


def test_arm_following_pi05_joint_position_conversion_converges():
    # The verified conversion: target_i = q_reference + row_i[:7], 8 steps per chunk.
    instruction = "stack the blocks"
    target = instruction_target(instruction, PANDA_LOWER, PANDA_UPPER)
    q = list(HOME)
    gripper = [0.0]
    for _ in range(40):
        rows = PI05.steps(observe(q, gripper, instruction))
        q_reference = list(q)
        for row in rows[:8]:
            q = [r + d for r, d in zip(q_reference, row[:7])]
            gripper = [1.0 if row[7] > 0.5 else 0.0]
    assert max(abs(a - b) for a, b in zip(q, target)) < 0.05
    assert gripper == [1.0]


def test_arm_following_cosmos3_absolute_rows_converges():
    instruction = "Put the banana in the bowl"
    target = instruction_target(instruction, PANDA_LOWER, PANDA_UPPER)
    q = list(HOME)
    for _ in range(20):
        rows = COSMOS3.steps(observe(q, [0.0], instruction))
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


@settings(max_examples=50, deadline=None)
@given(st.lists(st.floats(-10, 10), min_size=7, max_size=7), st.integers(0, 2**31))
def test_same_observation_and_seed_same_rows(joints, seed):
    obs = observe(joints, [0.0], seed=seed)
    assert PI05.steps(obs) == PI05.steps(obs)
    assert COSMOS3.steps(obs) == COSMOS3.steps(obs)


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
