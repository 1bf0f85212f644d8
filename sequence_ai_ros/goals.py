"""`act` goals as a state machine: one runs at a time; a new goal preempts, cancel interrupts,
every end holds, and each way a goal can end is one row of `GoalEnding`."""

from __future__ import annotations

import enum
import math
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from rclpy.action.server import ServerGoalHandle
from rclpy.impl.rcutils_logger import RcutilsLogger
from rclpy.task import Future

import sequence_ai
from sequence_ai import CallHandle, Ending, RunStatus
from sequence_ai_interfaces.action import Act
from sequence_ai_ros.arm import ArmGate, MotionRules
from sequence_ai_ros.commands import CommandMode, Interface
from sequence_ai_ros.diagnostics import HealthRecord
from sequence_ai_ros.goal_text import instruction_problem, shown
from sequence_ai_ros.observations import ObservationCache, StaleObservation
from sequence_ai_ros.parameters import NodeConfig

# A preempted run stops within one control period plus one interruptible wait; this bounds
# how long the next goal waits for it before giving up.
PREEMPT_WAIT_S = 10.0
DRIVING_THREAD = "sequence_ai-drive"
# A goal waiting for its first camera frames looks again this often: frames are taken, not
# pushed, so no callback announces them.
_INPUT_RECHECK_S = 0.1
_FEEDBACK_PERIOD_S = 0.2
# rclpy records a cancel (CANCELING) right after the cancel callback returns; a run stopped by
# that callback waits at most this long for the record before it can end canceled.
_CANCEL_STATE_WAIT_S = 2.0


class GoalPhase(enum.Enum):
    """Where a goal is in its life: pending → running → stopping → ended (pending may skip)."""

    PENDING = "pending"  # accepted; waits for the previous goal to end
    RUNNING = "running"  # its run drives the arm
    STOPPING = "stopping"  # a stop cause is set; the run (if any) is being interrupted
    ENDED = "ended"  # terminal state set, result returned


class StopCause(str, enum.Enum):
    """Why a goal was stopped from outside its run; the value is the message's wording."""

    PREEMPTED = "preempted"
    CANCELED = "canceled"
    DEACTIVATED = "deactivated"
    SHUT_DOWN = "shut down"
    IN_ERROR = "in error"
    BUSY = "busy"


class ResultReason(str, enum.Enum):
    """`Act.Result.reason`; `RAISED` goes on the wire as `raised:<exception class>`."""

    COMPLETED = "completed"
    UNTIL = "until"
    TIMEOUT = "timeout"
    INTERRUPTED = "interrupted"
    VALIDATE = "validate"
    PREEMPTED = "preempted"
    RAISED = "raised"


class Terminal(enum.Enum):
    """The terminal goal status a goal ends in."""

    SUCCEEDED = "succeeded"
    ABORTED = "aborted"
    CANCELED = "canceled"


@dataclass(frozen=True)
class EndingRow:
    """How one kind of ending reaches the planner: goal status, result reason, message.

    `message` is a template: `{detail}` is what the run reports (its outcome, the error, the
    refused step, or that it never started), `{cause}` the stop cause's wording.
    """

    terminal: Terminal
    reason: ResultReason
    message: str


@enum.unique
class GoalEnding(enum.Enum):
    """Every way a goal ends. Adding one is adding a member with its row."""

    COMPLETED = EndingRow(Terminal.SUCCEEDED, ResultReason.COMPLETED, "{detail}")
    UNTIL = EndingRow(Terminal.SUCCEEDED, ResultReason.UNTIL, "{detail}")
    TIMEOUT = EndingRow(Terminal.SUCCEEDED, ResultReason.TIMEOUT, "{detail}")
    VALIDATE = EndingRow(
        Terminal.ABORTED, ResultReason.VALIDATE, "safety check refused a step: {detail}"
    )
    RAISED = EndingRow(Terminal.ABORTED, ResultReason.RAISED, "{detail}")
    # The run reports an interrupt that no stop cause of this goal asked for.
    INTERRUPTED = EndingRow(Terminal.ABORTED, ResultReason.INTERRUPTED, "{detail}")
    CANCELED = EndingRow(Terminal.CANCELED, ResultReason.INTERRUPTED, "canceled; {detail}")
    PREEMPTED = EndingRow(
        Terminal.ABORTED, ResultReason.PREEMPTED, "preempted by a newer goal; {detail}"
    )
    NODE_STOPPED = EndingRow(Terminal.ABORTED, ResultReason.INTERRUPTED, "node {cause}; {detail}")
    BUSY = EndingRow(
        Terminal.ABORTED,
        ResultReason.INTERRUPTED,
        f"the previous goal did not stop within {PREEMPT_WAIT_S:g} s; {{detail}}",
    )


