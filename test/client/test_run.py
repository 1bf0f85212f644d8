"""Policy.run: prefetch, endings, hold, errors, cold start, seam, controllers, progress."""

from __future__ import annotations

import io
import sys
import warnings

import pytest
from policy_support import (
    COSMOS,
    PI05,
    Robot,
    fetch_threads,
    make_observation,
    open_policy,
)

import sequence_ai
from sequence_ai import InvalidResponse, OutOfCredit, SequencesError, Unavailable


def run(policy: sequence_ai.Policy, robot: Robot, **kwargs):
    options = robot.callbacks()
    options.update(kwargs)
    return policy.run(robot.observe, robot.act, **options)


def test_completed_run_plays_max_actions_without_hold(gateway) -> None:
    robot = Robot()
    with open_policy(gateway, control_hz=60) as policy:
        outcome = run(policy, robot, max_actions=20)
        assert policy.buffered == 0
    assert outcome.reason == "completed" and not outcome.stopped_early
    assert outcome.actions == len(robot.acts) == 20
    # 8 executable steps per pi05 chunk: 8 + 8 + 4.
    assert outcome.chunks == len(robot.chunks) == 3
    assert outcome.action_space == "joint_delta"
    assert robot.holds == 0
    assert robot.statuses == ["starting", "running", "done"]
    assert repr(outcome).startswith("RunOutcome(20 actions over 3 chunks in ")
    assert repr(outcome).endswith(", completed)")


def test_never_fetches_beyond_max_actions(gateway) -> None:
    robot = Robot()
    with open_policy(gateway, control_hz=60) as policy:
        outcome = run(policy, robot, max_actions=16)
    assert outcome.chunks == 2
    assert gateway.counters()["requests"]["act"] == 2


def test_each_request_carries_its_own_fresh_observation(gateway) -> None:
    robot = Robot()
    with open_policy(gateway, control_hz=60) as policy:
        outcome = run(policy, robot, max_actions=40)
    assert gateway.counters()["requests"]["act"] == outcome.chunks == len(robot.observations)
    assert [p.observation for p in robot.chunks] == robot.observations
    # Each chunk's first step was requested after the previous chunk had started playing.
    assert robot.observed_at[0] == 0
    assert all(later > 0 for later in robot.observed_at[1:])


def test_prefetch_keeps_30_chunks_flowing_without_underrun(gateway) -> None:
    robot = Robot()
    with open_policy(gateway, control_hz=20) as policy:
        outcome = run(policy, robot, max_actions=31 * 8)
    assert outcome.chunks == 31
    assert outcome.underruns == 0 and robot.underruns == []
    assert "waiting" not in robot.statuses
    # One request in flight at a time: the gateway never queued two from this loop.
    assert max(gateway.counters()["max_queue_depth"].values()) <= 1


def test_without_prefetch_every_chunk_boundary_is_an_underrun(gateway) -> None:
    robot = Robot()
    with open_policy(gateway, control_hz=60) as policy:
        outcome = run(policy, robot, max_actions=40, prefetch=False)
    assert outcome.chunks == 5
    assert outcome.underruns == 4 == len(robot.underruns)
    assert outcome.underrun_s > 0
    # Each request is made only once the buffer is empty: strictly closed loop.
    assert robot.observed_at == [0, 8, 16, 24, 32]
    assert robot.statuses == ["starting", "running"] + ["waiting", "running"] * 4 + ["done"]
    assert "4 underruns" in repr(outcome)


def test_cold_start_is_waited_out_and_latency_average_seeded_warm(gateway_factory) -> None:
    gateway = gateway_factory(cold_start_s=1.5)
    robot = Robot()
    warming: list = []
    with open_policy(gateway, control_hz=30, on_warming=lambda w, e: warming.append(e)) as p:
        with pytest.warns(UserWarning, match="loading"):
            outcome = run(p, robot, max_actions=6 * 8)
    assert outcome.reason == "completed" and outcome.chunks == 6
    assert robot.statuses[0] == "starting" and "running" in robot.statuses
    assert warming and all(eta == pytest.approx(1.5, abs=0.5) for eta in warming)
    # Every cold attempt re-observed: more than one observation before the first action.
    cold_attempts = robot.observed_at.count(0)
    assert cold_attempts >= 2
    assert gateway.counters()["requests"]["act"] == cold_attempts - 1 + outcome.chunks
    prefetches = [n for n in robot.observed_at if n > 0]
    # No warm sample yet: the first prefetch fires after the first step of the first chunk.
    assert prefetches[0] == 1
    # Later prefetches use an average of warm requests only; seeded with the 1.5 s cold wait
    # the lead would exceed the 8-step runway and they would fire after one step again.
    played_when_fired = [n - 8 * i for i, n in enumerate(prefetches)]
    assert all(played >= 3 for played in played_when_fired[1:4])


