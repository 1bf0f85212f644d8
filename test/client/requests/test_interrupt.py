"""interrupt(): stops playback, stalled fetches and cold starts; never leaks into a later call."""

from __future__ import annotations

import threading
import warnings
from typing import Any, Callable

import pytest
from support.policy_support import (
    PATIENCE_S,
    Robot,
    make_observation,
    open_policy,
)
from support.waiting import wait_for

import sequence_ai
from sequence_ai import SequencesError


def run_in_thread(call: Callable[[], Any]) -> tuple:
    """Start ``call`` on a thread; returns (thread, results, errors) lists filled when done."""
    results: list = []
    errors: list = []

    def body() -> None:
        try:
            results.append(call())
        except BaseException as exc:  # the test asserts on it
            errors.append(exc)

    thread = threading.Thread(target=body)
    thread.start()
    return thread, results, errors


def test_interrupt_during_playback_stops_within_one_step(gw) -> None:
    robot = Robot()
    interrupted = threading.Event()
    acts_when_returned: list = []

    def act(row) -> None:
        robot.act(row)
        if len(robot.acts) == 5:
            interrupted.set()

    with open_policy(gw, control_hz=30) as policy:

        def interrupter() -> None:
            interrupted.wait(PATIENCE_S)
            policy.interrupt()
            acts_when_returned.append(len(robot.acts))

        helper = threading.Thread(target=interrupter)
        helper.start()
        outcome = policy.run(robot.observe, act, max_actions=1000, **robot.callbacks())
        helper.join(PATIENCE_S)
    assert outcome.reason == "interrupted" and outcome.stopped_early
    assert robot.holds == 1
    # No step after interrupt() returned, except at most one already being handed over.
    assert len(robot.acts) - acts_when_returned[0] <= 1
    assert robot.events[-1][0] == "hold"


def test_interrupt_cuts_through_a_stalled_fetch(gw) -> None:
    robot = Robot()
    waiting = threading.Event()

    on_chunk = robot.after_first_chunk(lambda: gw.inject("stall", seconds=None))

    def on_status(state: str) -> None:
        robot.on_status(state)
        if state == "waiting":
            waiting.set()

    with open_policy(gw, control_hz=60) as policy:
        options = {**robot.callbacks(), "on_chunk": on_chunk, "on_status": on_status}
        thread, results, errors = run_in_thread(
            lambda: policy.run(robot.observe, robot.act, max_actions=1000, **options)
        )
        assert waiting.wait(PATIENCE_S)
        policy.interrupt()
        # The stall lasts until cleared: the run can only return because interrupt cut it.
        thread.join(PATIENCE_S)
        assert not thread.is_alive()
        gw.clear_faults()
    assert errors == []
    outcome = results[0]
    # The first chunk played to its last row, slowing to rest (delta rows: zero velocity),
    # then the loop waited for the stalled one.
    assert outcome.reason == "interrupted" and outcome.chunks == 1
    assert outcome.actions == len(robot.reports[0][1].rows) > 8
    assert robot.acts[-1][:7] == [0.0] * 7 and robot.played_as_reported()
    assert outcome.underruns == 1 and robot.holds == 1
    assert robot.statuses[-1] == "done"


def test_interrupt_cuts_through_a_cold_start(gateway_factory) -> None:
    gateway = gateway_factory(cold_start_s=60.0)
    robot = Robot()
    with open_policy(gateway) as policy:
        with warnings.catch_warnings():
            # The "model is loading" notice is not under test here.
            warnings.simplefilter("ignore")
            thread, results, errors = run_in_thread(
                lambda: policy.run(robot.observe, robot.act, max_actions=10, **robot.callbacks())
            )
            assert wait_for(lambda: gateway.counters()["requests"]["act"] >= 1)
            policy.interrupt()
            thread.join(PATIENCE_S)
    assert not thread.is_alive() and errors == []
    assert results[0].reason == "interrupted"
    assert robot.acts == [] and robot.holds == 1


