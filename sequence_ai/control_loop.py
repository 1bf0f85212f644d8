"""The machinery under ``Policy.run``/``act``: prefetch, pacing, seam, interrupt, hold, cold start.

Nothing here is public; ``policy.py`` wires it to the user-facing methods. See
``docs/control-loop.md`` for the narrative.
"""

from __future__ import annotations

import math
import sys
import threading
import time
import warnings
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, Callable, Optional

from .actions import prepare, to_joint_positions
from .errors import SequencesError, Unavailable
from .outcome import RunOutcome
from .types import Observation, Prediction

if TYPE_CHECKING:
    from .catalogue import Model
    from .policy import Policy

monotonic = time.monotonic

Row = list[float]

CONTROLLERS = ("raw", "native", "joint_position")
PROGRESS_MODES = ("auto", True, False)
# Playback rate when neither control_hz nor a chunk says otherwise (never reached in practice:
# every chunk carries its rate).
FALLBACK_HZ = 10.0
# Lead = LEAD_FACTOR · EMA(refill latency) + one period; the factor absorbs latency jitter.
LEAD_FACTOR = 1.25
EMA_WEIGHT = 0.3
# Cold-start polling: never sleep longer than this between warming attempts, so a model that
# becomes ready early is noticed early; never shorter than the floor, so a 0 s Retry-After
# cannot spin.
WARMING_POLL_MAX_S = 5.0
WARMING_POLL_MIN_S = 0.2


class Ending(Exception):
    """Private: unwinds the loop for a non-error ending. Always caught inside this module."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


class CallScope:
    """What one call sees of ``interrupt()``; also woken when a fetch it started completes.

    A scope lives exactly as long as the call that opened it, so an interrupt that arrives
    when nothing runs has no scope to mark and cannot leak into a later call.
    """

    def __init__(self) -> None:
        self.wake = threading.Event()
        self.interrupted = False

    def interrupt(self) -> None:
        self.interrupted = True
        self.wake.set()

    def wait_for(self, ready: Callable[[], bool], deadline: Optional[float]) -> str:
        """Block until ``ready()``, an interrupt or ``deadline``.

        Returns "ready", "interrupted" or "deadline".
        """
        while True:
            # Clear before checking, so a completion that lands between check and wait
            # re-sets the event and the wait returns at once.
            self.wake.clear()
            if self.interrupted:
                return "interrupted"
            if ready():
                return "ready"
            if deadline is None:
                self.wake.wait()
                continue
            left = deadline - monotonic()
            if left <= 0:
                return "deadline"
            self.wake.wait(left)

    def sleep_until(self, deadline: float) -> str:
        """Interruptible sleep: "deadline" when it passed, "interrupted" otherwise."""
        return self.wait_for(_never, deadline)


def _never() -> bool:
    return False


class FetchJob:
    """One ``POST /v1/act`` on its own thread; the driving thread waits via its ``CallScope``."""

    def __init__(
        self,
        request: Callable[[], Prediction],
        scope: CallScope,
        on_exit: Callable[[threading.Thread], None],
        *,
        warm: bool,
    ) -> None:
        self._request = request
        self._scope = scope
        self._on_exit = on_exit
        # Only a request sent while the model is known to be loaded may feed the latency EMA.
        self.warm = warm
        self.started = 0.0
        self.finished = 0.0
        self._result: Optional[Prediction] = None
        self._error: Optional[BaseException] = None
        self._done = threading.Event()
        self.thread = threading.Thread(target=self._work, name="sequence_ai-fetch", daemon=True)

    def start(self) -> FetchJob:
        self.started = monotonic()
        self.thread.start()
        return self

    def _work(self) -> None:
        try:
            self._result = self._request()
        except BaseException as exc:  # handed to the driving thread, re-raised there
            self._error = exc
        finally:
            self.finished = monotonic()
            self._done.set()
            self._scope.wake.set()
            self._on_exit(self.thread)

    def is_done(self) -> bool:
        return self._done.is_set()

    @property
    def latency_s(self) -> float:
        return self.finished - self.started

    def prediction(self) -> Prediction:
        """The answer, or the worker's exception re-raised on the calling thread."""
        if self._error is not None:
            raise self._error
        assert self._result is not None
        return self._result