def test_startup_budget_exhausted_raises_unavailable_with_hold(gateway_factory) -> None:
    gateway = gateway_factory(cold_start_s=60.0)
    robot = Robot()
    with open_policy(gateway) as policy:
        with pytest.warns(UserWarning), pytest.raises(Unavailable) as info:
            run(policy, robot, max_actions=10, startup_timeout_s=0.4)
    assert info.value.warming is True
    assert info.value.outcome.reason == "raised:Unavailable"
    assert info.value.outcome.actions == 0 and robot.acts == []
    assert robot.holds == 1


def test_max_seconds_bounds_the_cold_start(gateway_factory) -> None:
    gateway = gateway_factory(cold_start_s=60.0)
    robot = Robot()
    with open_policy(gateway) as policy:
        with pytest.warns(UserWarning):
            outcome = run(policy, robot, max_actions=10, max_seconds=0.5)
    assert outcome.reason == "timeout" and outcome.stopped_early
    assert robot.acts == [] and robot.holds == 1


def test_max_seconds_bounds_an_unwaited_first_fill_that_stalls(gateway) -> None:
    robot = Robot()
    gateway.inject("stall", seconds=None)
    with open_policy(gateway) as policy:
        outcome = run(policy, robot, max_actions=10, max_seconds=0.5, startup_timeout_s=0)
        gateway.clear_faults()
    assert outcome.reason == "timeout" and robot.holds == 1 and robot.acts == []


def test_max_seconds_bounds_a_fetch_stalled_mid_run(gateway) -> None:
    robot = Robot()

    def stall_after_first(prediction) -> None:
        robot.on_chunk(prediction)
        if len(robot.chunks) == 1:
            gateway.inject("stall", seconds=None)

    with open_policy(gateway, control_hz=60) as policy:
        outcome = run(policy, robot, max_actions=100, max_seconds=1.0, on_chunk=stall_after_first)
        gateway.clear_faults()
    assert outcome.reason == "timeout"
    assert outcome.actions == 8 and outcome.chunks == 1
    assert outcome.underruns == 1 and robot.holds == 1


def test_mid_run_warming_raises_unavailable_and_holds(gateway) -> None:
    robot = Robot()

    def go_cold(prediction) -> None:
        robot.on_chunk(prediction)
        if len(robot.chunks) == 1:
            gateway.inject("warming", seconds=30)

    with open_policy(gateway, control_hz=60) as policy:
        with pytest.raises(Unavailable) as info:
            run(policy, robot, max_actions=100, on_chunk=go_cold)
    assert info.value.warming is True
    assert info.value.outcome.reason == "raised:Unavailable"
    assert len(robot.acts) == 8 and robot.holds == 1


@pytest.mark.parametrize(
    ("fault", "status", "error"),
    [
        ("status", 500, SequencesError),
        ("status", 503, Unavailable),
        ("status", 402, OutOfCredit),
        ("reset", None, Unavailable),
    ],
)
def test_service_errors_mid_run_are_raised_with_outcome_after_hold(
    gateway, fault: str, status, error
) -> None:
    robot = Robot()

    def fail_next(prediction) -> None:
        robot.on_chunk(prediction)
        if len(robot.chunks) == 1:
            gateway.inject(fault, status=status)

    with open_policy(gateway, control_hz=60) as policy:
        with pytest.raises(error) as info:
            run(policy, robot, max_actions=100, on_chunk=fail_next)
    assert info.value.outcome.reason == f"raised:{type(info.value).__name__}"
    assert info.value.outcome.stopped_early
    assert len(robot.acts) == 8 and robot.holds == 1


@pytest.mark.parametrize("fault", ["nan", "inf", "wrong_dim", "empty", "malformed"])
def test_a_chunk_failing_sanity_checks_never_reaches_act(gateway, fault: str) -> None:
    robot = Robot()

    def corrupt_next(prediction) -> None:
        robot.on_chunk(prediction)
        if len(robot.chunks) == 1:
            gateway.inject(fault)

    with open_policy(gateway, control_hz=60) as policy:
        with pytest.raises(InvalidResponse) as info:
            run(policy, robot, max_actions=100, on_chunk=corrupt_next)
    assert info.value.outcome.reason == "raised:InvalidResponse"
    # Only the first (good) chunk was played.
    assert robot.acts == robot.chunks[0].action_chunk.steps[:8]
    assert robot.holds == 1