@pytest.mark.slow  # over half a second of wall time
def test_in_flight_request_of_an_interrupted_run_is_discarded(gw) -> None:
    first = Robot(instruction="wave")
    second = Robot(instruction="stack the blocks")
    with open_policy(gw, control_hz=60) as policy:

        def stall_then_stop(prediction) -> None:
            first.on_chunk(prediction)
            gw.inject("stall", seconds=None)

        def stop_when_waiting(state: str) -> None:
            if state == "waiting":
                policy.interrupt()

        outcome = policy.run(
            first.observe, first.act, max_actions=1000,
            **{**first.callbacks(), "on_chunk": stall_then_stop, "on_status": stop_when_waiting},
        )
        assert outcome.reason == "interrupted"
        gw.clear_faults()
        again = policy.run(second.observe, second.act, max_actions=16, **second.callbacks())
    assert again.reason == "completed" and again.chunks >= 1
    # Only the second run's own observations were installed, each from its due row.
    assert {id(p.observation) for p in second.chunks} <= {id(o) for o in second.observations}
    assert all(p.observation.instruction == "stack the blocks" for p in second.chunks)
    assert second.played_as_reported()
    installs = second.whole_row_installs()
    assert installs and installs[0][2] == 0
    for prediction, report, due in installs:
        steps = report.rows[: report.ramp_index]
        assert steps == prediction.action_chunk.steps[due : due + len(steps)]


def test_stale_interrupt_never_affects_a_later_call(gw) -> None:
    robot = Robot()
    with open_policy(gw, control_hz=60) as policy:
        policy.interrupt()  # nothing runs: discarded
        policy.predict(make_observation())
        policy.interrupt()
        assert len(policy.next_action(make_observation())) == 8
        policy.interrupt()
        policy.wait_until_ready(timeout_s=5)
        first = policy.run(robot.observe, robot.act, max_actions=8, **robot.callbacks())
        policy.interrupt()  # after the run finished: discarded too
        second = policy.run(robot.observe, robot.act, max_actions=8, **robot.callbacks())
    assert first.reason == second.reason == "completed"
    assert robot.holds == 0


def test_interrupted_predict_raises_a_public_error(gw) -> None:
    with open_policy(gw) as policy:
        policy.predict(make_observation())
        gw.inject("stall", seconds=None)
        thread, results, errors = run_in_thread(lambda: policy.predict(make_observation()))
        assert wait_for(lambda: gw.act_requests() == 2)
        policy.interrupt()
        thread.join(PATIENCE_S)
        gw.clear_faults()
        assert not thread.is_alive()
        assert len(errors) == 1 and type(errors[0]) is SequencesError
        assert "interrupted" in str(errors[0])
        # The next call is unaffected.
        assert len(policy.predict(make_observation()).action_chunk) == 15


def test_interrupted_wait_until_ready_raises_a_public_error(gateway_factory) -> None:
    gateway = gateway_factory(cold_start_s=60.0)
    with open_policy(gateway) as policy:
        thread, results, errors = run_in_thread(
            lambda: policy.wait_until_ready(timeout_s=PATIENCE_S, poll_s=0.05)
        )
        assert wait_for(lambda: gateway.counters()["requests"]["ready"] >= 1)
        policy.interrupt()
        thread.join(PATIENCE_S)
        assert not thread.is_alive()
    assert len(errors) == 1 and type(errors[0]) is SequencesError
    assert policy.closed


def test_second_driver_is_refused_without_disturbing_the_run(gw) -> None:
    robot = Robot()
    playing = threading.Event()

    def act(row) -> None:
        robot.act(row)
        playing.set()

    with open_policy(gw, control_hz=30) as policy:
        thread, results, errors = run_in_thread(
            lambda: policy.run(robot.observe, act, max_actions=1000, **robot.callbacks())
        )
        assert playing.wait(PATIENCE_S)
        intruder = Robot()
        refusals = []
        for call in (
            lambda: policy.run(intruder.observe, intruder.act, max_actions=5,
                               validate=intruder.validate),
            lambda: policy.predict(make_observation()),
            lambda: policy.next_action(make_observation()),
            lambda: policy.act("other", intruder.observe, intruder.act, max_seconds=1),
        ):
            with pytest.raises(SequencesError, match="another thread") as info:
                call()
            refusals.append(info.value)
        policy.interrupt()
        thread.join(PATIENCE_S)
    assert errors == [] and results[0].reason == "interrupted"
    assert intruder.observations == [] and intruder.acts == []
    assert robot.holds == 1 and policy.instruction is None
    assert isinstance(refusals[0], sequence_ai.SequencesError)


# -- per-call handles ---------------------------------------------------------------------------


def test_a_handle_interrupted_before_the_run_ends_it_at_once_through_hold(gw) -> None:
    robot = Robot()
    handle = sequence_ai.CallHandle()
    handle.interrupt()
    with open_policy(gw, control_hz=60) as policy:
        run_outcome = policy.run(robot.observe, robot.act, max_actions=40, call=handle,
                                 **robot.callbacks())
        act_outcome = policy.act("wave", robot.observe, robot.act, max_seconds=PATIENCE_S,
                                 call=handle, **robot.callbacks())
        assert policy.instruction is None
    for outcome in (run_outcome, act_outcome):
        assert outcome.ending is sequence_ai.Ending.INTERRUPTED and outcome.actions == 0
    # observe() precedes every request: none was made.
    assert robot.holds == 2 and robot.acts == [] and robot.observations == []