class Pacer:
    """Absolute-deadline pacing: the step after one due at ``t`` is due at ``t + period``.

    Time spent in observe/validate/act or a prefetch never stretches the period, because the
    next deadline is computed from the previous deadline, not from "now".
    """

    def __init__(self, clock: Callable[[], float] = monotonic) -> None:
        self._clock = clock
        self._due: Optional[float] = None

    def stamp(self, period: float) -> None:
        """Call just before a step is handed to act."""
        now = self._clock()
        # Late by more than a period (an underrun, a slow callback): re-anchor on now rather
        # than bursting the missed steps out back to back.
        if self._due is None or now - self._due > period:
            self._due = now

    def next_due(self, period: float) -> float:
        """Deadline of the next step; call after the step was handed to act."""
        if self._due is None:
            self._due = self._clock()
        self._due += period
        return self._due


class StatusReporter:
    """``on_status`` callbacks and the single-line stderr progress display."""

    LABELS = {"starting": "starting...", "running": "running", "waiting": "waiting...",
              "done": "done"}

    def __init__(self, on_status: Optional[Callable[[str], Any]], progress: Any) -> None:
        self._on_status = on_status
        if progress == "auto":
            try:
                progress = bool(sys.stderr.isatty())
            except (AttributeError, ValueError):
                progress = False
        self._progress = bool(progress)
        self.state: Optional[str] = None

    def report(self, state: str) -> None:
        if state == self.state:
            return
        self.state = state
        if self._progress:
            end = "\n" if state == "done" else ""
            sys.stderr.write(f"\r  sequence_ai {self.LABELS[state]:<12}{end}")
            sys.stderr.flush()
        if self._on_status is not None:
            self._on_status(state)


def seam_jump(row: Sequence[float], last: Sequence[float]) -> Optional[float]:
    """Largest per-dimension change across a chunk boundary; None when widths differ."""
    if len(row) != len(last) or not row:
        return None
    return max(abs(a - b) for a, b in zip(row, last))


def blend_seam(rows: list[Row], last: Sequence[float], n: int, skip_dims: Sequence[int]) -> None:
    """Ramp the first ``n`` rows out of ``last`` in place, leaving ``skip_dims`` untouched."""
    skip = set(skip_dims)
    for i in range(min(n, len(rows))):
        row = rows[i]
        if len(row) != len(last):
            return
        w = (i + 1) / (n + 1)
        rows[i] = [
            value if d in skip else (1.0 - w) * last[d] + w * value for d, value in enumerate(row)
        ]


def is_absolute_space(space: str) -> bool:
    """True for spaces whose rows are targets, not increments (blending those is meaningful)."""
    name = space.lower()
    if "delta" in name or "velocity" in name:
        return False
    return "absolute" in name or name in ("joint_pos", "joint_position", "joint_positions")


def _semantics(model: Model) -> dict[str, Any]:
    return dict(model.action_semantics or {})


def check_controller(controller: str, model: Optional[Model], model_id: str) -> None:
    """Refuse at run start a controller the model cannot serve."""
    if controller == "raw":
        return
    if model is None:
        raise ValueError(
            f"controller={controller!r} needs the catalogue row of {model_id}, "
            "which /v1/models does not list; use controller='raw'"
        )
    if controller != "joint_position":
        return
    space = _semantics(model).get("space") or model.action_space or ""
    if is_absolute_space(space):
        return
    conversion = (_semantics(model).get("conversions") or {}).get("joint_position")
    if not conversion or conversion.get("reference") != "state_at_request":
        raise ValueError(
            f"controller='joint_position': {model_id} emits {space or 'unknown'} rows and "
            "declares no verified joint_position conversion; use controller='raw' or 'native'"
        )


def controller_rows(controller: str, prediction: Prediction, model: Optional[Model]) -> list[Row]:
    """The rows handed to act for ``prediction`` under ``controller`` (all steps, untruncated)."""
    chunk = prediction.action_chunk
    if controller == "raw" or model is None:
        return [list(step) for step in chunk.steps]
    if controller == "joint_position" and not is_absolute_space(chunk.action_space):
        if prediction.observation is None:
            raise SequencesError("joint_position conversion needs the chunk's observation")
        # The reference is the state the chunk was requested with, never the live pose.
        q_reference = list(prediction.observation.proprioception.joint_positions)
        return [list(row) for row in to_joint_positions(chunk, q_reference, model)]
    return [list(prepare(chunk, model, i)) for i in range(len(chunk))]


