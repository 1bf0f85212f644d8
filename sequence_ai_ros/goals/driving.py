"""`GoalDriver`: the node's `Driver` (driver.py) — what the driving thread does for one goal:
wire its run, wait for its inputs, drive `Policy.act`/`run` with every step and hold through the
arm gate, and end it. `goal_runner` makes the goal state machine around it."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from rclpy.impl.rcutils_logger import RcutilsLogger

import sequence_ai
from sequence_ai import Controller, RunStatus
from sequence_ai_ros.commands.dry_run import GateSwitch
from sequence_ai_ros.core.command_kinds import CommandMode
from sequence_ai_ros.core.freshness import StaleObservation
from sequence_ai_ros.core.health import HealthRecord
from sequence_ai_ros.core.node_config import NodeConfig
from sequence_ai_ros.episodes.recorder import EpisodeRecorder
from sequence_ai_ros.goals.feedback import GoalFeedback
from sequence_ai_ros.goals.goal_state import GoalPhase, GoalRun
from sequence_ai_ros.goals.instruction import shown
from sequence_ai_ros.goals.results import GoalOutcome, GoalResults
from sequence_ai_ros.goals.runner import GoalRunner
from sequence_ai_ros.goals.stop_policy import ArmCommand, arm_command
from sequence_ai_ros.goals.takeover import (
    RunBaton,
    afresh_seconds,
    handed_over_outcome,
    own_outcome,
)
from sequence_ai_ros.inputs.observation_cache import ObservationCache
from sequence_ai_ros.inputs.sent_images import SentImages
from sequence_ai_ros.safety.gate import MotionRules

__all__ = ["GoalDriver", "GoalParts", "goal_runner"]

# A goal waiting for its first camera frames looks again this often: frames are taken, not
# pushed, so no callback announces them.
_INPUT_RECHECK_S = 0.1
# A hand-over accepted after its own max_seconds already passed still ends by the deadline.
_MIN_LEFT_S = 1e-3
# A run's end waits at most this for the hand-over book-keeping of the goal taking it over
# (the executor's, which never blocks).
_HANDOVER_WAIT_S = 5.0


@dataclass(frozen=True)
class GoalParts:
    """What configure gives the goals to run with."""

    policy: sequence_ai.Policy
    model: sequence_ai.Model
    controller: Controller
    cache: ObservationCache
    # Every step and hold goes through it (the arm's gate, or a dry run's).
    gate: GateSwitch
    health: HealthRecord
    # Told each goal's start, end, observations and holds; an observer of its run's events.
    episodes: EpisodeRecorder
    # The images of the last observation sent, for ~/current_frames (inputs/sent_images.py).
    images: SentImages = field(default_factory=SentImages)


def goal_runner(
    parts: GoalParts,
    *,
    live_config: Callable[[], NodeConfig],
    log: RcutilsLogger,
    wake: Callable[[], None],
) -> GoalRunner:
    """The goal state machine with this node's driver and results, sharing one condition."""
    # Lock order 6: the runner's, shared with the driver and the results.
    cond = threading.Condition()
    results = GoalResults(cond, parts.health, log, parts.episodes)
    driver = GoalDriver(parts, results=results, log=log, cond=cond)
    return GoalRunner(
        cond=cond, driver=driver, results=results, live_config=live_config, log=log, wake=wake
    )


