"""`act` goals: one runs at a time; a new goal preempts, cancel interrupts, every end holds."""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from rclpy.action.server import ServerGoalHandle

import sequence_ai
from sequence_ai_interfaces.action import Act
from sequence_ai_ros import safety
from sequence_ai_ros.commands import CommandPublisher
from sequence_ai_ros.diagnostics import HealthRecord
from sequence_ai_ros.observations import ObservationCache
from sequence_ai_ros.parameters import NodeConfig

# Stop requests that can end a goal other than its own run ending.
PREEMPTED = "preempted"
CANCELED = "canceled"
DEACTIVATED = "deactivated"
BUSY = "busy"

# A preempted run stops within one control period plus one interruptible wait; this bounds
# how long the next goal waits for it before giving up.
_PREEMPT_WAIT_S = 10.0
_FEEDBACK_PERIOD_S = 0.2
_CANCEL_STATE_WAIT_S = 2.0


@dataclass
class GoalRun:
    """Book-keeping of one accepted goal, shared by the executing thread and the callbacks."""

    handle: ServerGoalHandle
    stop: str | None = None
    running: bool = False
    held: bool = False
    validate_reason: str = ""
    actions: int = 0
    chunks: int = 0
    underruns: int = 0
    status: str = "starting"
    warming_eta_s: float = math.nan
    started_s: float = field(default_factory=time.monotonic)
    last_target: list[float] | None = None
    reference: list[float] | None = None
    last_feedback_s: float = 0.0


def goal_problem(goal: Any) -> str | None:
    """Why a goal request must be rejected, or None."""
    if not goal.instruction.strip():
        return "instruction is empty; expected one sentence for the policy"
    if not math.isfinite(goal.max_seconds) or goal.max_seconds <= 0:
        return f"max_seconds is {goal.max_seconds}; expected a finite number > 0"
    if goal.max_actions < 0:
        return f"max_actions is {goal.max_actions}; expected >= 0 (0 = bounded by max_seconds)"
    return None