def test_a_handle_interrupted_before_predict_or_wait_sends_nothing(gateway) -> None:
    # A gateway of its own: its counters cannot include another test's late request.
    handle = sequence_ai.CallHandle()
    handle.interrupt()
    with open_policy(gateway) as policy:
        for call in (
            lambda: policy.predict(make_observation(), call=handle),
            lambda: policy.next_action(make_observation(), call=handle),
            lambda: policy.wait_until_ready(timeout_s=5, call=handle),
        ):
            with pytest.raises(SequencesError, match="interrupted"):
                call()
        assert policy.buffered == 0
        # The Policy itself is untouched: a call without the handle runs.
        assert len(policy.predict(make_observation()).action_chunk) == 15
    counters = gateway.counters()["requests"]
    assert counters["act"] == 1 and counters["ready"] == 0


@pytest.mark.parametrize("stopper", ["handle", "policy"])
def test_a_run_given_a_handle_stops_from_another_thread(gw, stopper: str) -> None:
    """By its own handle, or by Policy.interrupt(), which reaches every open call."""
    robot = Robot()
    handle = sequence_ai.CallHandle()
    playing = threading.Event()

    def act(row) -> None:
        robot.act(row)
        playing.set()

    with open_policy(gw, control_hz=30) as policy:
        thread, results, errors = run_in_thread(
            lambda: policy.run(robot.observe, act, max_actions=1000, call=handle,
                               **robot.callbacks())
        )
        assert playing.wait(PATIENCE_S)
        (handle.interrupt if stopper == "handle" else policy.interrupt)()
        thread.join(PATIENCE_S)
    assert not thread.is_alive() and errors == []
    assert results[0].reason == "interrupted" and robot.holds == 1
    assert handle.interrupted


def test_call_must_be_a_handle(gw) -> None:
    robot = Robot()
    with open_policy(gw) as policy:
        with pytest.raises(TypeError, match="CallHandle"):
            policy.run(robot.observe, robot.act, max_actions=1, call=object(),
                       **robot.callbacks())
    assert robot.holds == 0 and robot.observations == []


def test_a_late_interrupt_of_a_finished_call_never_stops_the_next_one(gw) -> None:
    # A goal's cancel arriving after its run returned and the next goal's run began.
    first, second = Robot(), Robot()
    handle_a, handle_b = sequence_ai.CallHandle(), sequence_ai.CallHandle()

    on_chunk = second.after_first_chunk(handle_a.interrupt)

    with open_policy(gw, control_hz=60) as policy:
        done = policy.run(first.observe, first.act, max_actions=8, call=handle_a,
                          **first.callbacks())
        outcome = policy.act(
            "stack the blocks", second.observe, second.act, max_seconds=PATIENCE_S,
            call=handle_b, until=lambda: len(second.chunks) >= 3,
            **{**second.callbacks(), "on_chunk": on_chunk},
        )
    assert done.reason == "completed" and handle_a.interrupted
    assert outcome.reason == "until" and outcome.chunks == 3 and not handle_b.interrupted


@pytest.mark.slow  # over half a second of wall time
def test_interrupting_call_a_never_stops_call_b_running_beside_it(gateway_factory) -> None:
    # Both calls open at once on one Policy: a readiness wait (A) and a run (B), on a model
    # that is still loading so that both are waiting when A is interrupted.
    gateway = gateway_factory(cold_start_s=1.5)
    robot = Robot()
    handle_a, handle_b = sequence_ai.CallHandle(), sequence_ai.CallHandle()
    with open_policy(gateway, control_hz=60) as policy, warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the "model is loading" notice
        waiter, _, wait_errors = run_in_thread(
            lambda: policy.wait_until_ready(timeout_s=PATIENCE_S, poll_s=0.05, call=handle_a)
        )
        runner, results, run_errors = run_in_thread(
            lambda: policy.run(robot.observe, robot.act, max_actions=1000, call=handle_b,
                               until=lambda: len(robot.chunks) >= 3, **robot.callbacks())
        )
        assert wait_for(lambda: gateway.counters()["requests"]["ready"] >= 1 and robot.observations)
        handle_a.interrupt()
        waiter.join(PATIENCE_S)
        runner.join(PATIENCE_S)
    assert len(wait_errors) == 1 and "interrupted" in str(wait_errors[0])
    assert run_errors == [] and results[0].reason == "until" and results[0].chunks == 3
    assert robot.holds == 1 and not handle_b.interrupted
