"""``RunLoop``: drives one ``run()``/``act()`` through a Session, a call handle and RunOptions.

Requests in flight (each observes on its own thread), the newest chunk installed from its due
row, the slow-down, the playback speed, pacing, interrupt and the hold on every early end. See
``docs/control-loop.md`` for the narrative.
"""

from __future__ import annotations

import dataclasses
import math
import threading
import time
import warnings
from collections import deque
from dataclasses import dataclass
from typing import Optional

from .actions import gripper_dims
from .calls import CallEnded, CallHandle, Wake
from .catalogue import Model
from .controllers import Controller, check_controller, controller_rows, is_absolute_space
from .fetch import Fetch
from .options import RunOptions
from .outcome import Ending, RunOutcome, RunProgress
from .pacing import Pacer
from .playback import Command, InstalledRows, commands_for, ramp_rows_for
from .seam import blend_seam, seam_jump
from .session import Session
from .speed import auto_speed, next_speed
from .status import RunStatus, StatusReporter
from .types import Observation, Prediction
from .warmup import await_first_chunk

__all__ = ["GAP_PERIODS", "LEAD_FACTOR", "RunLoop", "playback_hz"]

Row = list[float]

# Lead = LEAD_FACTOR · EMA(refill latency) + one period; the factor absorbs latency jitter.
LEAD_FACTOR = 1.25
# A gap between two commands longer than this many periods is time without a fresh command;
# shorter ones are pacing jitter, caught up on the next step.
GAP_PERIODS = 1.5


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


@dataclass
class Capture:
    """When and where in the playback one request's observation was taken.

    Its fetch thread writes it under the loop's lock before sending; the driving thread reads
    it under that lock while the request is in flight, freely once the fetch is done.
    """

    # Observation order within the run; -1 until the fetch thread has started observing.
    sequence: int = -1
    position: float = 0.0
    time: float = 0.0


@dataclass
class Request:
    fetch: Fetch
    capture: Capture


@dataclass
class Playing:
    """The installed chunk (driving thread)."""

    number: int
    sequence: int
    # Playback position of its row 0: the position at its observation's capture.
    origin: float
    captured: float
    # Chunk position where its open-loop horizon (counted from its due row) ends.
    horizon_end: float
    speed: float


def _quantile(values: list[float], q: float) -> Optional[float]:
    if not values:
        return None
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(math.ceil(q * len(ordered))) - 1)]