@pytest.mark.parametrize("where", ["observe", "act", "validate", "until", "on_chunk"])
def test_callback_errors_are_reraised_with_outcome_after_one_hold(gateway, where: str) -> None:
    robot = Robot()
    calls = {"n": 0}

    def boom(*args):
        calls["n"] += 1
        if calls["n"] == 2:
            raise RuntimeError(f"{where} failed")
        return {"observe": robot.observe, "act": robot.act}.get(where, lambda *a: None)(*args)

    kwargs = {"max_actions": 40}
    if where in ("observe", "act"):
        observe = boom if where == "observe" else robot.observe
        act = boom if where == "act" else robot.act
        options = robot.callbacks()
        with open_policy(gateway, control_hz=60) as policy:
            with pytest.raises(RuntimeError) as info:
                policy.run(observe, act, **kwargs, **options)
    else:
        def false_until(*args):
            boom(*args)
            return False

        def true_validate(*args):
            boom(*args)
            return True

        hook = {"validate": true_validate, "until": false_until, "on_chunk": boom}[where]
        with open_policy(gateway, control_hz=60) as policy:
            with pytest.raises(RuntimeError) as info:
                run(policy, robot, **kwargs, **{where: hook})
    assert info.value.outcome.reason == "raised:RuntimeError"
    assert info.value.outcome.stopped_early
    assert robot.holds == 1


def test_validate_false_stops_before_act_and_holds(gateway) -> None:
    robot = Robot()
    seen: list = []

    def validate(row) -> bool:
        seen.append(row)
        return len(seen) < 3

    with open_policy(gateway, control_hz=60) as policy:
        outcome = run(policy, robot, max_actions=40, validate=validate)
    assert outcome.reason == "validate" and outcome.stopped_early
    assert len(robot.acts) == 2 and robot.holds == 1


def test_until_ends_early_and_holds_once(gateway) -> None:
    robot = Robot()
    with open_policy(gateway, control_hz=60) as policy:
        outcome = run(policy, robot, max_actions=40, until=lambda: len(robot.acts) >= 5)
    assert outcome.reason == "until" and outcome.stopped_early
    assert len(robot.acts) == 5 and robot.holds == 1


def test_each_run_starts_with_an_empty_buffer(gateway) -> None:
    with open_policy(gateway, control_hz=60) as policy:
        policy.predict(make_observation(joints=[0.5] * 7))
        assert policy.buffered == 8
        first = Robot(instruction="wave")
        stop = run(policy, first, max_actions=40, validate=lambda row: len(first.acts) < 3)
        assert stop.reason == "validate" and policy.buffered == 0
        second = Robot(instruction="stack the blocks")
        run(policy, second, max_actions=4)
    # The second run played its own chunk, requested with its own observation.
    assert second.chunks[0].observation is second.observations[0]
    assert second.acts == second.chunks[0].action_chunk.steps[:4]


def test_validate_none_warns_once_per_policy(gateway) -> None:
    robot = Robot()
    with open_policy(gateway, control_hz=60) as policy:
        with pytest.warns(UserWarning, match="validate"):
            policy.run(robot.observe, robot.act, max_actions=2, progress=False)
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            policy.run(robot.observe, robot.act, max_actions=2, progress=False)


def test_no_fetch_thread_survives_close(gateway) -> None:
    robot = Robot()
    with open_policy(gateway, control_hz=60) as policy:
        run(policy, robot, max_actions=24)
    assert fetch_threads() == []


def test_run_checks_its_arguments(gateway) -> None:
    robot = Robot()
    with open_policy(gateway) as policy:
        for bad in ({"max_actions": 0}, {"max_actions": 1.5}, {"max_actions": True},
                    {"max_actions": 5, "max_seconds": 0},
                    {"max_actions": 5, "max_seconds": float("inf")},
                    {"max_actions": 5, "smooth_seam": -1},
                    {"max_actions": 5, "controller": "torque"},
                    {"max_actions": 5, "progress": "yes"},
                    {"max_actions": 5, "model": "other"}):
            with pytest.raises(ValueError):
                policy.run(robot.observe, robot.act, validate=robot.validate, **bad)
        with pytest.raises(TypeError):
            policy.run(robot.observe, robot.act, 5)  # max_actions is keyword-only
    assert gateway.counters()["requests"]["act"] == 0


# -- seam ------------------------------------------------------------------------------------


def _two_runs(gateway, model: str, **kwargs):
    plain, smoothed = Robot(model), Robot(model)
    with open_policy(gateway, model=model, control_hz=120) as policy:
        first = run(policy, plain, max_actions=kwargs.pop("max_actions"), **kwargs)
        second = run(policy, smoothed, max_actions=first.actions, smooth_seam=4, **kwargs)
    return plain, smoothed, first, second


