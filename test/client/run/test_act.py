"""Policy.act(): bounded by max_seconds, instruction on every request, latch hygiene."""

from __future__ import annotations

import threading

import pytest
from support.policy_support import PATIENCE_S, Robot, open_policy

from sequence_ai import SequencesError


def test_max_seconds_is_required_positive_and_finite(gw) -> None:
    robot = Robot()
    with open_policy(gw) as policy:
        with pytest.raises(TypeError):
            policy.act("wave", robot.observe, robot.act)  # type: ignore[call-arg]
        for bad in (0, -1, float("inf"), float("nan"), None, True):
            with pytest.raises(ValueError, match="max_seconds"):
                policy.act("wave", robot.observe, robot.act, max_seconds=bad)
        with pytest.raises(TypeError, match="instruction"):
            policy.act(None, robot.observe, robot.act, max_seconds=1)  # type: ignore[arg-type]
    assert robot.observations == [] and gw.act_requests() == 0


def test_instruction_overrides_every_request_and_the_latch_is_cleared(gw) -> None:
    robot = Robot(instruction="something the eyes last saw")
    with open_policy(gw, control_hz=60) as policy:
        outcome = policy.act(
            "stack the blocks", robot.observe, robot.act, max_seconds=PATIENCE_S,
            until=lambda: len(robot.chunks) >= 3, **robot.callbacks(),
        )
        assert policy.instruction is None
    assert outcome.reason == "until" and robot.holds == 1
    assert outcome.chunks == 3
    assert all(p.observation.instruction == "stack the blocks" for p in robot.chunks)
    # The instruction the call starts with is not a swap.
    assert outcome.instruction_swaps == 0
    assert outcome.max_instruction_lag_s is None
    assert "instruction swap" not in repr(outcome)


def test_set_instruction_mid_act_reaches_the_next_request(gw) -> None:
    robot = Robot()
    with open_policy(gw, control_hz=60) as policy:

        def on_chunk(prediction) -> None:
            robot.on_chunk(prediction)
            if len(robot.chunks) == 2:
                policy.set_instruction("put it back")
                policy.set_instruction("put it back")  # same text: no second swap

        outcome = policy.act(
            "pick it up", robot.observe, robot.act, max_seconds=PATIENCE_S,
            until=lambda: len(robot.chunks) >= 4, **{**robot.callbacks(), "on_chunk": on_chunk},
        )
    texts = [p.observation.instruction for p in robot.chunks]
    assert texts[:2] == ["pick it up", "pick it up"]
    assert texts[2:] == ["put it back", "put it back"]
    assert outcome.instruction_swaps == 1
    assert outcome.max_instruction_lag_s is not None
    assert "1 instruction swaps" in repr(outcome)


@pytest.mark.slow  # over half a second of wall time
def test_act_ends_at_max_seconds_with_one_hold(gw) -> None:
    robot = Robot()
    with open_policy(gw, control_hz=60) as policy:
        outcome = policy.act("wave", robot.observe, robot.act, max_seconds=0.5,
                             **robot.callbacks())
    assert outcome.reason == "timeout" and outcome.stopped_early
    assert robot.holds == 1 and robot.events[-1][0] == "hold"


def test_act_passes_run_options_through(gw) -> None:
    robot = Robot()
    with open_policy(gw, control_hz=60) as policy:
        outcome = policy.act(
            "wave", robot.observe, robot.act, max_seconds=5,
            until=lambda: len(robot.acts) >= 3, controller="native", **robot.callbacks(),
        )
    assert outcome.reason == "until" and len(robot.acts) == 3
    assert all(row[7] in (0.0, 1.0) for row in robot.acts)


def test_refused_concurrent_act_leaves_the_running_instruction_alone(gw) -> None:
    robot = Robot()
    playing = threading.Event()
    release = threading.Event()
    outcomes: list = []

    def act(row) -> None:
        robot.act(row)
        playing.set()

    with open_policy(gw, control_hz=60) as policy:

        def first() -> None:
            outcomes.append(policy.act("first task", robot.observe, act, max_seconds=PATIENCE_S,
                                       until=release.is_set, **robot.callbacks()))

        thread = threading.Thread(target=first)
        thread.start()
        assert playing.wait(PATIENCE_S)
        intruder = Robot()
        with pytest.raises(SequencesError, match="another thread"):
            policy.act("second task", intruder.observe, intruder.act, max_seconds=1)
        assert policy.instruction == "first task"
        release.set()
        thread.join(PATIENCE_S)
        assert policy.instruction is None
    assert outcomes[0].reason == "until"
    assert all(p.observation.instruction == "first task" for p in robot.chunks)
    assert intruder.observations == []