class RunLoop:
    """One run. The driving thread (the caller of ``execute``) owns everything not listed under
    ``_lock``; fetch threads reach the run only through ``_observe`` and the call handle."""

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
        self.max_in_flight = options.max_in_flight or session.max_in_flight
        self.speed_setting = (
            options.playback_speed if options.playback_speed is not None
            else session.playback_speed
        )

        self.started = time.monotonic()
        self.deadline = (
            None if options.max_seconds is None else self.started + options.max_seconds
        )
        self.connections_at_start = session.transport.connections_opened
        self.requests: list[Request] = []
        self.playing: Optional[Playing] = None
        self.tail: deque[Command] = deque()
        # The tail comes to rest by max_seconds: when it is played out, the run waits for its
        # deadline rather than for another chunk.
        self.resting_for_deadline = False
        # How long before max_seconds an answer must land to be played: the slow-down's time.
        self.ramp_s = 0.0
        self.speed = 1.0 if isinstance(self.speed_setting, str) else float(self.speed_setting)
        self.pacer = Pacer()
        self.last_row: Optional[Row] = None
        self.last_fire = -math.inf
        # Round trip of the run's first request: staggers requests until a warm sample exists.
        self.first_latency_s: Optional[float] = None
        # on_rows bookkeeping: due time of the last report's first row, commands played since.
        self.reports = 0
        self.report_due = 0.0
        self.report_played = 0

        self.actions = 0
        self.chunks = 0
        self.underruns = 0
        self.underrun_s = 0.0
        self.max_seam_jump: Optional[float] = None
        self.action_space: Optional[str] = None
        self.discarded = 0
        self.request_bytes = 0
        self.rows_beyond_horizon = 0
        self.no_fresh_command_s = 0.0
        self.max_gap_s: Optional[float] = None
        self.first_act: Optional[float] = None
        self.last_act = 0.0
        self.speeds: list[float] = []
        self.ages: list[float] = []
        # Replaced (never changed) by the driving thread; read by any thread.
        self.progress = RunProgress()

        self._lock = threading.Lock()
        # Under _lock (fetch threads observe while the driving thread plays): the playback
        # position of the next command, in rows since the run's first observation; the next
        # observation's number; observation, request and instruction-swap counts; observe time.
        self._position = 0.0
        self._next_sequence = 0
        self._observations = 0
        self._requests = 0
        self._instruction_swaps = 0
        self._max_instruction_lag_s: Optional[float] = None
        self._observe_s = 0.0

    # -- the loop -------------------------------------------------------------------------

    def execute(self) -> RunOutcome:
        """Run to an ending; hold once on every early one; re-raise errors with the outcome."""
        ending = Ending.COMPLETED
        error: Optional[BaseException] = None
        # Steps left by predict() belong to another observation; runs never use them.
        self.session.buffer.clear()
        try:
            try:
                self.status.report(RunStatus.STARTING)
                self._loop()
            except CallEnded as end:
                ending = end.ending
            except BaseException as exc:
                ending, error = Ending.RAISED, exc
            # Requests still in flight are abandoned; nothing of them is played.
            self.session.abandon_requests()
            self.tail.clear()
            self.requests = []
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
        with self._lock:
            swaps, lag = self._instruction_swaps, self._max_instruction_lag_s
            observe_s, requests = self._observe_s, self._requests
        motion_s = 0.0 if self.first_act is None else self.last_act - self.first_act + self.period
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
            instruction_swaps=swaps,
            max_instruction_lag_s=lag,
            observe_s=observe_s,
            requests=requests,
            discarded=self.discarded,
            connections=self.session.transport.connections_opened - self.connections_at_start,
            request_bytes=self.request_bytes,
            max_in_flight=self.max_in_flight,
            motion_s=motion_s,
            rows_beyond_horizon=self.rows_beyond_horizon,
            no_fresh_command_s=self.no_fresh_command_s,
            max_gap_s=self.max_gap_s,
            speed_min=min(self.speeds) if self.speeds else None,
            speed_mean=sum(self.speeds) / len(self.speeds) if self.speeds else None,
            observation_age_s=_quantile(self.ages, 0.5),
            observation_age_p95_s=_quantile(self.ages, 0.95),
        )

    def _loop(self) -> None:
        options = self.options
        while self.actions < options.max_actions:
            self._check_stop()
            self._take_arrivals()
            if not self.tail:
                if self.resting_for_deadline:
                    assert self.deadline is not None
                    if self.call.sleep_until(self.deadline) is Wake.INTERRUPTED:
                        raise CallEnded(Ending.INTERRUPTED)
                    self._check_stop()
                self._refill()
                self._check_stop()
                if not self.tail:
                    # The first answer came too late to be played and brought to rest by
                    # max_seconds (later answers that cannot be are not installed at all).
                    raise CallEnded(Ending.TIMEOUT)
            if options.until is not None and options.until():
                raise CallEnded(Ending.UNTIL)
            command = self.tail.popleft()
            if options.validate is not None and not options.validate(command.row):
                raise CallEnded(Ending.VALIDATE)
            # Last look before the motors: an interrupt that returned before this point
            # must not be followed by another step.
            self._check_stop()
            self.pacer.stamp(self.period)
            self._retime(command)
            options.act(command.row)
            self._played(command)
            if self.status.state is not RunStatus.RUNNING:
                self.status.report(RunStatus.RUNNING)
            if self.actions >= options.max_actions:
                return
            self._top_up()
            self._sleep_until(self.pacer.next_due(self.period))

    def _check_stop(self) -> None:
        if self.call.interrupted:
            raise CallEnded(Ending.INTERRUPTED)
        if self.deadline is not None and time.monotonic() >= self.deadline:
            raise CallEnded(Ending.TIMEOUT)

    def _sleep_until(self, due: float) -> None:
        """Wait for the next command's deadline. An answer that lands meanwhile is installed
        at once (and the next request started if it is time), and a staggered request starts
        at its own time, not at the next command."""
        limit = due if self.deadline is None else min(due, self.deadline)
        while True:
            wake_at = limit
            stagger = self._next_stagger()
            if stagger is not None and time.monotonic() < stagger < limit:
                wake_at = stagger
            wake = self.call.wait_for(self._any_done, wake_at)
            if wake is Wake.INTERRUPTED:
                raise CallEnded(Ending.INTERRUPTED)
            self._check_stop()
            if wake is Wake.READY:
                self._take_arrivals()
            elif wake_at >= limit:
                return
            self._top_up()

    def _played(self, command: Command) -> None:
        playing = self.playing
        assert playing is not None
        now = time.monotonic()
        if self.first_act is None:
            self.first_act = now
        else:
            gap = now - self.last_act
            if gap > GAP_PERIODS * self.period:
                self.no_fresh_command_s += gap - self.period
            if self.max_gap_s is None or gap > self.max_gap_s:
                self.max_gap_s = gap
        self.last_act = now
        self.actions += 1
        self.last_row = command.row
        self.report_played += 1
        if command.beyond_horizon:
            self.rows_beyond_horizon += 1
        self.speeds.append(playing.speed)
        self.ages.append(now - playing.captured)
        with self._lock:
            self._position = playing.origin + command.position + command.advance
        self._publish_progress()

    def _publish_progress(self) -> None:
        with self._lock:
            requests = self._requests
        motion_s = 0.0 if self.first_act is None else self.last_act - self.first_act + self.period
        self.progress = RunProgress(
            actions=self.actions, chunks=self.chunks, underruns=self.underruns,
            requests=requests, in_flight=len(self.requests), discarded=self.discarded,
            motion_s=motion_s, rows_beyond_horizon=self.rows_beyond_horizon,
            no_fresh_command_s=self.no_fresh_command_s, speed=self.speed,
        )

    # -- observation and requests (fetch threads) -----------------------------------------

    def _observe(self, capture: Capture) -> Observation:
        """Runs on the request's fetch thread: capture, the caller's observe, the latch."""
        with self._lock:
            capture.sequence = self._next_sequence
            self._next_sequence += 1
            capture.position = self._position
            capture.time = time.monotonic()
        try:
            observation = self.options.observe()
        finally:
            with self._lock:
                self._observe_s += time.monotonic() - capture.time
        if not isinstance(observation, Observation):
            raise TypeError(
                f"observe() returned {type(observation).__name__}; expected a "
                "sequence_ai.Observation (build one with sequence_ai.observation(...))"
            )
        with self._lock:
            text, pending_since = self.session.take_instruction()
            # The instruction a run starts with (act()'s own, or one latched before) is not a
            # swap: only a change after the run's first request is.
            if pending_since is not None and self._observations > 0:
                self._instruction_swaps += 1
                lag = time.monotonic() - pending_since
                if self._max_instruction_lag_s is None or lag > self._max_instruction_lag_s:
                    self._max_instruction_lag_s = lag
            self._observations += 1
        if text is not None and observation.instruction != text:
            observation = observation.with_instruction(text)
        # Checked where it was taken, so a strict failure names the observation that failed.
        self.session.check_observation(observation)
        with self._lock:
            self._requests += 1
        return observation

    # -- requests (driving thread) --------------------------------------------------------

    def _fire(self) -> None:
        capture = Capture()
        fetch = self.session.submit(
            lambda: self._observe(capture), self.options.body, self.call,
            model=self.model, timeout=None, deadline=self.deadline,
        )
        self.requests.append(Request(fetch, capture))
        self.last_fire = time.monotonic()
        self._publish_progress()

    def _any_done(self) -> bool:
        return any(request.fetch.is_done() for request in self.requests)

    def _take_arrivals(self) -> bool:
        """Collect finished requests: install the newest answer if it is newer than the chunk
        playing, discard the rest, raise a failed request's error. True if one installed."""
        done: list[Request] = []
        pending: list[Request] = []
        for request in self.requests:
            (done if request.fetch.is_done() else pending).append(request)
        if not done:
            return False
        self.requests = pending
        self._publish_progress()
        newest: Optional[tuple[Request, Prediction]] = None
        for request in sorted(done, key=lambda r: r.capture.sequence):
            prediction = request.fetch.prediction()
            if request.fetch.warm:
                self.session.note_latency(request.fetch.latency_s)
            self.request_bytes += prediction.request_bytes or 0
            if newest is not None:
                self.discarded += 1
            newest = (request, prediction)
        assert newest is not None
        request, prediction = newest
        # Observed before the chunk playing (an answer overtaken by a newer one), or too late
        # to come to rest by max_seconds as smoothly as the chunk playing will.
        if (
            self.playing is not None and request.capture.sequence <= self.playing.sequence
        ) or not self._install(prediction, request.capture):
            self.discarded += 1
            return False
        return True

    def _refill(self) -> None:
        """Nothing left to play: the first chunk, or wait for a newer one (an underrun)."""
        if self.playing is None and not self.requests:
            self._first_chunk()
            return
        late = self.actions > 0
        wait_start = time.monotonic()
        if late:
            self.status.report(RunStatus.WAITING)
        try:
            while True:
                if not self._newer_in_flight() and len(self.requests) < self.max_in_flight:
                    self._fire()
                limit = self._next_stagger()
                if self.deadline is not None:
                    limit = self.deadline if limit is None else min(limit, self.deadline)
                wake = self.call.wait_for(self._any_done, limit)
                if wake is Wake.INTERRUPTED:
                    raise CallEnded(Ending.INTERRUPTED)
                self._check_stop()
                if self._take_arrivals():
                    return
                if wake is Wake.DEADLINE and len(self.requests) < self.max_in_flight:
                    self._fire()
        finally:
            # Counted even when the wait ends in an interrupt, a timeout or an error.
            if late:
                waited = time.monotonic() - wait_start
                self.underruns += 1
                self.underrun_s += waited
                self._publish_progress()
                if self.options.on_underrun is not None:
                    self.options.on_underrun(waited)

    def _newer_in_flight(self) -> bool:
        playing = self.playing.sequence if self.playing is not None else -1
        with self._lock:
            # Not yet observing: its observation will be newer than anything playing.
            return any(r.capture.sequence < 0 or r.capture.sequence > playing
                       for r in self.requests)

    def _next_stagger(self) -> Optional[float]:
        """When the next staggered request is due (None: none will be)."""
        latency = self.session.latency_s or self.first_latency_s
        if not self.options.prefetch or latency is None or self.max_in_flight < 2:
            return None
        if not self.requests or len(self.requests) >= self.max_in_flight:
            return None
        return self.last_fire + latency / self.max_in_flight

    def _first_chunk(self) -> None:
        budget = self.startup_timeout_s
        if self.deadline is not None:
            budget = min(budget, max(0.0, self.deadline - time.monotonic()))
        capture = Capture()
        fetch = await_first_chunk(
            self.session, self.call, lambda: self._observe(capture), self.options.body,
            model=self.model, budget_s=budget, deadline=self.deadline,
        )
        self.last_fire = fetch.started
        self.first_latency_s = fetch.latency_s
        if fetch.warm:
            self.session.note_latency(fetch.latency_s)
        self.session.mark_served()
        prediction = fetch.prediction()
        self.request_bytes += prediction.request_bytes or 0
        self._install(prediction, capture, first_latency_s=fetch.latency_s)

    def _top_up(self) -> None:
        """Start the next request: staggered at latency / N while others are in flight, and
        with none in flight once the open-loop horizon left falls to the lead time."""
        if not self.options.prefetch or len(self.requests) >= self.max_in_flight:
            return
        playing = self.playing
        assert playing is not None
        with self._lock:
            position = self._position - playing.origin
        # Commands left before the playing chunk leaves its open-loop horizon.
        horizon_left = min(max(0.0, playing.horizon_end - position) / playing.speed,
                           len(self.tail))
        # Never fetch beyond what max_actions still needs.
        if self.actions + horizon_left >= self.options.max_actions:
            return
        now = time.monotonic()
        latency = self.session.latency_s
        if (
            self.deadline is not None and latency is not None
            and now + latency >= self.deadline - self.ramp_s
        ):
            return
        if self.requests:
            due = self._next_stagger()
            if due is None or now < due:
                return
        else:
            # No warm sample yet: fire now (one step of this chunk has been played).
            lead = math.inf if latency is None else LEAD_FACTOR * latency + self.period
            if horizon_left * self.period > lead:
                return
        self._fire()

    # -- installing a chunk ---------------------------------------------------------------

    def _install(
        self, prediction: Prediction, capture: Capture, first_latency_s: Optional[float] = None
    ) -> bool:
        """Replace what is playing with ``prediction`` from its due row; False (nothing
        changed) when too little time is left before max_seconds to bring it to rest."""
        options = self.options
        chunk = prediction.action_chunk
        rows = controller_rows(options.controller, prediction, self.model)
        # Row i of a chunk is planned for i rows of playback after its observation: the rows
        # played since then are past, so playback starts at the row due now (never rewinding
        # the arm to where it was when the request left).
        due = max(0.0, self._position - capture.position)
        # A chunk's horizons agree with the catalogue's (checked on arrival).
        horizon = options.open_loop_horizon or chunk.open_loop_horizon or len(rows)
        if not options.prefetch:
            # Strictly closed loop: a horizon from the due row, then a fresh observation.
            rows = rows[: int(math.floor(due)) + horizon]
        chunk_rows = (self.model.action_horizon if self.model is not None else None) or len(rows)
        ramp_rows = ramp_rows_for(self.period, chunk_rows)
        speed = self._speed_for(chunk_rows, first_latency_s)
        # A full slow-down at this speed, in commands.
        ramp_commands = 2 * ramp_rows / speed
        first_due = self.pacer.upcoming(self.period)
        # Come to rest a period before max_seconds: an act() goal ends at rest, not mid-stride.
        rest_within = (
            None if self.deadline is None
            else math.ceil((self.deadline - first_due) / self.period) - 1
        )
        if rest_within is not None and self.resting_for_deadline and rest_within <= ramp_commands:
            return False
        absolute = (
            options.controller is Controller.JOINT_POSITION
            or is_absolute_space(chunk.action_space)
        )
        commands = commands_for(
            rows, due, speed=speed, horizon=horizon, absolute=absolute,
            gripper_dims=self.gripper_dims, ramp_rows=ramp_rows,
            rest_within=rest_within, at_most=options.max_actions - self.actions,
        )
        if not commands:
            return False
        self.tail = deque(self._seam(commands, absolute))
        self.speed = speed
        self.ramp_s = (ramp_commands + 1) * self.period
        self.resting_for_deadline = rest_within is not None and len(commands) >= rest_within
        self.chunks += 1
        self.playing = Playing(
            number=self.chunks, sequence=capture.sequence, origin=capture.position,
            captured=capture.time, horizon_end=due + horizon, speed=speed,
        )
        self.action_space = chunk.action_space
        self._publish_progress()
        if options.on_chunk is not None:
            options.on_chunk(prediction)
        self._report(first_due, list(self.tail))
        return True

    def _speed_for(self, chunk_rows: int, first_latency_s: Optional[float]) -> float:
        """The playback speed of the chunk being installed."""
        latency, latency_high = self.session.latency_s, self.session.latency_high_s
        if latency is None and first_latency_s is not None:
            # No warm sample yet: the first request's own round trip, with the spread the
            # latency average starts from (a cold start in it errs on the slow, safe side).
            latency, latency_high = first_latency_s, 2.0 * first_latency_s
        target = auto_speed(
            chunk_rows=chunk_rows, period_s=self.period, latency_s=latency,
            latency_high_s=latency_high, in_flight=self.max_in_flight,
        )
        # The first chunk starts from rest: no seam to keep the speed change small at.
        previous = target if self.playing is None else self.speed
        return next_speed(self.speed_setting, previous, target)

    def _seam(self, commands: list[Command], absolute: bool) -> list[Command]:
        """Measure the jump from the last command to the new first one; blend it away over
        ``smooth_seam`` commands where the rows are targets."""
        if self.last_row is None:
            return commands
        # Measured on the rows act will receive, before any blending can hide the jump.
        jump = seam_jump(commands[0].row, self.last_row, self.gripper_dims)
        if jump is not None and (self.max_seam_jump is None or jump > self.max_seam_jump):
            self.max_seam_jump = jump
        if self.options.smooth_seam <= 0 or not absolute:
            return commands
        blended = [list(command.row) for command in commands]
        blend_seam(blended, self.last_row, self.options.smooth_seam, self.gripper_dims)
        return [dataclasses.replace(command, row=row) for command, row in zip(commands, blended)]

    def _report(self, first_due: float, commands: list[Command]) -> None:
        """Tell ``on_rows`` what will be played from ``first_due`` on."""
        self.report_due = first_due
        self.report_played = 0
        if self.options.on_rows is None or self.playing is None:
            return
        self.reports += 1
        speed = self.playing.speed
        beyond = [k for k, command in enumerate(commands) if command.beyond_horizon]
        # The ramp starts where a command advances the plan less than the speed.
        slowing = [k for k, command in enumerate(commands) if command.advance < speed - 1e-9]
        self.options.on_rows(InstalledRows(
            rows=[list(command.row) for command in commands],
            first_due=first_due,
            period_s=self.period,
            speed=speed,
            sequence=self.reports,
            chunk=self.playing.number,
            start=commands[0].position if commands else 0.0,
            horizon_index=beyond[0] if beyond else len(commands),
            ramp_index=slowing[0] if slowing else len(commands),
        ))

    def _retime(self, command: Command) -> None:
        """A step handed out more than half a period off the reported schedule (the driving
        thread was late): report the remaining rows again, from this one, at their new times."""
        expected = self.report_due + self.report_played * self.period
        if abs(self.pacer.due - expected) > self.period / 2:
            self._report(self.pacer.due, [command, *self.tail])