def test_smooth_seam_blends_absolute_rows_but_measures_before(gateway) -> None:
    plain, smoothed, first, second = _two_runs(gateway, COSMOS, max_actions=64)
    per_chunk = len(plain.chunks[0].action_chunk)
    assert first.chunks == second.chunks == 2 and first.action_space == "joint_absolute"
    # Measured on the rows act would get, before blending: the same jump either way.
    assert first.max_seam_jump is not None and first.max_seam_jump > 0
    assert second.max_seam_jump == pytest.approx(first.max_seam_jump)
    # Never the first chunk; only the first 4 rows of a later one; then identical again.
    assert smoothed.acts[:per_chunk] == plain.acts[:per_chunk]
    blended = smoothed.acts[per_chunk:per_chunk + 4]
    assert all(b != p for b, p in zip(blended, plain.acts[per_chunk:per_chunk + 4]))
    assert smoothed.acts[per_chunk + 4:] == plain.acts[per_chunk + 4:]
    # Each blended row lies between the last executed row and the chunk's own row.
    last = plain.acts[per_chunk - 1]
    for blend, own in zip(blended, plain.acts[per_chunk:]):
        for b, lo_hi in zip(blend, zip(last, own)):
            assert min(lo_hi) - 1e-9 <= b <= max(lo_hi) + 1e-9


def test_smooth_seam_passes_delta_rows_through(gateway) -> None:
    plain, smoothed, first, second = _two_runs(gateway, PI05, max_actions=24)
    assert first.action_space == "joint_delta"
    assert smoothed.acts == plain.acts
    assert second.max_seam_jump == pytest.approx(first.max_seam_jump)


def test_smooth_seam_on_joint_positions_leaves_the_gripper_dim_alone(gateway) -> None:
    plain, smoothed, first, second = _two_runs(
        gateway, PI05, max_actions=24, controller="joint_position"
    )
    assert smoothed.acts[:8] == plain.acts[:8]
    for b, p in zip(smoothed.acts[8:12], plain.acts[8:12]):
        assert b[7] == p[7]
        assert b[:7] != p[:7]
    assert second.max_seam_jump == pytest.approx(first.max_seam_jump)


# -- controllers ------------------------------------------------------------------------------


def test_native_controller_hands_prepared_rows(gateway) -> None:
    robot = Robot()
    with open_policy(gateway, control_hz=60) as policy:
        model = policy.spec()
        run(policy, robot, max_actions=16, controller="native")
    expected = [
        sequence_ai.prepare(p.action_chunk, model, i) for p in robot.chunks for i in range(8)
    ]
    assert robot.acts == expected
    assert all(row[7] in (0.0, 1.0) and all(-1 <= v <= 1 for v in row) for row in robot.acts)


def test_joint_position_controller_offsets_each_chunk_by_its_own_request_joints(gateway) -> None:
    robot = Robot()
    with open_policy(gateway, control_hz=60) as policy:
        model = policy.spec()
        run(policy, robot, max_actions=24, controller="joint_position")
    assert len(robot.chunks) == 3
    for k, prediction in enumerate(robot.chunks):
        q = prediction.observation.proprioception.joint_positions
        assert q == robot.joints_for(k)
        for i in range(8):
            row = sequence_ai.prepare(prediction.action_chunk, model, i)
            target = robot.acts[8 * k + i]
            assert target[:7] == pytest.approx([qj + r for qj, r in zip(q, row[:7])])
            assert target[7] == row[7]


def test_joint_position_controller_passes_absolute_rows_prepared(gateway) -> None:
    robot = Robot(COSMOS)
    with open_policy(gateway, model=COSMOS, control_hz=120) as policy:
        run(policy, robot, max_actions=32, controller="joint_position")
    assert robot.acts == robot.chunks[0].action_chunk.steps[:32]


def test_joint_position_controller_refuses_a_model_without_conversion(gateway) -> None:
    robot = Robot()
    with open_policy(gateway, model="sim-stateless-ee-delta") as policy:
        with pytest.raises(ValueError, match="conversion"):
            run(policy, robot, max_actions=5, controller="joint_position")
    assert gateway.counters()["requests"]["act"] == 0


# -- progress ---------------------------------------------------------------------------------


class _Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


@pytest.mark.parametrize(("tty", "progress", "shown"), [
    (False, "auto", False), (True, "auto", True), (True, False, False), (False, True, True),
])
def test_progress_line_goes_to_stderr_only_when_asked_or_a_terminal(
    gateway, monkeypatch: pytest.MonkeyPatch, tty: bool, progress, shown: bool
) -> None:
    stderr = _Terminal() if tty else io.StringIO()
    monkeypatch.setattr(sys, "stderr", stderr)
    robot = Robot()
    with open_policy(gateway, control_hz=60) as policy:
        run(policy, robot, max_actions=10, progress=progress)
    text = stderr.getvalue()
    if shown:
        assert text.startswith("\r") and "running" in text and text.endswith("\n")
        assert text.count("\n") == 1
    else:
        assert text == ""
