"""``RunLoop``: drives one ``run()``/``act()`` through a Session, a call handle and RunOptions.

Prefetch, refill, the seam, pacing, interrupt and the hold on every early end. See
``docs/control-loop.md`` for the narrative.
"""

from __future__ import annotations

import math
import time
import warnings
from typing import Optional

from .actions import gripper_dims
from .calls import CallEnded, CallHandle, Wake
from .catalogue import Model
from .controllers import Controller, check_controller, controller_rows, is_absolute_space
from .fetch import Fetch
from .options import RunOptions
from .outcome import Ending, RunOutcome
from .pacing import Pacer
from .seam import blend_seam, seam_jump
from .session import Session
from .status import RunStatus, StatusReporter
from .types import Observation, Prediction
from .warmup import await_first_chunk

__all__ = ["LEAD_FACTOR", "RunLoop", "playback_hz"]

Row = list[float]

# Lead = LEAD_FACTOR · EMA(refill latency) + one period; the factor absorbs latency jitter.
LEAD_FACTOR = 1.25


def playback_hz(session: Session, model: Optional[Model]) -> float:
    """The rate steps are handed to act: ``connect(control_hz=)``, else the catalogue's.

    Never a response's: a chunk declaring another rate is refused, not obeyed.
    """
    if session.control_hz is not None:
        return session.control_hz
    if model is not None and model.control_hz is not None:
        return model.control_hz
    where = (
        "/v1/models does not list it" if model is None
        else "its catalogue row declares no control_hz"
    )
    raise ValueError(
        f"run() needs the playback rate of {session.model_id}, but {where}; pass "
        "control_hz= to sequence_ai.connect() (the rate the model was trained at)"
    )