class GoalDriver:
    """Runs one goal at a time on the driving thread (`run`); its callbacks run where the
    client calls them (observe on a request's thread, the rest on the driving thread). `cond`
    is the goal runner's, which guards each `GoalRun`'s mutable fields."""

    def __init__(
        self, parts: GoalParts, *, results: GoalResults, log: RcutilsLogger,
        cond: threading.Condition,
    ) -> None:
        self._policy = parts.policy
        self._model = parts.model
        self._controller = parts.controller
        self._cache = parts.cache
        self._gate = parts.gate
        self._health = parts.health
        self._episodes = parts.episodes
        self._images = parts.images
        self._results = results
        self._log = log
        self._cond = cond
        # Under cond: first messages of an input seen while a goal waits for its inputs; the
        # run under way, which a hand-over takes over (takeover.py).
        self._arrivals = 0
        self._baton: RunBaton | None = None

    @property
    def images(self) -> SentImages:
        return self._images

    @property
    def baton(self) -> RunBaton | None:
        """The run under way (read under cond)."""
        return self._baton

    def run(self, run: GoalRun, config: NodeConfig) -> GoalOutcome:
        """Drive the goal's run to its end, hold the arm as the stop policy says, end it."""
        goal = run.handle.request
        self._episodes.goal_started(bytes(run.handle.goal_id.uuid), goal, config)
        return self._drive(run, config, min(goal.max_seconds, config.max_goal_seconds))

    def _drive(self, run: GoalRun, config: NodeConfig, max_seconds: float) -> GoalOutcome:
        goal = run.handle.request
        feedback = GoalFeedback(run.handle, self._health, run.started_s, self._episodes.feedback)
        baton = RunBaton(feedback, config)
        with self._cond:
            run.feedback = feedback
            self._baton = baton
        def observe() -> sequence_ai.Observation:
            return self._observe(config, self._holder(run).handle.request.instruction)

        def act(step: list[float]) -> None:
            self._gate.publish(step)

        def on_rows(installed: sequence_ai.InstalledRows) -> None:
            self._on_rows(self._holder(run), installed)

        rules = MotionRules.from_config(config)
        # The callbacks act for the goal that owns the run when they are called (a hand-over
        # passes it on). max_actions 0: act() bounded by max_seconds alone.
        options = sequence_ai.RunOptions(
            observe=observe,
            act=act,
            max_actions=goal.max_actions if goal.max_actions > 0 else None,
            max_seconds=max_seconds,
            validate=lambda step: self._validate(self._holder(run), step),
            hold=lambda: self._stop_arm(self._holder(run), config, interrupted=True),
            prefetch=config.prefetch,
            max_in_flight=config.max_in_flight,
            playback_speed=config.playback_speed,
            smooth_seam=config.smooth_seam,
            seam_limits=self._gate.seam_limits(rules),
            startup_timeout_s=config.startup_timeout_s,
            on_status=self._on_status,
            observers=[baton, self._episodes],
            controller=self._controller,
            progress=False,
            on_rows=on_rows if self._gate.mode is CommandMode.CHUNK else None,
        )
        self._health.update(goal=f"running {shown(goal.instruction)}")
        capped = ""
        if goal.max_seconds > max_seconds:
            capped = f" (capped by max_goal_seconds from {goal.max_seconds:g})"
        self._log.info(
            f"goal {shown(goal.instruction)}: max_seconds {max_seconds:g}{capped}, prefetch "
            f"{config.prefetch}, smooth_seam {config.smooth_seam}, max_in_flight "
            f"{config.max_in_flight}, playback_speed {config.playback_speed}"
        )

        outcome: sequence_ai.RunOutcome | None = None
        error: Exception | None = None
        # Built from this goal's parameter snapshot: a change applies from the next goal.
        self._cache.watch_images(config.max_image_age_s)
        holder = run
        self._gate.begin_goal(rules)
        with self._cond:
            run.dry_run = rules.dry_run
        try:
            missing = self._wait_for_inputs(run, feedback, config.input_wait_s)
            with self._cond:
                stopped = run.phase is GoalPhase.STOPPING
            if not missing:
                outcome, error = self._run_policy(run, options)
            elif not stopped:
                error = StaleObservation(
                    f"{', '.join(missing)} never arrived within input_wait_s "
                    f"({config.input_wait_s:g} s)"
                )
            with self._cond:
                self._baton = None
                self._cond.wait_for(lambda: not run.holder().handing, _HANDOVER_WAIT_S)
                holder = run.holder()
                held = holder.held
            if not held:
                # A run that did not call hold (completed, or never started): still held.
                self._stop_arm(holder, config, interrupted=False)
        finally:
            with self._cond:
                self._baton = None
            self._gate.end_goal()
        if holder is not run:
            outcome = own_outcome(holder.feedback, outcome, error)
            period_s = 1.0 / self._model.control_hz if self._model.control_hz else _MIN_LEFT_S
            with self._cond:
                left_s = afresh_seconds(holder, config, outcome, error, period_s)
            if left_s is not None:
                return self._afresh(holder, config, left_s)
        return self._results.end(holder, outcome, error, ran=True)

    def _afresh(self, run: GoalRun, config: NodeConfig, left_s: float) -> GoalOutcome:
        """A hand-over that found its run ended: the goal runs afresh, or (nothing left of its
        max_seconds) ends refused."""
        instruction = shown(run.handle.request.instruction)
        if left_s <= 0:
            self._log.warning(
                f"goal {instruction}: the run it was to take over ended as it arrived, too late "
                "to run it afresh; refused"
            )
            return self._results.end(run, None, None, ran=False)
        self._log.info(
            f"goal {instruction}: the run it was to take over ended as it arrived; it runs "
            f"afresh for the {left_s:.3g} s left of its max_seconds"
        )
        return self._drive(run, config, left_s)

    def hand_over(self, previous: GoalRun, run: GoalRun, config: NodeConfig) -> GoalOutcome:
        """The run under way goes on for `run`, which took it over from `previous`
        (`goal_handover.take_over`, under cond); the result of `previous`, handed over."""
        goal = run.handle.request
        feedback = GoalFeedback(run.handle, self._health, run.started_s, self._episodes.feedback)
        with self._cond:
            run.feedback = feedback
            baton, old_feedback = self._baton, previous.feedback
        # max_seconds counts from the goal's acceptance.
        max_seconds = min(goal.max_seconds, config.max_goal_seconds)
        left_s = max(max_seconds - (time.monotonic() - run.started_s), _MIN_LEFT_S)
        if not self._policy.hand_over(goal.instruction, max_seconds=left_s):
            # No run left to take over (it ended as the goal arrived): the run's end, on the
            # driving thread, runs the goal afresh (`_afresh`).
            with self._cond:
                run.handover_missed = True
        if baton is not None:
            baton.pass_to(feedback)
        result = self._results.end(previous, handed_over_outcome(old_feedback), None, ran=True)
        self._episodes.goal_started(bytes(run.handle.goal_id.uuid), goal, config)
        self._health.update(goal=f"running {shown(goal.instruction)}")
        self._log.info(
            f"goal {shown(goal.instruction)} took over from "
            f"{shown(previous.handle.request.instruction)}: max_seconds {max_seconds:g}"
        )
        return result

    def _holder(self, run: GoalRun) -> GoalRun:
        with self._cond:
            return run.holder()

    def _run_policy(
        self, run: GoalRun, options: sequence_ai.RunOptions
    ) -> tuple[sequence_ai.RunOutcome | None, Exception | None]:
        try:
            if options.max_actions is not None:
                # act() takes no max_actions; run() with the instruction in every observation
                # is the same loop with both bounds.
                return self._policy.run(options=options, call=run.call), None
            return self._policy.act(
                run.handle.request.instruction, options=options, call=run.call
            ), None
        except Exception as exc:  # noqa: BLE001 - any failure must end the goal held
            return getattr(exc, "outcome", None), exc

    def _wait_for_inputs(self, run: GoalRun, feedback: GoalFeedback, wait_s: float) -> list[str]:
        """Wait up to `wait_s` (feedback `waiting`) until every input has delivered a first
        message or the goal is stopped; the inputs still missing."""
        if not self._cache.missing():
            return []
        feedback.waiting()
        self._cache.add_listener(self._inputs_arrived)
        deadline = time.monotonic() + wait_s
        try:
            while True:
                # missing() takes frames under the cache's take lock, whose first-frame
                # listener takes _cond: it is called with _cond released (lock order), and
                # the arrival count tells an arrival during the call from none.
                with self._cond:
                    if run.phase is GoalPhase.STOPPING:
                        break
                    seen = self._arrivals
                if not self._cache.missing():
                    break
                left = deadline - time.monotonic()
                if left <= 0:
                    break
                with self._cond:
                    if run.phase is not GoalPhase.STOPPING and self._arrivals == seen:
                        # Joint states announce themselves; camera frames are looked for
                        # again every _INPUT_RECHECK_S (missing() takes them).
                        self._cond.wait(min(left, _INPUT_RECHECK_S))
        finally:
            self._cache.remove_listener(self._inputs_arrived)
        return self._cache.missing()

    def _inputs_arrived(self) -> None:
        with self._cond:
            self._arrivals += 1
            self._cond.notify_all()

    # ----- the loop's callbacks: observe on the request's thread, the rest on the driving one

    def _observe(self, config: NodeConfig, instruction: str) -> sequence_ai.Observation:
        """A fresh observation, or StaleObservation: a stale one is never sent. Safe from any
        thread: the cache takes frames and copies joints under its own locks."""
        captured_ns = time.time_ns()
        images = self._cache.images(config.max_image_age_s, config.max_frame_pixels)
        joints = self._gate.observed(self._cache.joints(config.max_state_age_s))
        observation = sequence_ai.observation(
            self._model,
            images=images,
            # A state_dim-0 model takes no state; the gate still checked the joints above.
            joints=joints.positions if self._model.state_dim != 0 else None,
            gripper=joints.gripper if self._model.state_dim != 0 else None,
            # An ee model's measured pose (None for a joint-space model).
            end_effector_pose=self._cache.end_effector_pose(config.max_pose_age_s),
            instruction=instruction,
            quality=config.jpeg_quality,
        )
        self._episodes.observation_sent(observation, captured_ns)
        self._images.sent(observation, captured_ns)
        return observation

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
            self._episodes.refusal(reason)
            return False
        return True

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
            self._episodes.refusal(reason, installed.chunk)

    def _stop_arm(self, run: GoalRun, config: NodeConfig, *, interrupted: bool) -> None:
        """The arm at the goal's end, as `stop_policy.arm_command` decides."""
        with self._cond:
            run.held = True
            cause = run.stop
        command = arm_command(
            cause, interrupted=interrupted, interface=self._gate.interface,
            mode=self._gate.mode, hold_between_goals=config.hold_between_goals,
        )
        if command is ArmCommand.LEAVE:
            return
        self._episodes.hold()
        problem = self._gate.hold()
        if problem is not None:
            with self._cond:
                run.unheld = problem

    def _on_status(self, state: RunStatus) -> None:
        if state is RunStatus.WAITING:
            # The step after the wait is checked against the arm as it is then; a velocity
            # arm is stopped meanwhile (its controller keeps applying the last command).
            self._gate.pause()