class GoalRunner:
    """Runs goals through `Policy.act`, publishing each validated step and holding at every end."""

    def __init__(
        self,
        *,
        policy: Any,
        model: Any,
        controller: str,
        cache: ObservationCache,
        commands: CommandPublisher,
        health: HealthRecord,
        live_config: Callable[[], NodeConfig],
        log: Any,
    ) -> None:
        self._policy = policy
        self._model = model
        self._controller = controller
        self._cache = cache
        self._commands = commands
        self._health = health
        self._live_config = live_config
        self._log = log
        self._cond = threading.Condition()
        self._goals: dict[bytes, GoalRun] = {}
        self._running: GoalRun | None = None
        self._period_s = 1.0 / (model.control_hz or 15.0)

    # ----- callbacks from the action server and the lifecycle -----

    def accept(self, handle: ServerGoalHandle) -> None:
        """A new goal preempts every earlier one, then starts executing."""
        with self._cond:
            for run in self._goals.values():
                run.stop = run.stop or PREEMPTED
            self._goals[bytes(handle.goal_id.uuid)] = GoalRun(handle)
            busy = self._running is not None
        if busy:
            self._policy.interrupt()
        handle.execute()

    def cancel(self, handle: ServerGoalHandle) -> None:
        with self._cond:
            run = self._goals.get(bytes(handle.goal_id.uuid))
            if run is None:
                return
            run.stop = run.stop or CANCELED
            running = run.running
        if running:
            self._policy.interrupt()

    def stop_all(self, reason: str, timeout_s: float) -> bool:
        """End every goal (deactivate / shutdown); True when none is left running."""
        with self._cond:
            for run in self._goals.values():
                run.stop = run.stop or reason
            busy = self._running is not None
        if busy:
            self._policy.interrupt()
        deadline = time.monotonic() + timeout_s
        with self._cond:
            while self._goals and time.monotonic() < deadline:
                self._cond.wait(0.05)
            return not self._goals

    def set_warming(self, eta_s: float) -> None:
        """Called from the client's on_warming: the running goal's feedback shows the ETA."""
        with self._cond:
            run = self._running
        if run is not None:
            run.status = "waiting"
            run.warming_eta_s = eta_s
            self._feedback(run, force=True)

    # ----- goal execution (its own executor thread) -----

    def execute(self, handle: ServerGoalHandle) -> Act.Result:
        key = bytes(handle.goal_id.uuid)
        with self._cond:
            run = self._goals.get(key)
            if run is None:
                run = self._goals[key] = GoalRun(handle)
            deadline = time.monotonic() + _PREEMPT_WAIT_S
            while self._running is not None and time.monotonic() < deadline:
                self._cond.wait(0.05)
            if self._running is not None:
                run.stop = run.stop or BUSY
            else:
                self._running = run
                run.running = run.stop is None
        try:
            if not run.running:
                return self._finish_without_run(run)
            return self._run(run)
        finally:
            with self._cond:
                if self._running is run:
                    self._running = None
                self._goals.pop(key, None)
                self._cond.notify_all()

    def _finish_without_run(self, run: GoalRun) -> Act.Result:
        """A goal stopped while it waited for the previous one: it never moved the arm."""
        result = Act.Result(reason="interrupted", stopped_early=True, max_seam_jump=math.nan)
        if run.stop == CANCELED:
            result.message = "canceled before it started"
            _end_canceled(run.handle)
            return self._record(run, result)
        if run.stop == PREEMPTED:
            result.reason = PREEMPTED
            result.message = "preempted by a newer goal before it started"
        elif run.stop == BUSY:
            result.message = f"the previous goal did not stop within {_PREEMPT_WAIT_S:g} s"
        else:
            result.message = f"node {run.stop} before the goal started"
        run.handle.abort()
        return self._record(run, result)

    def _record(self, run: GoalRun, result: Act.Result) -> Act.Result:
        """Log the end of a goal and show it in diagnostics."""
        self._health.last_outcome = f"{result.reason}: {result.message}"
        self._log.info(
            f"goal {run.handle.request.instruction!r} ended {result.reason}: {result.message}"
        )
        return result

    def _run(self, run: GoalRun) -> Act.Result:
        config = self._live_config()
        goal = run.handle.request
        max_seconds = min(goal.max_seconds, config.max_goal_seconds)
        # Built once per goal: the limits are read-only parameters checked at configure.
        limits = safety.SafetyLimits(
            config.joint_names, config.joint_lower_limits, config.joint_upper_limits,
            config.max_step,
        )
        options: dict[str, Any] = {
            "max_seconds": max_seconds,
            "validate": lambda step: self._validate(run, config, limits, step),
            "hold": lambda: self._hold(run, config),
            "prefetch": config.prefetch,
            "smooth_seam": config.smooth_seam,
            "startup_timeout_s": config.startup_timeout_s,
            "on_status": lambda state: self._on_status(run, state),
            "on_chunk": lambda prediction: self._on_chunk(run, prediction),
            "on_underrun": lambda _waited_s: self._on_underrun(run),
            "controller": self._controller,
            "progress": False,
        }
        self._health.goal = f"running {goal.instruction!r}"
        capped = ""
        if goal.max_seconds > max_seconds:
            capped = f" (capped by max_goal_seconds from {goal.max_seconds:g})"
        self._log.info(
            f"goal {goal.instruction!r}: max_seconds {max_seconds:g}{capped}, prefetch "
            f"{config.prefetch}, smooth_seam {config.smooth_seam}"
        )
        outcome = None
        error: BaseException | None = None

        def observe() -> Any:
            return self._observe(config, goal.instruction)

        def act(step: list[float]) -> None:
            self._act(run, config, step)

        try:
            if goal.max_actions > 0:
                # act() takes no max_actions; run() with the instruction in every observation
                # is the same loop with both bounds.
                outcome = self._policy.run(observe, act, max_actions=goal.max_actions, **options)
            else:
                outcome = self._policy.act(goal.instruction, observe, act, **options)
        except Exception as exc:  # noqa: BLE001 - any failure must end the goal held
            error = exc
            outcome = getattr(exc, "outcome", None)
        if not run.held:
            # completed/until endings do not call hold; a velocity arm must still be stopped.
            self._hold(run, config, force=True)
        return self._result(run, outcome, error)

    def _result(self, run: GoalRun, outcome: Any, error: BaseException | None) -> Act.Result:
        result = Act.Result()
        result.actions = outcome.actions if outcome else run.actions
        result.chunks = outcome.chunks if outcome else run.chunks
        result.elapsed_s = float(
            outcome.elapsed_s if outcome else time.monotonic() - run.started_s
        )
        result.underruns = outcome.underruns if outcome else run.underruns
        result.underrun_s = float(outcome.underrun_s) if outcome else 0.0
        jump = outcome.max_seam_jump if outcome else None
        result.max_seam_jump = math.nan if jump is None else float(jump)
        result.reason = outcome.reason if outcome else "interrupted"
        result.stopped_early = bool(outcome.stopped_early) if outcome else True
        if error is not None:
            result.reason = f"raised:{type(error).__name__}"
            result.stopped_early = True
            result.message = f"{type(error).__name__}: {error}"
        elif result.reason == "validate":
            result.message = f"safety check refused a step: {run.validate_reason}"
        else:
            result.message = repr(outcome)

        handle = run.handle
        if run.stop == CANCELED:
            result.reason = "interrupted"
            _end_canceled(handle)
        elif run.stop == PREEMPTED:
            result.reason = PREEMPTED
            result.message = f"preempted by a newer goal; {result.message}"
            handle.abort()
        elif run.stop is not None:
            result.reason = "interrupted"
            result.message = f"node {run.stop}; {result.message}"
            handle.abort()
        elif error is None and result.reason in ("completed", "until", "timeout"):
            handle.succeed()
        else:
            handle.abort()
        self._health.goal = "idle"
        self._health.goals_run += 1
        return self._record(run, result)

    # ----- the loop's callbacks (driving thread) -----

    def _observe(self, config: NodeConfig, instruction: str) -> Any:
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

    def _validate(
        self, run: GoalRun, config: NodeConfig, limits: safety.SafetyLimits, step: list[float]
    ) -> bool:
        n = len(config.joint_names)
        measured = self._cache.last_joints()
        if measured is None:
            reason = "no joint state to compare the step with"
        elif self._commands.interface == "velocity":
            reason = safety.check_velocity_command(
                _velocities(config, step), measured.positions, self._period_s, limits
            )
        else:
            # The first step of a goal is measured from the joints its chunk was computed
            # from; later steps from the target published one step earlier.
            previous = run.last_target or run.reference or measured.positions
            reason = safety.check_position_target(step[:n], previous, limits)
        if reason is None and config.gripper_command_topic and len(step) > n:
            reason = safety.check_gripper(step[n])
        if reason is not None:
            run.validate_reason = reason
            self._log.warning(f"step refused: {reason}")
            return False
        return True

    def _act(self, run: GoalRun, config: NodeConfig, step: list[float]) -> None:
        n = len(config.joint_names)
        if self._commands.interface == "velocity":
            self._commands.publish_arm(_velocities(config, step), self._period_s)
        else:
            self._commands.publish_arm(step[:n], self._period_s)
            run.last_target = list(step[:n])
        if len(step) > n:
            self._commands.publish_gripper(step[n])
        run.actions += 1
        run.status = "running"
        run.warming_eta_s = math.nan
        self._feedback(run)

    def _hold(self, run: GoalRun, config: NodeConfig, force: bool = False) -> None:
        run.held = True
        if run.stop == PREEMPTED and not config.hold_between_goals and not force:
            return
        measured = self._cache.last_joints()
        positions = measured.positions if measured is not None else None
        if not self._commands.hold(positions, self._period_s):
            self._log.error("cannot hold: no joint state has been received to hold at")

    def _on_status(self, run: GoalRun, state: str) -> None:
        if state == "starting" and run.stop is not None:
            # The stop arrived before the run cleared its interrupt flag: repeat it now.
            self._policy.interrupt()
        if state == "waiting" and self._commands.interface == "velocity":
            # A velocity controller keeps applying its last command: while the next chunk is
            # late the arm must not keep moving on a step validated for one period only.
            self._commands.hold(None, self._period_s)
        if state in ("starting", "waiting", "running"):
            run.status = state
            self._feedback(run, force=True)

    def _on_chunk(self, run: GoalRun, prediction: Any) -> None:
        run.chunks += 1
        observation = getattr(prediction, "observation", None)
        if run.reference is None and observation is not None:
            run.reference = list(observation.proprioception.joint_positions)
        chunk = prediction.action_chunk
        if chunk.control_frequency_hz and chunk.control_frequency_hz > 0:
            self._period_s = 1.0 / chunk.control_frequency_hz
        latency = _request_latency_s(prediction)
        if latency is not None:
            self._health.add_latency(latency)

    def _on_underrun(self, run: GoalRun) -> None:
        run.underruns += 1
        self._health.underruns += 1

    def _feedback(self, run: GoalRun, force: bool = False) -> None:
        now = time.monotonic()
        if not force and now - run.last_feedback_s < _FEEDBACK_PERIOD_S:
            return
        run.last_feedback_s = now
        feedback = Act.Feedback(
            status=run.status,
            actions=run.actions,
            chunks=run.chunks,
            underruns=run.underruns,
            elapsed_s=now - run.started_s,
            warming_eta_s=run.warming_eta_s,
        )
        run.handle.publish_feedback(feedback)


def _velocities(config: NodeConfig, step: list[float]) -> list[float]:
    """Joint velocities (rad/s) of a normalised velocity step."""
    return [v * config.velocity_scale for v in step[: len(config.joint_names)]]


def _end_canceled(handle: ServerGoalHandle) -> None:
    """Mark a goal canceled once the server has moved it to CANCELING.

    The cancel callback interrupts the run before rclpy records the cancel, so a fast stop can
    get here first; canceling before that would be an invalid goal transition.
    """
    deadline = time.monotonic() + _CANCEL_STATE_WAIT_S
    while not handle.is_cancel_requested and time.monotonic() < deadline:
        time.sleep(0.005)
    if handle.is_cancel_requested:
        handle.canceled()
    else:
        handle.abort()


def _request_latency_s(prediction: Any) -> float | None:
    """The round trip of the request that produced this chunk: the client's figure if it
    reports one, else the service's own time to first action (a lower bound)."""
    perf = getattr(prediction, "perf", None) or {}
    for key in ("round_trip_ms", "ttfa_ms"):
        value = perf.get(key)
        if isinstance(value, (int, float)) and math.isfinite(value):
            return float(value) / 1000.0
    return None