# A stop cause decides the ending whatever the run reported; without one, the run's ending does.
ENDING_BY_CAUSE: dict[StopCause, GoalEnding] = {
    StopCause.PREEMPTED: GoalEnding.PREEMPTED,
    StopCause.CANCELED: GoalEnding.CANCELED,
    StopCause.DEACTIVATED: GoalEnding.NODE_STOPPED,
    StopCause.SHUT_DOWN: GoalEnding.NODE_STOPPED,
    StopCause.IN_ERROR: GoalEnding.NODE_STOPPED,
    StopCause.BUSY: GoalEnding.BUSY,
}
ENDING_BY_RUN: dict[Ending, GoalEnding] = {
    Ending.COMPLETED: GoalEnding.COMPLETED,
    Ending.UNTIL: GoalEnding.UNTIL,
    Ending.TIMEOUT: GoalEnding.TIMEOUT,
    Ending.VALIDATE: GoalEnding.VALIDATE,
    Ending.RAISED: GoalEnding.RAISED,
    Ending.INTERRUPTED: GoalEnding.INTERRUPTED,
}
NEVER_STARTED = "it never started"


def goal_ending(cause: StopCause | None, run_ending: Ending) -> GoalEnding:
    """The ending of a goal from its stop cause (if any) and its run's ending."""
    if cause is not None:
        return ENDING_BY_CAUSE[cause]
    return ENDING_BY_RUN[run_ending]


@dataclass(eq=False)
class GoalRun:
    """One accepted goal. `handle`, `call`, `started_s` and `result` never change (`call` is
    the client's interrupt of exactly this goal's run, safe from any thread; `result` is
    completed once, by whoever ends the goal, and awaited by the action server's `execute`);
    every other field is read and written only under `GoalRunner._cond` (by the action server's
    callbacks, the driving thread and the client's callbacks)."""

    handle: ServerGoalHandle
    call: CallHandle = field(default_factory=CallHandle)
    started_s: float = field(default_factory=time.monotonic)
    result: Future = field(default_factory=Future)
    phase: GoalPhase = GoalPhase.PENDING
    # Someone (the driving thread, or the watchdog for a stuck one) is ending it.
    ending: bool = False
    stop: StopCause | None = None
    held: bool = False
    # Why the end's hold could not be published ("" when it was, or was not asked for).
    unheld: str = ""
    validate_reason: str = ""
    # Chunk mode: the number of the last chunk sent as a trajectory, and why one was refused
    # ("" if none was): the loop's next validate then ends the goal.
    sent_chunk: int = 0
    refused: str = ""
    actions: int = 0
    chunks: int = 0
    underruns: int = 0
    status: RunStatus = RunStatus.STARTING
    warming_eta_s: float = math.nan
    last_feedback_s: float = 0.0
    # Body bytes of the last request that brought a chunk (its observation, mostly frames).
    request_bytes: int = 0

    def request_stop(self, cause: StopCause) -> bool:
        """Record the first stop cause; True when the goal's run must now be interrupted (its
        handle stops the run, or stops it at once if it has not started yet)."""
        if self.phase is GoalPhase.ENDED:
            return False
        if self.stop is None:
            self.stop = cause
        self.phase = GoalPhase.STOPPING
        return True


