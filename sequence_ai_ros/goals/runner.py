"""`act` goals as a state machine: one runs at a time; a new goal preempts (or, with
`handover`, takes the running motion over: takeover.py), cancel interrupts, every end
holds, and each way a goal can end is one row of `GoalEnding` (stop_policy.py).

`GoalRunner` holds the action server's callbacks and the goal state machine; the driving
thread's work for one goal is a `Driver` (driver.py; the node's is `GoalDriver`, driving.py),
endings that no run reached are its `Results` (results.py). It imports without ROS: the fakes of
test/goals drive it.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Protocol

from sequence_ai_ros.core.node_config import NodeConfig
from sequence_ai_ros.goals.driver import Driver, Results
from sequence_ai_ros.goals.goal_state import GoalPhase, GoalRun
from sequence_ai_ros.goals.instruction import shown
from sequence_ai_ros.goals.stop_policy import (
    PREEMPT_WAIT_S,
    StopCause,
)
from sequence_ai_ros.goals.takeover import handover_problem, take_over

if TYPE_CHECKING:
    from rclpy.action.server import ServerGoalHandle
    from rclpy.task import Future

    from sequence_ai_interfaces.action import Act
    from sequence_ai_ros.goals.results import GoalOutcome
    from sequence_ai_ros.inputs.sent_images import SentImages

__all__ = ["DRIVING_THREAD", "GoalRunner"]

DRIVING_THREAD = "sequence_ai-drive"


class Log(Protocol):
    """Where the runner reports a goal that failed (the node's logger)."""

    def error(self, message: str) -> object: ...


class GoalRunner:
    """Runs goals through `Policy.act` on one long-lived driving thread; every step and hold
    goes through the arm gate, and every end holds.

    The action server's callbacks (`accept`, `cancel`, `result_of`) never block: they record
    the goal and wake the driving thread, which runs one goal at a time, ends the goals stopped
    before they started, and completes each goal's `result` future, then calls `wake` so the
    executor hands the result to rclpy. Every field is set here and never reassigned, except
    `_goals`, `_current` and `_closed`, which `_cond` guards together with the mutable fields of
    each `GoalRun`.
    """

    def __init__(
        self,
        *,
        cond: threading.Condition,
        driver: Driver,
        results: Results,
        live_config: Callable[[], NodeConfig],
        log: Log,
        wake: Callable[[], None],
    ) -> None:
        self._live_config = live_config
        self._log = log
        self._wake = wake
        # Lock order 6: shared with the driver and the results (driving.py's `goal_runner`
        # makes all three); never held while the gate, the observation cache or a call handle
        # is used.
        self._cond = cond
        self._results = results
        self._driver = driver
        # Every goal not yet ended, by goal id, in the order they were accepted.
        self._goals: dict[bytes, GoalRun] = {}
        self._current: GoalRun | None = None  # the goal whose run drives the arm
        self._closed = False
        self._thread = threading.Thread(target=self._drive, name=DRIVING_THREAD, daemon=True)
        self._thread.start()

    # ----- callbacks from the action server and the lifecycle (never block, but stop_all) -----

    def accept(self, handle: ServerGoalHandle) -> None:
        """A new goal preempts every earlier one (or takes the running one's motion over, with
        `handover`), then starts executing."""
        config = self._live_config()
        with self._cond:
            previous = self._takeable(handle.request, config)
            if previous is not None:
                run = take_over(previous, handle)
                self._current = run
                stopped = []
            else:
                run = GoalRun(handle)
                stopped = [r for r in self._goals.values() if r.request_stop(StopCause.PREEMPTED)]
            self._goals[bytes(handle.goal_id.uuid)] = run
            self._cond.notify_all()
        if previous is not None:
            try:
                result = self._driver.hand_over(previous, run, config)
            except Exception as exc:  # noqa: BLE001 - the old goal must still be answered
                self._log.error(f"hand-over to {shown(handle.request.instruction)}: {exc!r}")
                result = self._results.crashed(previous, exc)
            finally:
                with self._cond:
                    run.handing = False
                    self._cond.notify_all()
            self._finish(previous, result)
        for stopped_run in stopped:
            stopped_run.call.interrupt()
        handle.execute()

    @property
    def images(self) -> SentImages:
        """The images of the last observation sent (~/current_frames)."""
        return self._driver.images

    def handover_problem(self, goal: Act.Goal) -> str | None:
        """Why a goal asking for a hand-over is rejected (takeover.py), or None."""
        with self._cond:
            current = self._current
            running = current.handle.request if current is not None else None
            baton = self._driver.baton
        return handover_problem(goal, running, baton, self._live_config())

    def _takeable(self, goal: Act.Goal, config: NodeConfig) -> GoalRun | None:
        """Under `_cond`: the running goal whose run `goal` takes over, or None (preemption)."""
        current, baton = self._current, self._driver.baton
        if (
            not goal.handover or current is None or current.phase is not GoalPhase.RUNNING
            or baton is None or not baton.running
        ):
            return None
        problem = handover_problem(goal, current.handle.request, baton, config)
        return current if problem is None else None

    def result_of(self, handle: ServerGoalHandle) -> Future:
        """The future the driving thread completes with the goal's `GoalOutcome` (`execute` awaits
        it and concludes the goal on the executor's thread)."""
        with self._cond:
            run = self._goals.get(bytes(handle.goal_id.uuid))
            if run is None:
                # Executed without `accept` (e.g. accepted while the node was being configured).
                run = GoalRun(handle)
                if self._closed:
                    run.request_stop(StopCause.SHUT_DOWN)
                self._goals[bytes(handle.goal_id.uuid)] = run
                self._cond.notify_all()
            return run.result

    def cancel(self, handle: ServerGoalHandle) -> None:
        self.stop(bytes(handle.goal_id.uuid), StopCause.CANCELED)

    def stop(self, goal_id: bytes, cause: StopCause) -> None:
        """End one goal (never waits): its run stops within a period, held."""
        with self._cond:
            run = self._goals.get(goal_id)
            interrupt = run is not None and run.request_stop(cause)
            self._cond.notify_all()
        if run is not None and interrupt:
            run.call.interrupt()

    def goal_ids(self) -> list[bytes]:
        """The ids of the goals not ended yet."""
        with self._cond:
            return list(self._goals)

    def stop_all(self, cause: StopCause, timeout_s: float) -> bool:
        """End every goal (deactivate / shutdown); True when none is left.

        Waits for the driving thread (at most `timeout_s`), which needs no executor to end a
        goal: the caller may be the executor's only thread."""
        with self._cond:
            stopped = [r for r in self._goals.values() if r.request_stop(cause)]
            self._cond.notify_all()
        for run in stopped:
            run.call.interrupt()
        with self._cond:
            return self._cond.wait_for(lambda: not self._goals, timeout_s)

    def close(self, timeout_s: float) -> None:
        """Stop the driving thread (after `stop_all`). A goal it could not end is ended here, so
        that every `execute` returns."""
        with self._cond:
            self._closed = True
            for run in self._goals.values():
                run.request_stop(StopCause.SHUT_DOWN)
            self._cond.notify_all()
        if self._thread is not threading.current_thread():
            self._thread.join(timeout_s)
        with self._cond:
            left = list(self._goals.values())
        for run in left:
            self._end_unstarted(run)

    def end_overdue(self) -> None:
        """End, `BUSY`, the goals that waited PREEMPT_WAIT_S for a run that does not stop: the
        driving thread is still inside that run. Called by a timer on the executor."""
        now = time.monotonic()
        with self._cond:
            current = self._current
            if current is None or current.phase is not GoalPhase.STOPPING:
                return
            overdue = [
                r for r in self._goals.values()
                if r is not current and r.phase is not GoalPhase.ENDED
                and now - r.started_s > PREEMPT_WAIT_S
            ]
            for run in overdue:
                run.request_stop(StopCause.BUSY)
        for run in overdue:
            self._end_unstarted(run)

    def set_warming(self, eta_s: float) -> None:
        """From the client's on_warming: the running goal's feedback shows the ETA."""
        with self._cond:
            run = self._current
            if run is None:
                return
            feedback = run.feedback
        if feedback is not None:
            feedback.waiting(eta_s)

    # ----- the driving thread -----

    def _drive(self) -> None:
        """One goal at a time, oldest first; a goal stopped before it started ends at once."""
        while True:
            with self._cond:
                self._cond.wait_for(lambda: self._closed or self._next() is not None)
                run = self._next()
                if run is None:
                    return
                run.ending = True
                ran = run.phase is GoalPhase.PENDING and not self._closed
                if ran:
                    run.phase = GoalPhase.RUNNING
                    self._current = run
            try:
                result = (
                    self._driver.run(run, self._live_config()) if ran
                    else self._results.end(run, None, None, ran=False)
                )
            except Exception as exc:  # noqa: BLE001 - the goal must still end and be answered
                with self._cond:
                    run = run.holder()
                self._log.error(f"goal {shown(run.handle.request.instruction)} failed: {exc!r}")
                result = self._results.crashed(run, exc)
            with self._cond:
                # A hand-over passed the run on: its result is the last goal's.
                run = run.holder()
            self._finish(run, result)

    def _next(self) -> GoalRun | None:
        """The oldest goal nobody is ending yet (under `_cond`)."""
        return next((r for r in self._goals.values() if not r.ending), None)

    def _end_unstarted(self, run: GoalRun) -> None:
        """End a goal that never ran, from a thread other than the driving thread."""
        with self._cond:
            if run.ending:
                return
            run.ending = True
        try:
            result = self._results.end(run, None, None, ran=False)
        except Exception as exc:  # noqa: BLE001 - the goal must still be answered
            result = self._results.crashed(run, exc)
        self._finish(run, result)

    def _finish(self, run: GoalRun, result: GoalOutcome) -> None:
        """The goal is over: forget it, answer its `execute`, wake the executor."""
        with self._cond:
            run.phase = GoalPhase.ENDED
            if self._current is run:
                self._current = None
            self._goals.pop(bytes(run.handle.goal_id.uuid), None)
            self._cond.notify_all()
        run.result.set_result(result)
        self._wake()
