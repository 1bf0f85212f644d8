"""Policy: connect, predict, next_action, ready, spec, guard, close — against the local gateway."""

from __future__ import annotations

import threading

import pytest
from support.policy_support import (
    PATIENCE_S,
    PI05,
    Robot,
    fetch_threads,
    make_observation,
    open_policy,
)
from support.waiting import wait_for

import sequence_ai
from sequence_ai import ChunkExhausted, InvalidRequest, SequencesError, Unavailable


def test_connect_checks_its_arguments_locally(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("SEQUENCES_API_KEY", raising=False)
    with pytest.raises(sequence_ai.AuthError):
        sequence_ai.connect(PI05, base_url="http://127.0.0.1:9")
    with pytest.raises(ValueError, match="validate"):
        sequence_ai.connect(PI05, api_key="k", base_url="http://127.0.0.1:9", validate="strictt")
    with pytest.raises(ValueError, match="allow_insecure"):
        sequence_ai.connect(PI05, api_key="k", base_url="http://example.com")
    with pytest.raises(ValueError, match="control_hz"):
        sequence_ai.connect(PI05, api_key="k", base_url="http://127.0.0.1:9", control_hz=0)
    policy = sequence_ai.connect(PI05, api_key="k", base_url="http://127.0.0.1:9")
    assert policy.model == "accounts/sequences/models/pi05-droid"
    assert "k" not in repr(policy).replace("pi05", "")
    policy.close()


def test_predict_returns_the_chunk_and_its_observation(gw) -> None:
    with open_policy(gw) as policy:
        obs = make_observation()
        prediction = policy.predict(obs)
        chunk = prediction.action_chunk
        assert prediction.observation is obs
        assert len(chunk) == 15 and chunk.open_loop_horizon == 8
        # Only the executable part of the chunk is buffered for next_action().
        assert policy.buffered == 8
        first = policy.next_action()
        assert first == chunk.steps[0]
        assert policy.buffered == 7


def test_predict_replaces_the_buffer_instead_of_appending(gw) -> None:
    with open_policy(gw) as policy:
        policy.predict(make_observation())
        second = policy.predict(make_observation(joints=[0.3] * 7))
        assert policy.buffered == 8
        assert policy.next_action() == second.action_chunk.steps[0]


def test_next_action_without_observation_on_empty_buffer_raises(gw) -> None:
    with open_policy(gw) as policy:
        with pytest.raises(ChunkExhausted):
            policy.next_action()
        steps = [policy.next_action(make_observation()) for _ in range(8)]
        assert len(steps) == 8
        assert gw.act_requests() == 1
        with pytest.raises(ChunkExhausted):
            policy.next_action()


def test_one_connection_serves_spec_ready_predict_and_run(gw) -> None:
    with open_policy(gw, control_hz=60) as policy:
        assert policy.spec().short_id == PI05
        assert policy.ready()[0] is True
        policy.wait_until_ready(timeout_s=5)
        policy.predict(make_observation())
        robot = Robot()
        outcome = policy.run(robot.observe, robot.act, max_actions=24, **robot.callbacks())
        assert outcome.reason == "completed"
    assert gw.connections() == 1
    assert gw.act_requests() == 1 + outcome.chunks


def test_spec_failure_is_not_cached(gateway) -> None:
    with open_policy(gateway) as policy:
        gateway.kill()
        with pytest.raises(Unavailable):
            policy.spec()
        gateway.restart()
        assert policy.spec().short_id == PI05


def test_strict_validation_refuses_before_sending(gw) -> None:
    with open_policy(gw, validate="strict") as policy:
        bad = make_observation()
        bad = sequence_ai.Observation(bad.images[:1], bad.proprioception, bad.instruction)
        with pytest.raises(InvalidRequest, match="missing view"):
            policy.predict(bad)
        assert gw.act_requests() == 0


def test_warn_validation_warns_and_still_sends(gw) -> None:
    with open_policy(gw, validate="warn") as policy:
        obs = make_observation()
        short = sequence_ai.Observation(
            obs.images, sequence_ai.Proprioception([0.0] * 7), obs.instruction
        )
        with pytest.warns(UserWarning, match="gripper"):
            policy.predict(short)
        assert gw.act_requests() == 1


def test_closed_policy_refuses_every_call(gw) -> None:
    policy = open_policy(gw)
    policy.close()
    policy.close()
    robot = Robot()
    for call in (
        lambda: policy.predict(make_observation()),
        lambda: policy.next_action(make_observation()),
        lambda: policy.run(robot.observe, robot.act, max_actions=1, validate=robot.validate),
        lambda: policy.ready(),
        lambda: policy.spec(),
    ):
        with pytest.raises(SequencesError, match="closed"):
            call()


def test_close_joins_fetch_threads_even_with_a_request_in_flight(gw) -> None:
    policy = open_policy(gw)
    gw.inject("stall", seconds=None)
    errors: list = []

    def predict() -> None:
        try:
            policy.predict(make_observation())
        except BaseException as exc:  # recorded: the test asserts its type
            errors.append(exc)

    caller = threading.Thread(target=predict)
    caller.start()
    assert wait_for(lambda: gw.act_requests() == 1)
    policy.close()
    caller.join(PATIENCE_S)
    gw.clear_faults()
    assert not caller.is_alive()
    assert not fetch_threads()
    assert len(errors) == 1 and isinstance(errors[0], SequencesError)


def test_second_thread_is_refused_while_predict_runs(gw) -> None:
    with open_policy(gw) as policy:
        policy.predict(make_observation())  # warm: the stalled call below is a plain request
        gw.inject("stall", seconds=None)
        started = threading.Event()
        result: list = []

        def first() -> None:
            started.set()
            result.append(policy.predict(make_observation()))

        caller = threading.Thread(target=first)
        caller.start()
        started.wait(PATIENCE_S)
        # The first call holds the guard once its request reached the gateway.
        assert wait_for(lambda: gw.act_requests() == 2)
        for call in (
            lambda: policy.predict(make_observation()),
            lambda: policy.next_action(make_observation()),
        ):
            with pytest.raises(SequencesError, match="another thread"):
                call()
        gw.clear_faults()
        caller.join(PATIENCE_S)
        assert len(result) == 1


@pytest.mark.slow  # over half a second of wall time
def test_wait_until_ready_brings_a_cold_model_up(gateway_factory) -> None:
    gateway = gateway_factory(cold_start_s=1.0)
    with open_policy(gateway) as policy:
        assert policy.ready()[0] is False
        waited = policy.wait_until_ready(timeout_s=PATIENCE_S, poll_s=0.1)
        assert waited >= 0
        assert policy.ready()[0] is True


def test_wait_until_ready_times_out_as_warming_unavailable(gateway_factory) -> None:
    gateway = gateway_factory(cold_start_s=60.0)
    with open_policy(gateway) as policy:
        with pytest.raises(Unavailable) as info:
            policy.wait_until_ready(timeout_s=0.3, poll_s=0.1)
        assert info.value.warming is True
        assert info.value.retry_after_s == pytest.approx(60.0, abs=1.0)


@pytest.mark.slow  # over half a second of wall time
def test_predict_waits_out_a_cold_start_and_reports_the_full_eta(gateway_factory) -> None:
    gateway = gateway_factory(cold_start_s=1.0)
    calls: list = []
    with open_policy(gateway, on_warming=lambda waited, eta: calls.append((waited, eta))) as p:
        with pytest.warns(UserWarning, match="loading"):
            prediction = p.predict(make_observation())
        assert len(prediction.action_chunk) == 15
    assert calls, "on_warming was never called"
    # The full-load ETA of the operation, not the poll interval.
    assert all(eta == pytest.approx(1.0, abs=0.5) for _, eta in calls)


def test_predict_with_startup_timeout_zero_raises_warming(gateway_factory) -> None:
    gateway = gateway_factory(cold_start_s=60.0)
    with open_policy(gateway, startup_timeout_s=0) as policy:
        with pytest.raises(Unavailable) as info:
            policy.predict(make_observation())
        assert info.value.warming is True




def test_ready_and_spec_are_safe_from_another_thread_while_a_run_drives(gw) -> None:
    # The ROS node's readiness thread polls ready() while a goal's run plays.
    robot = Robot()
    answers: list = []
    errors: list = []

    def monitor() -> None:
        try:
            while len(robot.chunks) < 4:
                answers.append((policy.ready()[0], policy.spec().short_id))
        except BaseException as exc:  # asserted below
            errors.append(exc)

    helper = threading.Thread(target=monitor)

    on_chunk = robot.after_first_chunk(helper.start)

    with open_policy(gw, control_hz=60) as policy:
        outcome = policy.run(robot.observe, robot.act, max_actions=1000,
                             until=lambda: len(robot.chunks) >= 4,
                             **{**robot.callbacks(), "on_chunk": on_chunk})
        helper.join(PATIENCE_S)
    assert errors == [] and answers and all(a == (True, PI05) for a in answers)
    assert outcome.reason == "until" and outcome.chunks == 4 and robot.holds == 1
