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

import sequence_ai
from sequence_ai import CallHandle, Ending, RunStatus
from sequence_ai_interfaces.action import Act
from sequence_ai_ros.arm import ArmGate, MotionRules
from sequence_ai_ros.commands import CommandMode, Interface
from sequence_ai_ros.diagnostics import HealthRecord
from sequence_ai_ros.observations import ObservationCache, StaleObservation
from sequence_ai_ros.parameters import NodeConfig

# A preempted run stops within one control period plus one interruptible wait; this bounds
# how long the next goal waits for it before giving up.
PREEMPT_WAIT_S = 10.0
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
    """One accepted goal. `handle`, `call` and `started_s` never change (`call` is the
    client's interrupt of exactly this goal's run, safe from any thread); every other field is
    read and written only under `GoalRunner._cond` (by the action server's callbacks, the
    goal's own executing thread and the client's callbacks)."""

    handle: ServerGoalHandle
    call: CallHandle = field(default_factory=CallHandle)
    started_s: float = field(default_factory=time.monotonic)
    phase: GoalPhase = GoalPhase.PENDING
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


def goal_problem(goal: Act.Goal) -> str | None:
    """Why a goal request must be rejected, or None."""
    if not goal.instruction.strip():
        return "instruction is empty; expected one sentence for the policy"
    if not math.isfinite(goal.max_seconds) or goal.max_seconds <= 0:
        return f"max_seconds is {goal.max_seconds}; expected a finite number > 0"
    if goal.max_actions < 0:
        return f"max_actions is {goal.max_actions}; expected >= 0 (0 = bounded by max_seconds)"
    return None


class GoalRunner:
    """Runs goals through `Policy.act`; every step and hold goes through the arm gate, and every
    end holds.

    Every field is set here and never reassigned, except `_goals` and `_current`, which
    `_cond` guards together with the mutable fields of each `GoalRun`.
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
    ) -> None:
        self._policy = policy
        self._model = model
        self._controller = controller
        self._cache = cache
        self._gate = gate
        self._health = health
        self._live_config = live_config
        self._log = log
        self._cond = threading.Condition()
        self._goals: dict[bytes, GoalRun] = {}  # every goal not yet ended, by goal id
        self._current: GoalRun | None = None  # the goal whose run drives the arm

    # ----- callbacks from the action server and the lifecycle -----

    def accept(self, handle: ServerGoalHandle) -> None:
        """A new goal preempts every earlier one, then starts executing."""
        with self._cond:
            stopped = [r for r in self._goals.values() if r.request_stop(StopCause.PREEMPTED)]
            self._goals[bytes(handle.goal_id.uuid)] = GoalRun(handle)
            self._cond.notify_all()
        for run in stopped:
            run.call.interrupt()
        handle.execute()

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
        """End every goal (deactivate / shutdown); True when none is left."""
        with self._cond:
            stopped = [r for r in self._goals.values() if r.request_stop(cause)]
            self._cond.notify_all()
        for run in stopped:
            run.call.interrupt()
        with self._cond:
            return self._cond.wait_for(lambda: not self._goals, timeout_s)

    def set_warming(self, eta_s: float) -> None:
        """From the client's on_warming: the running goal's feedback shows the ETA."""
        with self._cond:
            run = self._current
            if run is None:
                return
            run.status = RunStatus.WAITING
            run.warming_eta_s = eta_s
        self._feedback(run, force=True)

    # ----- goal execution (its own executor thread) -----

    def execute(self, handle: ServerGoalHandle) -> Act.Result:
        key = bytes(handle.goal_id.uuid)
        with self._cond:
            run = self._goals.setdefault(key, GoalRun(handle))
            # A goal stopped while it waits ends at once, without waiting for the current one.
            if not self._cond.wait_for(
                lambda: self._current is None or run.phase is not GoalPhase.PENDING,
                PREEMPT_WAIT_S,
            ):
                run.request_stop(StopCause.BUSY)
            if run.phase is GoalPhase.PENDING:
                run.phase = GoalPhase.RUNNING
                self._current = run
            ran = self._current is run
        try:
            if not ran:
                return self._end(run, None, None, ran=False)
            return self._run(run)
        finally:
            with self._cond:
                run.phase = GoalPhase.ENDED
                if self._current is run:
                    self._current = None
                self._goals.pop(key, None)
                self._cond.notify_all()

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
        self._health.update(goal=f"running {goal.instruction!r}")
        capped = ""
        if goal.max_seconds > max_seconds:
            capped = f" (capped by max_goal_seconds from {goal.max_seconds:g})"
        self._log.info(
            f"goal {goal.instruction!r}: max_seconds {max_seconds:g}{capped}, prefetch "
            f"{config.prefetch}, smooth_seam {config.smooth_seam}, max_in_flight "
            f"{config.max_in_flight}, playback_speed {config.playback_speed}"
        )

        def observe() -> sequence_ai.Observation:
            return self._observe(config, goal.instruction)

        outcome: sequence_ai.RunOutcome | None = None
        error: Exception | None = None
        # Built from this goal's parameter snapshot: a change applies from the next goal.
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
        try:
            with self._cond:
                self._cond.wait_for(
                    lambda: run.phase is GoalPhase.STOPPING or not self._cache.missing(), wait_s
                )
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
            f"goal {run.handle.request.instruction!r} ended {result.reason}: {result.message}"
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

    # ----- the loop's callbacks (the goal's thread) -----

    def _observe(self, config: NodeConfig, instruction: str) -> sequence_ai.Observation:
        """A fresh observation, or StaleObservation: a stale one is never sent."""
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
        if isinstance(value, (int, float)) and math.isfinite(value):
            return float(value) / 1000.0
    return None