def goal_problem(goal: Act.Goal, max_instruction_chars: int) -> str | None:
    """Why a goal request must be rejected, or None."""
    if problem := instruction_problem(goal.instruction, max_instruction_chars):
        return problem
    if not math.isfinite(goal.max_seconds) or goal.max_seconds <= 0:
        return f"max_seconds is {goal.max_seconds}; expected a finite number > 0"
    if goal.max_actions < 0:
        return f"max_actions is {goal.max_actions}; expected >= 0 (0 = bounded by max_seconds)"
    return None


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
        policy: sequence_ai.Policy,
        model: sequence_ai.Model,
        controller: str,
        cache: ObservationCache,
        gate: ArmGate,
        health: HealthRecord,
        live_config: Callable[[], NodeConfig],
        log: RcutilsLogger,
        wake: Callable[[], None],
    ) -> None:
        self._policy = policy
        self._model = model
        self._controller = controller
        self._cache = cache
        self._gate = gate
        self._health = health
        self._live_config = live_config
        self._log = log
        self._wake = wake
        self._cond = threading.Condition()
        # Every goal not yet ended, by goal id, in the order they were accepted.
        self._goals: dict[bytes, GoalRun] = {}
        self._current: GoalRun | None = None  # the goal whose run drives the arm
        self._closed = False
        self._thread = threading.Thread(target=self._drive, name=DRIVING_THREAD, daemon=True)
        self._thread.start()

    # ----- callbacks from the action server and the lifecycle (never block, but stop_all) -----

    def accept(self, handle: ServerGoalHandle) -> None:
        """A new goal preempts every earlier one, then starts executing."""
        with self._cond:
            stopped = [r for r in self._goals.values() if r.request_stop(StopCause.PREEMPTED)]
            self._goals[bytes(handle.goal_id.uuid)] = GoalRun(handle)
            self._cond.notify_all()
        for run in stopped:
            run.call.interrupt()
        handle.execute()

    def result_of(self, handle: ServerGoalHandle) -> Future:
        """The future the driving thread completes with the goal's result (`execute` awaits it)."""
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
        with self._cond:
            run = self._goals.get(bytes(handle.goal_id.uuid))
            interrupt = run is not None and run.request_stop(StopCause.CANCELED)
            self._cond.notify_all()
        if run is not None and interrupt:
            run.call.interrupt()

    def goal_states_changed(self) -> None:
        """The action server published goal statuses: a goal may have been marked CANCELING."""
        with self._cond:
            self._cond.notify_all()

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
            run.status = RunStatus.WAITING
            run.warming_eta_s = eta_s
        self._feedback(run, force=True)

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
                result = self._run(run) if ran else self._end(run, None, None, ran=False)
            except Exception as exc:  # noqa: BLE001 - the goal must still end and be answered
                self._log.error(f"goal {shown(run.handle.request.instruction)} failed: {exc!r}")
                result = self._crashed(run, exc)
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
            result = self._end(run, None, None, ran=False)
        except Exception as exc:  # noqa: BLE001 - the goal must still be answered
            result = self._crashed(run, exc)
        self._finish(run, result)

    def _crashed(self, run: GoalRun, exc: Exception) -> Act.Result:
        if run.handle.is_active:
            try:
                run.handle.abort()
            except Exception:  # noqa: BLE001 - rclpy aborts an unfinished goal itself
                pass
        return Act.Result(
            reason=f"{ResultReason.RAISED.value}:{type(exc).__name__}",
            stopped_early=True,
            max_seam_jump=math.nan,
            message=f"the node failed while ending the goal: {exc}",
        )

    def _finish(self, run: GoalRun, result: Act.Result) -> None:
        """The goal is over: forget it, answer its `execute`, wake the executor."""
        with self._cond:
            run.phase = GoalPhase.ENDED
            if self._current is run:
                self._current = None
            self._goals.pop(bytes(run.handle.goal_id.uuid), None)
            self._cond.notify_all()
        run.result.set_result(result)
        self._wake()

    def _run(self, run: GoalRun) -> Act.Result:
        config = self._live_config()
        goal = run.handle.request
        max_seconds = min(goal.max_seconds, config.max_goal_seconds)
        options: dict[str, Any] = {
            "max_seconds": max_seconds,
            "validate": lambda step: self._validate(run, step),
            "hold": lambda: self._hold(run, config),
            "prefetch": config.prefetch,
            "max_in_flight": config.max_in_flight,
            "playback_speed": config.playback_speed,
            "smooth_seam": config.smooth_seam,
            "startup_timeout_s": config.startup_timeout_s,
            "on_status": lambda state: self._on_status(run, state),
            "on_chunk": lambda prediction: self._on_chunk(run, prediction),
            "on_underrun": lambda _waited_s: self._on_underrun(run),
            "controller": self._controller,
            "progress": False,
            "call": run.call,
        }
        if self._gate.mode is CommandMode.CHUNK:
            options["on_rows"] = lambda installed: self._on_rows(run, installed)
        self._health.update(goal=f"running {shown(goal.instruction)}")
        capped = ""
        if goal.max_seconds > max_seconds:
            capped = f" (capped by max_goal_seconds from {goal.max_seconds:g})"
        self._log.info(
            f"goal {shown(goal.instruction)}: max_seconds {max_seconds:g}{capped}, prefetch "
            f"{config.prefetch}, smooth_seam {config.smooth_seam}, max_in_flight "
            f"{config.max_in_flight}, playback_speed {config.playback_speed}"
        )

        def observe() -> sequence_ai.Observation:
            return self._observe(config, goal.instruction)

        outcome: sequence_ai.RunOutcome | None = None
        error: Exception | None = None
        # Built from this goal's parameter snapshot: a change applies from the next goal.
        self._cache.watch_images(config.max_image_age_s)
        self._gate.begin_goal(MotionRules.from_config(config))
        try:
            missing = self._wait_for_inputs(run, config.input_wait_s)
            with self._cond:
                stopped = run.phase is GoalPhase.STOPPING
            if not missing:
                outcome, error = self._run_policy(run, observe, options)
            elif not stopped:
                error = StaleObservation(
                    f"{', '.join(missing)} never arrived within input_wait_s "
                    f"({config.input_wait_s:g} s)"
                )
            with self._cond:
                held = run.held
            if not held:
                # A completed run does not call hold; its arm must still be held.
                self._hold(run, config, force=True)
        finally:
            self._gate.end_goal()
        return self._end(run, outcome, error, ran=True)

    def _run_policy(
        self,
        run: GoalRun,
        observe: Callable[[], sequence_ai.Observation],
        options: dict[str, Any],
    ) -> tuple[sequence_ai.RunOutcome | None, Exception | None]:
        goal = run.handle.request

        def act(step: list[float]) -> None:
            self._act(run, step)

        try:
            if goal.max_actions > 0:
                # act() takes no max_actions; run() with the instruction in every observation
                # is the same loop with both bounds.
                return self._policy.run(
                    observe, act, max_actions=goal.max_actions, **options
                ), None
            return self._policy.act(goal.instruction, observe, act, **options), None
        except Exception as exc:  # noqa: BLE001 - any failure must end the goal held
            return getattr(exc, "outcome", None), exc

    def _wait_for_inputs(self, run: GoalRun, wait_s: float) -> list[str]:
        """Wait up to `wait_s` (feedback `waiting`) until every input has delivered a first
        message or the goal is stopped; the inputs still missing."""
        if not self._cache.missing():
            return []
        with self._cond:
            run.status = RunStatus.WAITING
        self._feedback(run, force=True)
        self._cache.add_listener(self._inputs_arrived)
        deadline = time.monotonic() + wait_s
        try:
            with self._cond:
                # Joint states announce themselves; camera frames are looked for again every
                # _INPUT_RECHECK_S (missing() takes them).
                while not (run.phase is GoalPhase.STOPPING or not self._cache.missing()):
                    left = deadline - time.monotonic()
                    if left <= 0:
                        break
                    self._cond.wait(min(left, _INPUT_RECHECK_S))
        finally:
            self._cache.remove_listener(self._inputs_arrived)
        return self._cache.missing()

    def _inputs_arrived(self) -> None:
        with self._cond:
            self._cond.notify_all()

    def _detail(
        self, run: GoalRun, outcome: sequence_ai.RunOutcome | None, error: Exception | None
    ) -> str:
        """What the run reports, for the result message."""
        if error is not None:
            return f"{type(error).__name__}: {error}"
        if outcome is not None and outcome.ending is Ending.VALIDATE:
            with self._cond:
                return run.validate_reason
        return repr(outcome)

    def _end(
        self,
        run: GoalRun,
        outcome: sequence_ai.RunOutcome | None,
        error: Exception | None,
        *,
        ran: bool,
    ) -> Act.Result:
        """Set the goal's terminal state and build its result from its `GoalEnding` row."""
        detail = self._detail(run, outcome, error) if ran else NEVER_STARTED
        if outcome is not None:
            run_ending = outcome.ending
        else:
            run_ending = Ending.RAISED if error is not None else Ending.INTERRUPTED
        with self._cond:
            cause = run.stop
            counts = (run.actions, run.chunks, run.underruns)
            unheld = run.unheld
        row = goal_ending(cause, run_ending).value
        reason = row.reason.value
        if row.reason is ResultReason.RAISED:
            reason += f":{outcome.error if outcome and outcome.error else type(error).__name__}"
        message = row.message.format(detail=detail, cause=cause.value if cause else "")
        if unheld:
            message += f"; the arm could not be held: {unheld}"
        result = Act.Result(
            reason=reason,
            stopped_early=row.terminal is not Terminal.SUCCEEDED,
            message=message,
        )
        if outcome is not None:
            result.actions, result.chunks = outcome.actions, outcome.chunks
            result.underruns, result.underrun_s = outcome.underruns, float(outcome.underrun_s)
            result.elapsed_s = float(outcome.elapsed_s)
            jump = outcome.max_seam_jump
            result.max_seam_jump = math.nan if jump is None else float(jump)
            result.stopped_early = result.stopped_early or bool(outcome.stopped_early)
            _continuity_into(result, outcome)
        else:
            result.actions, result.chunks, result.underruns = counts
            result.elapsed_s = time.monotonic() - run.started_s
            result.max_seam_jump = math.nan
        self._set_terminal(run, row.terminal)
        self._health.end_goal(f"{result.reason}: {result.message}", ran=ran)
        self._log.info(
            f"goal {shown(run.handle.request.instruction)} ended {result.reason}: "
            f"{result.message}"
        )
        return result

    def _set_terminal(self, run: GoalRun, terminal: Terminal) -> None:
        handle = run.handle
        if terminal is Terminal.SUCCEEDED:
            handle.succeed()
        elif terminal is Terminal.ABORTED:
            handle.abort()
        else:
            # The cancel callback stops the run before rclpy records the cancel; canceling
            # before that record would be an invalid goal transition.
            with self._cond:
                recorded = self._cond.wait_for(
                    lambda: handle.is_cancel_requested, _CANCEL_STATE_WAIT_S
                )
            if recorded:
                handle.canceled()
            else:
                handle.abort()

    # ----- the loop's callbacks: observe on the request's thread, the rest on the driving one

    def _observe(self, config: NodeConfig, instruction: str) -> sequence_ai.Observation:
        """A fresh observation, or StaleObservation: a stale one is never sent. Safe from any
        thread: the cache takes frames and copies joints under its own locks."""
        frames = self._cache.images(config.max_image_age_s)
        joints = self._cache.joints(config.max_state_age_s)
        return sequence_ai.observation(
            self._model,
            images=frames,
            joints=joints.positions,
            gripper=None if joints.gripper is None else [joints.gripper],
            instruction=instruction,
            quality=config.jpeg_quality,
        )

    def _validate(self, run: GoalRun, step: list[float]) -> bool:
        with self._cond:
            if run.refused:
                return False
        # A stale joint state or camera raises StaleObservation: the goal ends with it, held.
        reason = self._gate.check(step)
        if reason is not None:
            with self._cond:
                run.validate_reason = reason
            self._log.warning(f"step refused: {reason}")
            return False
        return True

    def _act(self, run: GoalRun, step: list[float]) -> None:
        self._gate.publish(step)
        with self._cond:
            run.actions += 1
            run.status = RunStatus.RUNNING
            run.warming_eta_s = math.nan
        self._feedback(run)

    def _on_rows(self, run: GoalRun, installed: sequence_ai.InstalledRows) -> None:
        """Chunk mode: each chunk the loop installs goes to the arm as one trajectory. The
        same chunk re-timed (the driving thread ran late) is not sent again: the controller
        keeps the chunk's own times, whatever Python's pace."""
        with self._cond:
            if installed.chunk == run.sent_chunk:
                return
            run.sent_chunk = installed.chunk
        # Raises StaleObservation like a step's check: the run ends with it, held.
        reason = self._gate.publish_chunk(installed.rows, installed.first_due)
        if reason is not None:
            with self._cond:
                run.refused = run.validate_reason = reason
            self._log.warning(f"chunk refused: {reason}")

    def _hold(self, run: GoalRun, config: NodeConfig, force: bool = False) -> None:
        with self._cond:
            run.held = True
            preempted = run.stop is StopCause.PREEMPTED
        # A position arm left at its last target is still; a velocity arm never is, nor an
        # arm playing a chunk's trajectory.
        if (
            preempted and not config.hold_between_goals and not force
            and self._gate.interface is Interface.POSITION
            and self._gate.mode is CommandMode.STEP
        ):
            return
        problem = self._gate.hold()
        if problem is not None:
            with self._cond:
                run.unheld = problem

    def _on_status(self, run: GoalRun, state: RunStatus) -> None:
        if state is RunStatus.DONE:
            return
        with self._cond:
            run.status = state
        if state is RunStatus.WAITING:
            # The step after the wait is checked against the arm as it is then; a velocity
            # arm is stopped meanwhile (its controller keeps applying the last command).
            self._gate.pause()
        self._feedback(run, force=True)

    def _on_chunk(self, run: GoalRun, prediction: sequence_ai.Prediction) -> None:
        with self._cond:
            run.chunks += 1
            run.request_bytes = prediction.request_bytes or 0
        latency = _request_latency_s(prediction)
        if latency is not None:
            self._health.add_latency(latency)
        observation = prediction.observation
        self._health.update(
            request_bytes=prediction.request_bytes,
            view_bytes=None if observation is None else dict(observation.view_bytes),
        )

    def _on_underrun(self, run: GoalRun) -> None:
        with self._cond:
            run.underruns += 1
        self._health.add_underrun()

    def _feedback(self, run: GoalRun, force: bool = False) -> None:
        now = time.monotonic()
        with self._cond:
            if not force and now - run.last_feedback_s < _FEEDBACK_PERIOD_S:
                return
            run.last_feedback_s = now
            feedback = Act.Feedback(
                status=run.status.value,
                actions=run.actions,
                chunks=run.chunks,
                underruns=run.underruns,
                elapsed_s=now - run.started_s,
                warming_eta_s=run.warming_eta_s,
                request_bytes=run.request_bytes,
            )
        progress = self._policy.progress
        if progress is not None:
            rate = progress.requests_per_s
            feedback.requests = progress.requests
            feedback.in_flight = progress.in_flight
            feedback.requests_per_s = math.nan if rate is None else rate
            feedback.speed = progress.speed
            feedback.rows_beyond_horizon = progress.rows_beyond_horizon
            feedback.no_fresh_command_s = progress.no_fresh_command_s
            self._health.update(continuity=progress)
        else:
            feedback.requests_per_s = feedback.speed = math.nan
        run.handle.publish_feedback(feedback)


def _continuity_into(result: Act.Result, outcome: sequence_ai.RunOutcome) -> None:
    """The run's continuity and cost figures into the goal's result (NaN: not measured)."""
    rate = outcome.requests_per_s
    result.requests, result.discarded = outcome.requests, outcome.discarded
    result.requests_per_s = math.nan if rate is None else rate
    result.rows_beyond_horizon = outcome.rows_beyond_horizon
    result.no_fresh_command_s = float(outcome.no_fresh_command_s)
    result.speed_min = math.nan if outcome.speed_min is None else outcome.speed_min
    result.speed_mean = math.nan if outcome.speed_mean is None else outcome.speed_mean


def _request_latency_s(prediction: sequence_ai.Prediction) -> float | None:
    """The round trip of the request that produced this chunk: the client's figure if it
    reports one, else the service's own time to first action (a lower bound)."""
    for key in ("round_trip_ms", "ttfa_ms"):
        value = prediction.perf.get(key)
        # A negative time is impossible: the service's figure is ignored then.
        if isinstance(value, (int, float)) and math.isfinite(value) and value >= 0:
            return float(value) / 1000.0
    return None
