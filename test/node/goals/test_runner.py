"""The goal state machine on its own: `GoalRunner` with a fake driver and fake results, no ROS
node, no DDS, no gateway. One goal at a time, a new goal preempts, cancel interrupts, every goal
is answered — even one whose run raised or that never started."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any, cast

import pytest
from support.waiting import wait_for

from sequence_ai_ros.core.node_config import NodeConfig
from sequence_ai_ros.goals.goal_state import GoalRun
from sequence_ai_ros.goals.runner import DRIVING_THREAD, GoalRunner
from sequence_ai_ros.goals.stop_policy import StopCause

# What the fake runs are given as the live configuration (the runner only passes it on).
CONFIG = cast(NodeConfig, object())
WAIT_S = 10.0


@dataclass
class Goal:
    """The fields of `Act.Goal` the runner reads."""

    instruction: str
    max_seconds: float = 5.0
    max_actions: int = 0
    handover: bool = False


@dataclass
class GoalId:
    uuid: bytes


@dataclass
class Handle:
    """A stand-in for rclpy's `ServerGoalHandle`: its request, its id, and `execute`, which
    asks the runner for the goal's answer at once, as the node's `execute` does."""

    request: Goal
    goal_id: GoalId
    runner: GoalRunner | None = None
    answer: Any = None

    def execute(self) -> None:
        assert self.runner is not None
        self.answer = self.runner.result_of(cast(Any, self))


@dataclass(frozen=True)
class Outcome:
    """What the fakes answer a goal with (the node's is a terminal status and an Act.Result)."""

    instruction: str
    how: str
    stop: StopCause | None = None


class FakeDriver:
    """Runs a goal until its call is interrupted (`blocking`) or returns at once; raises for an
    instruction in `raises`. An interrupted run returns only once `release` is set, as a real
    run takes a period or two to stop."""

    def __init__(self, cond: threading.Condition, *, blocking: bool) -> None:
        self._cond = cond
        self.blocking = blocking
        self.release = threading.Event()
        self.release.set()
        self.raises: set[str] = set()
        self.started: list[str] = []
        self.threads: set[str] = set()
        self.running = threading.Event()

    @property
    def images(self) -> Any:
        return None

    @property
    def baton(self) -> None:
        return None

    def run(self, run: GoalRun, config: NodeConfig) -> Outcome:
        instruction = run.handle.request.instruction
        self.started.append(instruction)
        self.threads.add(threading.current_thread().name)
        self.running.set()
        if instruction in self.raises:
            raise RuntimeError(f"driver failed on {instruction}")
        if self.blocking:
            run.call.wait_for(lambda: False, None)
            self.release.wait()
        with self._cond:
            stop = run.stop
        self.running.clear()
        return Outcome(instruction, "ran", stop)

    def hand_over(self, previous: GoalRun, run: GoalRun, config: NodeConfig) -> Outcome:
        raise AssertionError("no hand-over is asked for here")


class FakeResults:
    """Ends the goals no run ended: never started (`end`, ran False) or failed (`crashed`)."""

    def __init__(self, cond: threading.Condition) -> None:
        self._cond = cond

    def end(self, run: GoalRun, outcome: object, error: Exception | None, *, ran: bool) -> Outcome:
        with self._cond:
            stop = run.stop
        return Outcome(run.handle.request.instruction, "ran" if ran else "never started", stop)

    def crashed(self, run: GoalRun, exc: Exception) -> Outcome:
        return Outcome(run.handle.request.instruction, f"crashed: {exc}")


class Log:
    def __init__(self) -> None:
        self.errors: list[str] = []

    def error(self, message: str) -> None:
        self.errors.append(message)


@dataclass
class Machine:
    runner: GoalRunner
    driver: FakeDriver
    log: Log
    wakes: threading.Semaphore
    _ids: Iterator[int] = field(default_factory=lambda: iter(range(1, 1000)))

    def send(self, instruction: str) -> Handle:
        handle = Handle(Goal(instruction), GoalId(next(self._ids).to_bytes(16, "big")))
        handle.runner = self.runner
        self.runner.accept(cast(Any, handle))
        return handle

    def answer(self, handle: Handle) -> Outcome:
        """The outcome the goal's `execute` concludes, once the runner gives it."""
        future = handle.answer
        assert future is not None, "the goal was never executed"
        wait_for(future.done, f"the answer to {handle.request.instruction}", timeout_s=WAIT_S)
        return cast(Outcome, future.result())


def _machine(*, blocking: bool) -> tuple[Machine, Callable[[], None]]:
    cond = threading.Condition()
    driver = FakeDriver(cond, blocking=blocking)
    log = Log()
    wakes = threading.Semaphore(0)
    runner = GoalRunner(
        cond=cond,
        driver=driver,
        results=FakeResults(cond),
        live_config=lambda: CONFIG,
        log=log,
        wake=wakes.release,
    )

    def close() -> None:
        runner.stop_all(StopCause.SHUT_DOWN, WAIT_S)
        runner.close(WAIT_S)

    return Machine(runner, driver, log, wakes), close


@pytest.fixture
def blocking() -> Iterator[Machine]:
    machine, close = _machine(blocking=True)
    yield machine
    close()


@pytest.fixture
def returning() -> Iterator[Machine]:
    machine, close = _machine(blocking=False)
    yield machine
    close()


def test_a_goal_runs_on_the_driving_thread_and_is_answered_with_its_outcome(
    returning: Machine,
) -> None:
    handle = returning.send("pick up the cup")
    assert returning.answer(handle) == Outcome("pick up the cup", "ran")
    assert returning.driver.threads == {DRIVING_THREAD}
    # The executor is woken to hand the answer to rclpy.
    assert returning.wakes.acquire(timeout=WAIT_S)


def test_goals_sent_after_the_last_one_ended_each_run_in_turn(returning: Machine) -> None:
    for n in range(3):
        assert returning.answer(returning.send(f"goal {n}")) == Outcome(f"goal {n}", "ran")
    assert returning.driver.started == ["goal 0", "goal 1", "goal 2"]


def test_a_new_goal_preempts_the_running_one_which_stops_and_is_answered(
    blocking: Machine,
) -> None:
    first = blocking.send("pick up the cup")
    wait_for(blocking.driver.running.is_set, "the first goal's run", timeout_s=WAIT_S)
    second = blocking.send("put it down")
    assert blocking.answer(first) == Outcome("pick up the cup", "ran", StopCause.PREEMPTED)
    # The newer goal runs next, until something stops it.
    wait_for(
        lambda: blocking.driver.started == ["pick up the cup", "put it down"],
        "the second goal's run",
        timeout_s=WAIT_S,
    )
    blocking.runner.cancel(cast(Any, second))
    assert blocking.answer(second) == Outcome("put it down", "ran", StopCause.CANCELED)


def test_cancel_interrupts_the_running_goal(blocking: Machine) -> None:
    handle = blocking.send("wave")
    wait_for(blocking.driver.running.is_set, "the goal's run", timeout_s=WAIT_S)
    blocking.runner.cancel(cast(Any, handle))
    assert blocking.answer(handle) == Outcome("wave", "ran", StopCause.CANCELED)


def test_a_goal_stopped_before_it_started_is_answered_without_running(blocking: Machine) -> None:
    # The first run is slow to stop: the second goal is still waiting when a third preempts it.
    blocking.driver.release.clear()
    running = blocking.send("first")
    wait_for(blocking.driver.running.is_set, "the first goal's run", timeout_s=WAIT_S)
    waiting = blocking.send("second")
    last = blocking.send("third")
    blocking.driver.release.set()
    assert blocking.answer(running).stop is StopCause.PREEMPTED
    assert blocking.answer(waiting) == Outcome("second", "never started", StopCause.PREEMPTED)
    wait_for(lambda: "third" in blocking.driver.started, "the third goal's run", timeout_s=WAIT_S)
    blocking.runner.cancel(cast(Any, last))
    assert blocking.answer(last).stop is StopCause.CANCELED
    assert blocking.driver.started == ["first", "third"]


def test_a_run_that_raises_still_answers_its_goal_and_the_next_one_runs(
    returning: Machine,
) -> None:
    returning.driver.raises.add("explode")
    failed = returning.send("explode")
    assert returning.answer(failed) == Outcome("explode", "crashed: driver failed on explode")
    assert any("explode" in line for line in returning.log.errors)
    assert returning.answer(returning.send("carry on")).how == "ran"


def test_stop_all_ends_the_running_goal_and_reports_none_left(blocking: Machine) -> None:
    running = blocking.send("first")
    wait_for(blocking.driver.running.is_set, "the first goal's run", timeout_s=WAIT_S)
    assert blocking.runner.stop_all(StopCause.DEACTIVATED, WAIT_S)
    assert blocking.answer(running) == Outcome("first", "ran", StopCause.DEACTIVATED)


def test_a_goal_executed_after_close_is_answered_as_shut_down_by_the_next_close(
    returning: Machine,
) -> None:
    returning.runner.close(WAIT_S)
    handle = Handle(Goal("too late"), GoalId(b"\xff" * 16), returning.runner)
    # Executed without accept (as while configuring): recorded stopped, no thread runs it.
    handle.execute()
    assert not handle.answer.done()
    returning.runner.close(WAIT_S)
    assert returning.answer(handle) == Outcome("too late", "never started", StopCause.SHUT_DOWN)
    assert returning.driver.started == []
