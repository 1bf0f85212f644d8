"""The run as a typed event stream: what observers receive, on which thread, and that the
outcome, the progress and on_status are computed from the same events."""

from __future__ import annotations

import dataclasses
import threading
import warnings
from collections import Counter

import pytest
from support.policy_support import REACH, Robot, open_policy

import sequence_ai
from sequence_ai import events
from sequence_ai.events import EventStream, RunEvent


class Recorder:
    """An observer object: every event, and the threads it was called on."""

    def __init__(self) -> None:
        self.events: list[RunEvent] = []
        self.threads: set[str] = set()

    def on_event(self, event: RunEvent) -> None:
        self.threads.add(threading.current_thread().name)
        self.events.append(event)

    def count(self, kind: type) -> int:
        return sum(isinstance(event, kind) for event in self.events)


def run(policy: sequence_ai.Policy, robot: Robot, **kwargs):
    options = robot.callbacks()
    options.update(kwargs)
    return policy.run(robot.observe, robot.act, **options)


@pytest.mark.slow  # over half a second of wall time
def test_observers_see_the_whole_run_on_their_own_thread_and_agree_with_the_outcome(gw) -> None:
    recorder, seen = Recorder(), []
    robot = Robot()
    with open_policy(gw, control_hz=60) as policy:
        outcome = run(policy, robot, max_actions=30, max_in_flight=2,
                      observers=[recorder, seen.append])
    got = recorder.events
    assert seen == got
    assert isinstance(got[0], events.RunStarted) and isinstance(got[-1], events.RunEnded)
    assert recorder.count(events.RunStarted) == recorder.count(events.RunEnded) == 1
    assert got[-1].ending is sequence_ai.Ending.COMPLETED and got[-1].error is None
    # Never the driving thread: a slow observer cannot delay a command.
    assert recorder.threads == {"sequence_ai-events"}
    played = [event for event in got if isinstance(event, events.RowPlayed)]
    assert [list(event.row) for event in played] == robot.acts
    assert [event.action for event in played] == list(range(1, outcome.actions + 1))
    assert recorder.count(events.ChunkInstalled) == outcome.chunks == len(robot.chunks)
    assert recorder.count(events.ObservationSent) == outcome.requests
    assert recorder.count(events.AnswerArrived) == outcome.chunks + outcome.discarded
    assert recorder.count(events.HoldCommanded) == 0
    # Each event stamps the monotonic clock of its own thread's moment; the driving thread's
    # events are in time order.
    assert all(isinstance(event.time, float) for event in got)
    assert all(a.time <= b.time for a, b in zip(played, played[1:]))
    with pytest.raises(dataclasses.FrozenInstanceError):
        got[0].time = 0.0  # type: ignore[misc]


def test_an_early_end_publishes_the_hold_then_the_ending(gw) -> None:
    recorder = Recorder()
    robot = Robot()
    with open_policy(gw, control_hz=60) as policy:
        outcome = run(policy, robot, max_actions=50, until=lambda: len(robot.acts) >= 5,
                      observers=[recorder])
    assert outcome.reason == "until" and robot.holds == 1
    hold, ended = recorder.events[-2:]
    assert isinstance(hold, events.HoldCommanded) and hold.error is None
    assert isinstance(ended, events.RunEnded) and ended.ending is sequence_ai.Ending.UNTIL


@pytest.mark.slow  # over half a second of wall time
def test_an_underrun_is_a_begin_and_an_end_event_counted_once(gw) -> None:
    recorder = Recorder()
    robot = Robot(REACH)

    def on_status(state) -> None:
        robot.on_status(state)
        if state == "waiting":
            gw.clear_faults()

    stall_next = robot.after_first_chunk(lambda: gw.inject("stall", seconds=None))
    with open_policy(gw, model=REACH, control_hz=60) as policy:
        outcome = run(policy, robot, max_actions=40, on_chunk=stall_next, on_status=on_status,
                      observers=[recorder])
    ended = [event for event in recorder.events if isinstance(event, events.UnderrunEnded)]
    assert outcome.underruns == recorder.count(events.UnderrunBegan) == len(ended) == 1
    assert outcome.underrun_s == pytest.approx(sum(event.waited_s for event in ended))
    assert [event.waited_s for event in ended] == pytest.approx(robot.underruns)


def test_a_slow_observer_never_holds_up_the_driving_thread(gw) -> None:
    """The observer blocks until the run has reported done: every command was played while
    it was stuck, and it still receives every event before run() returns."""
    release = threading.Event()
    recorder = Recorder()

    def stuck(event: RunEvent) -> None:
        release.wait()
        recorder.on_event(event)

    def on_status(state) -> None:
        if state == "done":
            release.set()

    robot = Robot()
    with open_policy(gw, control_hz=60) as policy:
        outcome = run(policy, robot, max_actions=20, on_status=on_status, observers=[stuck])
    assert outcome.actions == 20 and len(robot.acts) == 20
    assert recorder.count(events.RowPlayed) == 20
    assert isinstance(recorder.events[-1], events.RunEnded)


def test_an_observer_that_raises_is_dropped_with_a_warning_and_the_run_goes_on(gw) -> None:
    calls = []

    def broken(event: RunEvent) -> None:
        calls.append(event)
        raise RuntimeError("recorder disk full")

    robot = Robot()
    with open_policy(gw, control_hz=60) as policy, warnings.catch_warnings(record=True) as got:
        warnings.simplefilter("always")
        outcome = run(policy, robot, max_actions=10, observers=[broken])
    assert outcome.reason == "completed" and len(calls) == 1
    messages = [str(w.message) for w in got if issubclass(w.category, RuntimeWarning)]
    assert any("recorder disk full" in m and "no further events" in m for m in messages)


@pytest.mark.parametrize("observers", [[42], "recorder", 7])
def test_observers_are_checked(gw, observers) -> None:
    robot = Robot()
    with open_policy(gw, control_hz=60) as policy, pytest.raises(TypeError, match="observer"):
        run(policy, robot, max_actions=5, observers=observers)


def test_the_stream_calls_the_runs_own_sinks_inline_and_observers_in_order() -> None:
    inline: list[tuple[str, RunEvent]] = []
    later: list[RunEvent] = []
    stream = EventStream(
        [lambda event: inline.append((threading.current_thread().name, event))], [later.append]
    )
    sent = [events.UnderrunBegan(time=float(k)) for k in range(50)]
    stream.publish(sent[0])  # before start: waits in the queue
    stream.start()
    for event in sent[1:]:
        stream.publish(event)
    stream.close()
    assert [event for _, event in inline] == sent == later
    assert {name for name, _ in inline} == {threading.current_thread().name}


def test_a_stream_without_observers_starts_no_thread() -> None:
    before = {t.name for t in threading.enumerate()}
    stream = EventStream([lambda event: None])
    stream.start()
    stream.publish(events.UnderrunBegan(time=0.0))
    assert "sequence_ai-events" not in {t.name for t in threading.enumerate()} - before
    stream.close()


def test_every_event_kind_is_exported_and_frozen() -> None:
    kinds = [
        getattr(events, name) for name in events.__all__
        if isinstance(getattr(events, name), type) and issubclass(getattr(events, name), RunEvent)
    ]
    assert len(kinds) == len(Counter(kinds)) >= 15
    for kind in kinds:
        assert dataclasses.is_dataclass(kind) and kind.__dataclass_params__.frozen  # type: ignore[attr-defined]
        assert [f.name for f in dataclasses.fields(kind)][0] == "time"