class RunLoop:
    """One run. Everything here belongs to the driving thread (the caller of ``execute``);
    other threads reach the run only through its call handle."""

    def __init__(self, session: Session, call: CallHandle, options: RunOptions) -> None:
        self.session = session
        self.call = call
        self.options = options
        self.status = StatusReporter(options.on_status, options.progress)
        self.startup_timeout_s = (
            session.startup_timeout_s if options.startup_timeout_s is None
            else float(options.startup_timeout_s)
        )
        # The catalogue row sets the playback rate and is what every chunk is checked
        # against; None only for an unlisted model given connect(control_hz=).
        self.model: Optional[Model] = session.spec()
        self.period = 1.0 / playback_hz(session, self.model)
        check_controller(options.controller, self.model, session.model_id)
        self.gripper_dims = sorted(gripper_dims(self.model)) if self.model is not None else []

        self.started = time.monotonic()
        self.deadline = (
            None if options.max_seconds is None else self.started + options.max_seconds
        )
        self.buffer = session.buffer
        self.fetch: Optional[Fetch] = None
        # Steps played when the in-flight request's observation was taken (see _install).
        self.fetch_played_at = 0
        self.pacer = Pacer()
        self.last_row: Optional[Row] = None

        self.actions = 0
        self.chunks = 0
        self.underruns = 0
        self.underrun_s = 0.0
        self.max_seam_jump: Optional[float] = None
        self.action_space: Optional[str] = None
        self.instruction_swaps = 0
        self.observations = 0
        self.max_instruction_lag_s: Optional[float] = None
        self.observe_s = 0.0

    # -- the loop -------------------------------------------------------------------------

    def execute(self) -> RunOutcome:
        """Run to an ending; hold once on every early one; re-raise errors with the outcome."""
        ending = Ending.COMPLETED
        error: Optional[BaseException] = None
        self.buffer.clear()
        try:
            try:
                self.status.report(RunStatus.STARTING)
                self._loop()
            except CallEnded as end:
                ending = end.ending
            except BaseException as exc:
                ending, error = Ending.RAISED, exc
            # Leftover steps were planned for this run only; the next call starts empty.
            self.buffer.clear()
            self.fetch = None
            if ending is not Ending.COMPLETED and self.options.hold is not None:
                try:
                    self.options.hold()
                except BaseException as hold_exc:
                    if error is None:
                        ending, error = Ending.RAISED, hold_exc
                    else:
                        warnings.warn(
                            f"hold() raised {hold_exc!r} while stopping after {error!r}",
                            RuntimeWarning,
                            stacklevel=3,
                        )
        finally:
            self.status.report(RunStatus.DONE)
        outcome = self._outcome(ending, error)
        if error is not None:
            try:
                error.outcome = outcome  # type: ignore[attr-defined]
            except AttributeError:
                pass
            raise error
        return outcome

    def _outcome(self, ending: Ending, error: Optional[BaseException]) -> RunOutcome:
        return RunOutcome(
            actions=self.actions,
            chunks=self.chunks,
            elapsed_s=time.monotonic() - self.started,
            underruns=self.underruns,
            underrun_s=self.underrun_s,
            ending=ending,
            error=None if error is None else type(error).__name__,
            max_seam_jump=self.max_seam_jump,
            action_space=self.action_space,
            instruction_swaps=self.instruction_swaps,
            max_instruction_lag_s=self.max_instruction_lag_s,
            observe_s=self.observe_s,
        )

    def _loop(self) -> None:
        options = self.options
        while self.actions < options.max_actions:
            self._check_stop()
            if not self.buffer:
                self._refill()
                self._check_stop()
            if options.until is not None and options.until():
                raise CallEnded(Ending.UNTIL)
            row = self.buffer.popleft()
            if options.validate is not None and not options.validate(row):
                raise CallEnded(Ending.VALIDATE)
            # Last look before the motors: an interrupt that returned before this point
            # must not be followed by another step.
            self._check_stop()
            self.pacer.stamp(self.period)
            options.act(row)
            self.actions += 1
            self.last_row = row
            if self.status.state is not RunStatus.RUNNING:
                self.status.report(RunStatus.RUNNING)
            if self.actions >= options.max_actions:
                return
            self._top_up()
            due = self.pacer.next_due(self.period)
            self._sleep_until(due)

    def _check_stop(self) -> None:
        if self.call.interrupted:
            raise CallEnded(Ending.INTERRUPTED)
        if self.deadline is not None and time.monotonic() >= self.deadline:
            raise CallEnded(Ending.TIMEOUT)

    def _sleep_until(self, due: float) -> None:
        limit = due if self.deadline is None else min(due, self.deadline)
        if self.call.sleep_until(limit) is Wake.INTERRUPTED:
            raise CallEnded(Ending.INTERRUPTED)
        self._check_stop()

    # -- observation and requests ---------------------------------------------------------

    def _observe(self) -> Observation:
        t0 = time.monotonic()
        try:
            observation = self.options.observe()
        finally:
            self.observe_s += time.monotonic() - t0
        if not isinstance(observation, Observation):
            raise TypeError(
                f"observe() returned {type(observation).__name__}; expected a "
                "sequence_ai.Observation (build one with sequence_ai.observation(...))"
            )
        text, pending_since = self.session.take_instruction()
        # The instruction a run starts with (act()'s own, or one latched before) is not a swap:
        # only a change after the run's first request is.
        if pending_since is not None and self.observations > 0:
            self.instruction_swaps += 1
            lag = time.monotonic() - pending_since
            if self.max_instruction_lag_s is None or lag > self.max_instruction_lag_s:
                self.max_instruction_lag_s = lag
        self.observations += 1
        if text is not None and observation.instruction != text:
            observation = observation.with_instruction(text)
        # The pre-send check runs here, on the driving thread, so a strict failure surfaces
        # where the observation was taken rather than later at delivery.
        self.session.check_observation(observation)
        return observation

    def _start_fetch(self) -> Fetch:
        observation = self._observe()
        self.fetch_played_at = self.actions
        return self.session.submit(
            observation, self.options.body, self.call,
            model=self.model, timeout=None, deadline=self.deadline,
        )

    def _await(self, fetch: Fetch) -> Prediction:
        wake = self.call.wait_for(fetch.is_done, self.deadline)
        if wake is not Wake.READY:
            raise CallEnded.after(wake)
        prediction = fetch.prediction()
        if fetch.warm:
            self.session.note_latency(fetch.latency_s)
        return prediction

    def _refill(self) -> None:
        """The buffer is empty: take the in-flight chunk, or fetch one synchronously."""
        if self.chunks == 0 and self.fetch is None:
            self._install(self._first_chunk())
            return
        fetch, self.fetch = self.fetch, None
        # Past the first action, any wait for a chunk leaves the arm without a command.
        late = self.actions > 0 and (fetch is None or not fetch.is_done())
        wait_start = time.monotonic()
        if late:
            self.status.report(RunStatus.WAITING)
        try:
            prediction = self._await(fetch if fetch is not None else self._start_fetch())
            played_during_request = self.actions - self.fetch_played_at
        finally:
            # Counted even when the wait ends in an interrupt, a timeout or an error.
            if late:
                waited = time.monotonic() - wait_start
                self.underruns += 1
                self.underrun_s += waited
                if self.options.on_underrun is not None:
                    self.options.on_underrun(waited)
        self._install(prediction, played_during_request)

    def _first_chunk(self) -> Prediction:
        budget = self.startup_timeout_s
        if self.deadline is not None:
            budget = min(budget, max(0.0, self.deadline - time.monotonic()))
        fetch = await_first_chunk(
            self.session, self.call, self._observe, self.options.body,
            model=self.model, budget_s=budget, deadline=self.deadline,
        )
        if fetch.warm:
            self.session.note_latency(fetch.latency_s)
        self.session.mark_served()
        return fetch.prediction()

    def _top_up(self) -> None:
        """Fire the next request once the remaining playback falls to the lead time."""
        if not self.options.prefetch or self.fetch is not None or not self.buffer:
            return
        # Never fetch beyond what max_actions still needs.
        if self.actions + len(self.buffer) >= self.options.max_actions:
            return
        latency = self.session.latency_s
        # No warm sample yet: fire now (one step of this chunk has been played), the safe side.
        lead = math.inf if latency is None else LEAD_FACTOR * latency + self.period
        if len(self.buffer) * self.period > lead:
            return
        self.fetch = self._start_fetch()

    # -- installing a chunk ---------------------------------------------------------------

    def _install(self, prediction: Prediction, played_during_request: int = 0) -> None:
        options = self.options
        chunk = prediction.action_chunk
        rows = controller_rows(options.controller, prediction, self.model)
        # A chunk's horizons agree with the catalogue's (checked on arrival), so this plays
        # at most the catalogue's horizon.
        horizon = options.open_loop_horizon or chunk.open_loop_horizon or len(rows)
        # Row i of a chunk is planned for i periods after its observation. Steps of the
        # previous chunk played while this one was in flight used up those first rows'
        # time, so playback starts at the row that is due now (never rewinding the arm to
        # where it was when the request left) and plays a full horizon from there.
        start = min(played_during_request, len(rows) - 1)
        rows = rows[start : start + horizon]
        absolute = (
            options.controller is Controller.JOINT_POSITION
            or is_absolute_space(chunk.action_space)
        )
        if self.last_row is not None and rows:
            # Measured on the rows act will receive, before any blending can hide the jump.
            jump = seam_jump(rows[0], self.last_row)
            if jump is not None and (self.max_seam_jump is None or jump > self.max_seam_jump):
                self.max_seam_jump = jump
            if options.smooth_seam > 0 and absolute:
                blend_seam(rows, self.last_row, options.smooth_seam, self.gripper_dims)
        self.buffer.clear()
        self.buffer.extend(rows)
        self.chunks += 1
        self.action_space = chunk.action_space
        if options.on_chunk is not None:
            options.on_chunk(prediction)