def await_first_chunk(
    policy: Policy,
    scope: CallScope,
    make_observation: Callable[[], Observation],
    options: dict[str, Any],
    *,
    budget_s: float,
    deadline: Optional[float],
) -> FetchJob:
    """First request of a call, waiting out a warming model for up to ``budget_s``.

    Each attempt gets a fresh observation. Returns the finished job (its prediction and
    latency); raises ``Ending("interrupted"|"timeout")`` when interrupted or when
    ``deadline`` passes, and ``Unavailable`` when the budget runs out.
    """
    start = monotonic()
    budget_end = start + max(0.0, budget_s)
    eta_s: Optional[float] = None
    warned = False
    saw_warming = False
    while True:
        observation = make_observation()
        # A gateway may hold the connection open while it loads; let such an attempt use the
        # whole remaining budget instead of timing out at the default.
        timeout = max(policy._timeout_s, budget_end - monotonic()) if budget_s > 0 else None
        job = policy._submit(observation, options, scope, timeout=timeout, deadline=deadline)
        state = scope.wait_for(job.is_done, deadline)
        if state == "interrupted":
            raise Ending("interrupted")
        if state == "deadline":
            raise Ending("timeout")
        try:
            job.prediction()
            # A request that followed a load may still include part of it: not a warm sample.
            job.warm = job.warm and not saw_warming
            return job
        except Unavailable as exc:
            if not exc.warming or budget_s <= 0:
                raise
            saw_warming = True
            now = monotonic()
            if now >= budget_end:
                if deadline is not None and deadline <= budget_end:
                    raise Ending("timeout") from None
                raise Unavailable(
                    f"{exc.message} (the model was still loading when the startup budget of "
                    f"{budget_s:g}s ran out; raise startup_timeout_s or call "
                    "wait_until_ready() first)",
                    status=exc.status,
                    body=exc.body,
                    retry_after_s=exc.retry_after_s,
                    warming=True,
                    job_id=exc.job_id,
                ) from None
            if eta_s is None:
                eta_s = policy._full_load_eta(exc)
            if policy._on_warming is not None:
                policy._on_warming(now - start, eta_s)
            if not warned:
                warned = True
                warnings.warn(
                    f"{policy.model} is loading (about {_eta_text(eta_s)}); waiting up to "
                    f"{budget_s:g}s before the first action",
                    UserWarning,
                    stacklevel=4,
                )
            pause = exc.retry_after_s if exc.retry_after_s is not None else WARMING_POLL_MAX_S
            pause = min(max(pause, WARMING_POLL_MIN_S), WARMING_POLL_MAX_S)
            wake_at = min(now + pause, budget_end)
            if deadline is not None and deadline <= wake_at:
                state = scope.sleep_until(deadline)
                raise Ending("interrupted" if state == "interrupted" else "timeout") from None
            if scope.sleep_until(wake_at) == "interrupted":
                raise Ending("interrupted") from None


def _eta_text(eta_s: Optional[float]) -> str:
    if eta_s is None:
        return "an unknown time"
    if eta_s < 90:
        return f"{eta_s:.0f}s"
    return f"{eta_s / 60:.0f} min"


def positive_seconds(
    name: str, value: Any, *, allow_none: bool, allow_zero: bool = False, unit: str = "seconds"
) -> None:
    """Shared argument check for durations and rates: finite, positive (or zero if allowed)."""
    if value is None and allow_none:
        return
    ok = (
        isinstance(value, (int, float))
        and not isinstance(value, bool)
        and math.isfinite(value)
        and (value >= 0 if allow_zero else value > 0)
    )
    if not ok:
        expected = f"a finite number of {unit}"
        expected += " >= 0" if allow_zero else " > 0"
        if allow_none:
            expected += " or None"
        raise ValueError(f"{name} is {value!r}; expected {expected}")


class RunLoop:
    """One ``run()``: owns the buffer, the in-flight fetch and every measurement of the run."""

    def __init__(
        self,
        policy: Policy,
        scope: CallScope,
        *,
        observe: Callable[[], Observation],
        act: Callable[[Row], Any],
        max_actions: int,
        validate: Optional[Callable[[Row], Any]],
        hold: Optional[Callable[[], Any]],
        until: Optional[Callable[[], Any]],
        on_chunk: Optional[Callable[[Prediction], Any]],
        on_underrun: Optional[Callable[[float], Any]],
        status: StatusReporter,
        prefetch: bool,
        smooth_seam: int,
        max_seconds: Optional[float],
        startup_timeout_s: float,
        open_loop_horizon: Optional[int],
        controller: str,
        model: Optional[Model],
        gripper_dims: Sequence[int],
        options: dict[str, Any],
    ) -> None:
        self.policy = policy
        self.scope = scope
        self.observe_cb = observe
        self.act_cb = act
        self.max_actions = max_actions
        self.validate_cb = validate
        self.hold_cb = hold
        self.until_cb = until
        self.on_chunk = on_chunk
        self.on_underrun = on_underrun
        self.status = status
        self.prefetch = prefetch
        self.smooth_seam = smooth_seam
        self.startup_timeout_s = startup_timeout_s
        self.horizon_override = open_loop_horizon
        self.controller = controller
        self.model = model
        self.gripper_dims = list(gripper_dims)
        self.options = options

        self.started = monotonic()
        self.deadline = None if max_seconds is None else self.started + max_seconds
        self.buffer = policy._buffer
        self.job: Optional[FetchJob] = None
        # Steps played when the in-flight request's observation was taken (see _install).
        self.job_played_at = 0
        self.pacer = Pacer()
        self.period = 1.0 / (policy._control_hz or FALLBACK_HZ)
        self.last_row: Optional[Row] = None

        self.actions = 0
        self.chunks = 0
        self.underruns = 0
        self.underrun_s = 0.0
        self.max_seam_jump: Optional[float] = None
        self.action_space: Optional[str] = None
        self.instruction_swaps = 0
        self.max_instruction_lag_s: Optional[float] = None
        self.observe_s = 0.0

    # -- the loop -------------------------------------------------------------------------

    def execute(self) -> RunOutcome:
        """Run to an ending; hold once on every early one; re-raise errors with the outcome."""
        reason = "completed"
        error: Optional[BaseException] = None
        self.buffer.clear()
        try:
            try:
                self.status.report("starting")
                self._loop()
            except Ending as end:
                reason = end.reason
            except BaseException as exc:
                reason = f"raised:{type(exc).__name__}"
                error = exc
            # Leftover steps were planned for this run only; the next call starts empty.
            self.buffer.clear()
            self.job = None
            if reason != "completed" and self.hold_cb is not None:
                try:
                    self.hold_cb()
                except BaseException as hold_exc:
                    if error is None:
                        reason = f"raised:{type(hold_exc).__name__}"
                        error = hold_exc
                    else:
                        warnings.warn(
                            f"hold() raised {hold_exc!r} while stopping after {error!r}",
                            RuntimeWarning,
                            stacklevel=3,
                        )
        finally:
            self.status.report("done")
        outcome = self._outcome(reason)
        if error is not None:
            try:
                error.outcome = outcome  # type: ignore[attr-defined]
            except AttributeError:
                pass
            raise error
        return outcome

    def _outcome(self, reason: str) -> RunOutcome:
        return RunOutcome(
            actions=self.actions,
            chunks=self.chunks,
            elapsed_s=monotonic() - self.started,
            underruns=self.underruns,
            underrun_s=self.underrun_s,
            stopped_early=reason != "completed",
            reason=reason,
            max_seam_jump=self.max_seam_jump,
            action_space=self.action_space,
            instruction_swaps=self.instruction_swaps,
            max_instruction_lag_s=self.max_instruction_lag_s,
            observe_s=self.observe_s,
        )

    def _loop(self) -> None:
        while self.actions < self.max_actions:
            self._check_stop()
            if not self.buffer:
                self._refill()
                self._check_stop()
            if self.until_cb is not None and self.until_cb():
                raise Ending("until")
            row = self.buffer.popleft()
            if self.validate_cb is not None and not self.validate_cb(row):
                raise Ending("validate")
            # Last look before the motors: an interrupt that returned before this point
            # must not be followed by another step.
            self._check_stop()
            self.pacer.stamp(self.period)
            self.act_cb(row)
            self.actions += 1
            self.last_row = row
            if self.status.state != "running":
                self.status.report("running")
            if self.actions >= self.max_actions:
                return
            self._top_up()
            due = self.pacer.next_due(self.period)
            self._sleep_until(due)

    def _check_stop(self) -> None:
        if self.scope.interrupted:
            raise Ending("interrupted")
        if self.deadline is not None and monotonic() >= self.deadline:
            raise Ending("timeout")

    def _sleep_until(self, due: float) -> None:
        limit = due if self.deadline is None else min(due, self.deadline)
        if self.scope.sleep_until(limit) == "interrupted":
            raise Ending("interrupted")
        self._check_stop()

    # -- observation and requests ---------------------------------------------------------

    def _observe(self) -> Observation:
        t0 = monotonic()
        try:
            observation = self.observe_cb()
        finally:
            self.observe_s += monotonic() - t0
        if not isinstance(observation, Observation):
            raise TypeError(
                f"observe() returned {type(observation).__name__}; expected a "
                "sequence_ai.Observation (build one with sequence_ai.observation(...))"
            )
        text, pending_since = self.policy._take_latch()
        if pending_since is not None:
            self.instruction_swaps += 1
            lag = monotonic() - pending_since
            if self.max_instruction_lag_s is None or lag > self.max_instruction_lag_s:
                self.max_instruction_lag_s = lag
        if text is not None and observation.instruction != text:
            observation = observation.with_instruction(text)
        # The pre-send check runs here, on the driving thread, so a strict failure surfaces
        # where the observation was taken rather than later at delivery.
        self.policy._check_observation(observation)
        return observation

    def _start_fetch(self) -> FetchJob:
        observation = self._observe()
        self.job_played_at = self.actions
        return self.policy._submit(
            observation, self.options, self.scope, timeout=None, deadline=self.deadline
        )

    def _await(self, job: FetchJob) -> Prediction:
        state = self.scope.wait_for(job.is_done, self.deadline)
        if state == "interrupted":
            raise Ending("interrupted")
        if state == "deadline":
            raise Ending("timeout")
        prediction = job.prediction()
        if job.warm:
            self.policy._note_latency(job.latency_s)
        return prediction

    def _refill(self) -> None:
        """The buffer is empty: take the in-flight chunk, or fetch one synchronously."""
        if self.chunks == 0 and self.job is None:
            self._install(self._first_chunk())
            return
        job, self.job = self.job, None
        # Past the first action, any wait for a chunk leaves the arm without a command.
        late = self.actions > 0 and (job is None or not job.is_done())
        wait_start = monotonic()
        if late:
            self.status.report("waiting")
        try:
            prediction = self._await(job if job is not None else self._start_fetch())
            played_during_request = self.actions - self.job_played_at
        finally:
            # Counted even when the wait ends in an interrupt, a timeout or an error.
            if late:
                waited = monotonic() - wait_start
                self.underruns += 1
                self.underrun_s += waited
                if self.on_underrun is not None:
                    self.on_underrun(waited)
        self._install(prediction, played_during_request)

    def _first_chunk(self) -> Prediction:
        budget = self.startup_timeout_s
        if self.deadline is not None:
            budget = min(budget, max(0.0, self.deadline - monotonic()))
        job = await_first_chunk(
            self.policy, self.scope, self._observe, self.options,
            budget_s=budget, deadline=self.deadline,
        )
        if job.warm:
            self.policy._note_latency(job.latency_s)
        self.policy._served = True
        return job.prediction()

    def _top_up(self) -> None:
        """Fire the next request once the remaining playback falls to the lead time."""
        if not self.prefetch or self.job is not None or not self.buffer:
            return
        # Never fetch beyond what max_actions still needs.
        if self.actions + len(self.buffer) >= self.max_actions:
            return
        ema = self.policy._latency_ema
        # No warm sample yet: fire now (one step of this chunk has been played), the safe side.
        lead = math.inf if ema is None else LEAD_FACTOR * ema + self.period
        if len(self.buffer) * self.period > lead:
            return
        self.job = self._start_fetch()

    # -- installing a chunk ---------------------------------------------------------------

    def _install(self, prediction: Prediction, played_during_request: int = 0) -> None:
        chunk = prediction.action_chunk
        rows = controller_rows(self.controller, prediction, self.model)
        horizon = self.horizon_override or chunk.open_loop_horizon or len(rows)
        # Row i of a chunk is planned for i periods after its observation. Steps of the
        # previous chunk played while this one was in flight used up those first rows'
        # time, so playback starts at the row that is due now (never rewinding the arm to
        # where it was when the request left) and plays a full horizon from there.
        start = min(played_during_request, len(rows) - 1)
        rows = rows[start : start + horizon]
        absolute = self.controller == "joint_position" or is_absolute_space(chunk.action_space)
        if self.last_row is not None and rows:
            # Measured on the rows act will receive, before any blending can hide the jump.
            jump = seam_jump(rows[0], self.last_row)
            if jump is not None and (self.max_seam_jump is None or jump > self.max_seam_jump):
                self.max_seam_jump = jump
            if self.smooth_seam > 0 and absolute:
                blend_seam(rows, self.last_row, self.smooth_seam, self.gripper_dims)
        self.buffer.clear()
        self.buffer.extend(rows)
        self.chunks += 1
        self.action_space = chunk.action_space
        hz = self.policy._control_hz or chunk.control_frequency_hz or FALLBACK_HZ
        self.period = 1.0 / hz
        if self.on_chunk is not None:
            self.on_chunk(prediction)
