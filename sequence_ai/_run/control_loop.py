"""``RunLoop``: drives one ``run()``/``act()`` through a Session, a call handle and RunOptions.

Requests in flight (each observes on its own thread; ``RequestScheduler`` times them), the
newest chunk installed from its due row (``Playhead``), pacing, interrupt and the hold on every
early end. What happens is published as typed events (``events.py``); the outcome, the progress
and ``on_status`` are observers of them. See ``docs/control-loop.md`` for the narrative.
"""

from __future__ import annotations

import math
import time
import warnings
from typing import Callable, Optional

from .._model.actions import angle_columns, gripper_columns
from .._model.catalogue import Model
from .._model.controllers import Controller, check_controller, controller_rows, is_absolute_space
from .._playback.playback import Command
from .._playback.playhead import Playhead, Playing, RowsReport, installed_events
from .._requests.calls import CallEnded, CallHandle, Wake
from .._requests.session import Session
from .._requests.warmup import await_first_chunk
from ..events import (
    AnswerArrived,
    ChunkDiscarded,
    ChunkRefused,
    EventStream,
    HoldCommanded,
    RequestStarted,
    RowPlayed,
    RunEnded,
    RunEvent,
    RunStarted,
    UnderrunBegan,
    UnderrunEnded,
)
from ..options import RunOptions
from ..outcome import Ending, RunOutcome
from ..types import Prediction
from .capture import Captures
from .run_stats import GAP_PERIODS, RunStats
from .scheduling import LEAD_FACTOR, Capture, Request, RequestScheduler
from .status import StatusReporter

__all__ = ["GAP_PERIODS", "LEAD_FACTOR", "RunLoop", "playback_hz"]


def playback_hz(session: Session, model: Optional[Model]) -> float:
    """The rate steps are handed to act: ``connect(control_hz=)``, else the catalogue's.

    Never a response's: a chunk declaring another rate is refused, not obeyed.
    """
    if session.defaults.control_hz is not None:
        return session.defaults.control_hz
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


def hold_once(
    hold: Callable[[], object], ending: Ending, error: Optional[BaseException],
    publish: Callable[[RunEvent], None],
) -> tuple[Ending, Optional[BaseException]]:
    """Call ``hold`` once on an early ending; an error it raises becomes the run's error unless
    the run already had one (then it is warned about)."""
    failed: Optional[BaseException] = None
    try:
        hold()
    except BaseException as hold_exc:
        failed = hold_exc
        if error is None:
            ending, error = Ending.RAISED, hold_exc
        else:
            warnings.warn(
                f"hold() raised {hold_exc!r} while stopping after {error!r}",
                RuntimeWarning,
                stacklevel=4,
            )
    publish(HoldCommanded(
        time=time.monotonic(), error=None if failed is None else type(failed).__name__
    ))
    return ending, error


def with_outcome(error: BaseException, outcome: RunOutcome) -> BaseException:
    """``error`` with the run's outcome attached as ``error.outcome`` (where it can be)."""
    try:
        error.outcome = outcome  # type: ignore[attr-defined]
    except AttributeError:
        pass
    return error


def startup_budget(session: Session, options: RunOptions, deadline: Optional[float]) -> float:
    """How long the first chunk may take: startup_timeout_s, and no later than max_seconds."""
    budget = (
        session.defaults.startup_timeout_s if options.startup_timeout_s is None
        else float(options.startup_timeout_s)
    )
    if deadline is not None:
        budget = min(budget, max(0.0, deadline - time.monotonic()))
    return budget


def playhead_for(
    session: Session, options: RunOptions, model: Optional[Model], period_s: float
) -> Playhead:
    speed = options.playback_speed if options.playback_speed is not None else (
        session.defaults.playback_speed)
    grippers = sorted(gripper_columns(model)) if model is not None else []
    angles = sorted(angle_columns(model)) if model is not None else []
    return Playhead(
        period_s, speed, grippers, options.smooth_seam, angles, options.seam_limits
    )


def rows_to_play(
    options: RunOptions, model: Optional[Model], prediction: Prediction, due: float
) -> tuple[list[list[float]], int, int]:
    """The rows of a chunk the controller hands to act, its open-loop horizon, and the
    catalogue's chunk length (what the rest ramp and the speed are sized by)."""
    rows = controller_rows(options.controller, prediction, model)
    # A chunk's horizons agree with the catalogue's (checked on arrival).
    horizon = options.open_loop_horizon or prediction.action_chunk.open_loop_horizon or len(rows)
    if not options.prefetch:
        # Strictly closed loop: a horizon from the due row, then a fresh observation.
        rows = rows[: int(math.floor(due)) + horizon]
    chunk_rows = (model.action_horizon if model is not None else None) or len(rows)
    return rows, horizon, chunk_rows


class RunLoop:
    """One run. The driving thread (the caller of ``execute``) owns everything but
    ``captures`` and ``stats``; fetch threads reach the run only through ``captures``, the
    call handle and the event stream."""

    def __init__(self, session: Session, call: CallHandle, options: RunOptions) -> None:
        self.session = session
        self.call = call
        self.options = options
        # The catalogue row sets the playback rate and is what every chunk is checked
        # against; None only for an unlisted model given connect(control_hz=).
        self.model: Optional[Model] = session.spec()
        self.period = 1.0 / playback_hz(session, self.model)
        check_controller(options.controller, self.model, session.model_id)
        started = time.monotonic()
        # Both moved by a hand-over (handover.py, from any thread: plain attribute writes).
        self.deadline = None if options.max_seconds is None else started + options.max_seconds
        # run() refuses options without max_actions; act() sets it from max_seconds.
        assert options.max_actions is not None
        self.max_actions = options.max_actions
        self.stats = RunStats(lambda: session.transport.connections_opened)
        status = StatusReporter(options.on_status, options.progress)
        # The run's own observers, inline: they count and report; the caller's on a thread.
        self.events = EventStream([self.stats.on_event, status.on_event], options.observers)
        self.captures = Captures(session, options.observe, self.events.publish)
        self.scheduler = RequestScheduler(
            options.max_in_flight or session.defaults.max_in_flight, options.prefetch,
            self.captures.lock,
        )
        self.playhead = playhead_for(session, options, self.model, self.period)
        self.rows = RowsReport(options.on_rows, self.period)
        self.actions = 0

    # -- the loop -------------------------------------------------------------------------

    def execute(self) -> RunOutcome:
        """Run to an ending; hold once on every early one; re-raise errors with the outcome."""
        ending = Ending.COMPLETED
        error: Optional[BaseException] = None
        # Steps left by predict() belong to another observation; runs never use them.
        self.session.buffer.clear()
        try:
            try:
                self.events.start()
                self.events.publish(RunStarted(
                    time=time.monotonic(), period_s=self.period,
                    max_in_flight=self.scheduler.max_in_flight,
                ))
                self._loop()
            except CallEnded as end:
                ending = end.ending
            except BaseException as exc:
                ending, error = Ending.RAISED, exc
            # Requests still in flight are abandoned, their connections closed; nothing of them
            # is played.
            self.session.abandon_requests()
            self.playhead.stop()
            self.scheduler.abandon()
            if ending is not Ending.COMPLETED and self.options.hold is not None:
                ending, error = hold_once(self.options.hold, ending, error, self.events.publish)
        finally:
            try:
                self.events.publish(RunEnded(
                    time=time.monotonic(), ending=ending,
                    error=None if error is None else type(error).__name__,
                ))
            finally:
                self.events.close()
        outcome = self.stats.outcome(ending, error)
        if error is not None:
            raise with_outcome(error, outcome)
        return outcome

    def _loop(self) -> None:
        options, playhead = self.options, self.playhead
        while self.actions < self.max_actions:
            self._check_stop()
            self._take_arrivals()
            if not playhead.tail:
                if playhead.rest_deadline is not None:
                    self._rest(playhead.rest_deadline)
                self._refill()
                self._check_stop()
                if not playhead.tail:
                    # The first answer came too late to be played and brought to rest by
                    # max_seconds (later answers that cannot be are not installed at all).
                    raise CallEnded(Ending.TIMEOUT)
            if options.until is not None and options.until():
                raise CallEnded(Ending.UNTIL)
            command = playhead.next_command()
            if options.validate is not None and not options.validate(command.row):
                raise CallEnded(Ending.VALIDATE)
            # Last look before the motors: an interrupt that returned before this point
            # must not be followed by another step.
            self._check_stop()
            playhead.pacer.stamp(self.period)
            playing = playhead.playing
            assert playing is not None  # the command came from the chunk installed as playing
            self.rows.retime(playhead.pacer.due, playing, command, playhead.tail)
            options.act(command.row)
            self._played(command)
            if self.actions >= self.max_actions:
                return
            self._top_up()
            self._sleep_until(playhead.pacer.next_due(self.period))

    def _rest(self, deadline: float) -> None:
        """The tail came to rest for ``deadline``: wait for it to end the run, unless a
        hand-over moves it meanwhile (then the next chunk is fetched from rest)."""
        wake = self.call.wait_for(lambda: self.deadline != deadline, deadline)
        if wake is Wake.INTERRUPTED:
            raise CallEnded(Ending.INTERRUPTED)
        self._check_stop()
        self.playhead.rest_deadline = None

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
            stagger = self.scheduler.next_stagger(
                self.session.latency_s, self.captures.position()
            )
            if stagger is not None and time.monotonic() < stagger < limit:
                wake_at = stagger
            wake = self.call.wait_for(self.scheduler.any_done, wake_at)
            if wake is Wake.INTERRUPTED:
                raise CallEnded(Ending.INTERRUPTED)
            self._check_stop()
            if wake is Wake.READY:
                self._take_arrivals()
            elif wake_at >= limit:
                return
            self._top_up()

    def _played(self, command: Command) -> None:
        playing = self.playhead.playing
        assert playing is not None
        now = time.monotonic()
        self.actions += 1
        self.rows.played()
        self.captures.advance(self.playhead.played(command))
        self.events.publish(RowPlayed(
            time=now, action=self.actions, row=tuple(command.row), chunk=playing.number,
            speed=playing.speed, beyond_horizon=command.beyond_horizon,
            observation_age_s=now - playing.captured,
        ))

    # -- requests (driving thread) --------------------------------------------------------

    def _fire(self) -> None:
        capture = Capture()
        fetch = self.session.submit(
            lambda: self.captures.observe(capture), self.options.body, self.call,
            model=self.model, timeout=None, deadline=self.deadline,
        )
        now = time.monotonic()
        self.scheduler.started(Request(fetch, capture), now, self.captures.position())
        self.events.publish(RequestStarted(time=now, in_flight=self.scheduler.in_flight))

    def _arrived(self, capture: Capture, prediction: Prediction) -> None:
        self.events.publish(AnswerArrived(
            time=time.monotonic(), sequence=capture.sequence,
            request_bytes=prediction.request_bytes or 0, in_flight=self.scheduler.in_flight,
        ))

    def _take_arrivals(self) -> bool:
        """Collect finished requests: install the newest answer if it is newer than the chunk
        playing, discard the rest, raise a failed request's error. True if one installed."""
        newest: Optional[tuple[Request, Prediction]] = None
        for request in self.scheduler.take_done():
            prediction = request.fetch.prediction()
            if request.fetch.warm:
                self.session.note_latency(request.fetch.latency_s)
            self._arrived(request.capture, prediction)
            if newest is not None:
                older = newest[0].capture.sequence
                self.events.publish(ChunkDiscarded(time=time.monotonic(), sequence=older))
            newest = (request, prediction)
        if newest is None:
            return False
        request, prediction = newest
        playing = self.playhead.playing
        # Observed before the chunk playing: an answer overtaken by a newer one.
        if playing is not None and request.capture.sequence <= playing.sequence:
            stale = request.capture.sequence
            self.events.publish(ChunkDiscarded(time=time.monotonic(), sequence=stale))
            return False
        return self._install(prediction, request.capture)

    def _refill(self) -> None:
        """Nothing left to play: the first chunk, or wait for a newer one (an underrun)."""
        scheduler = self.scheduler
        playing = self.playhead.playing
        if playing is None and not scheduler.requests:
            self._first_chunk()
            return
        late = self.actions > 0
        wait_start = time.monotonic()
        if late:
            self.events.publish(UnderrunBegan(time=wait_start))
        try:
            while True:
                if (
                    not scheduler.newer_in_flight(-1 if playing is None else playing.sequence)
                    and scheduler.has_room
                ):
                    self._fire()
                limit = scheduler.next_stagger(self.session.latency_s, self.captures.position())
                if self.deadline is not None:
                    limit = self.deadline if limit is None else min(limit, self.deadline)
                wake = self.call.wait_for(scheduler.any_done, limit)
                if wake is Wake.INTERRUPTED:
                    raise CallEnded(Ending.INTERRUPTED)
                self._check_stop()
                if self._take_arrivals():
                    return
                if wake is Wake.DEADLINE and scheduler.has_room:
                    self._fire()
        finally:
            # Counted even when the wait ends in an interrupt, a timeout or an error.
            if late:
                now = time.monotonic()
                self.events.publish(UnderrunEnded(time=now, waited_s=now - wait_start))
                if self.options.on_underrun is not None:
                    self.options.on_underrun(now - wait_start)

    def _first_chunk(self) -> None:
        capture = Capture()
        fetch = await_first_chunk(
            self.session, self.call, lambda: self.captures.observe(capture), self.options.body,
            model=self.model, budget_s=startup_budget(self.session, self.options, self.deadline),
            deadline=self.deadline,
        )
        self.scheduler.first_answered(fetch.started, fetch.latency_s)
        if fetch.warm:
            self.session.note_latency(fetch.latency_s)
        self.session.mark_served()
        prediction = fetch.prediction()
        self._arrived(capture, prediction)
        self._install(prediction, capture, first_latency_s=fetch.latency_s)

    def _top_up(self) -> None:
        """Start the next request when the scheduler says it is time."""
        scheduler = self.scheduler
        if not scheduler.prefetch or not scheduler.has_room:
            return
        horizon_left = self.playhead.horizon_left(self.captures.position())
        # Never fetch beyond what max_actions still needs.
        if self.actions + horizon_left >= self.max_actions:
            return
        if scheduler.top_up_due(
            now=time.monotonic(), latency_s=self.session.latency_s,
            position=self.captures.position(), horizon_left=horizon_left, period_s=self.period,
            stop_by=None if self.deadline is None else self.deadline - self.playhead.ramp_s,
        ):
            self._fire()

    # -- installing a chunk ---------------------------------------------------------------

    def _install(
        self, prediction: Prediction, capture: Capture, first_latency_s: Optional[float] = None
    ) -> bool:
        """Replace what is playing with ``prediction`` from its due row; False (nothing
        changed, the chunk refused) when too little time is left before max_seconds to bring
        it to rest."""
        options, playhead = self.options, self.playhead
        # Row i of a chunk is planned for i rows of playback after its observation: the rows
        # played since then are past, so playback starts at the row due now (never rewinding
        # the arm to where it was when the request left).
        due = max(0.0, self.captures.position() - capture.position)
        rows, horizon, chunk_rows = rows_to_play(options, self.model, prediction, due)
        speed = playhead.speed_for(
            chunk_rows, self.session.latency_s, self.session.latency_high_s,
            self.scheduler.max_in_flight, first_latency_s=first_latency_s,
        )
        playing = Playing(
            number=1 if playhead.playing is None else playhead.playing.number + 1,
            sequence=capture.sequence, origin=capture.position, captured=capture.time,
            horizon_end=due + horizon, speed=speed, instruction=capture.instruction,
        )
        installed = playhead.install(
            rows, playing, due=due, horizon=horizon,
            absolute=(
                options.controller is Controller.JOINT_POSITION
                or is_absolute_space(prediction.action_chunk.action_space)
            ),
            chunk_rows=chunk_rows, deadline=self.deadline,
            at_most=self.max_actions - self.actions,
        )
        now = time.monotonic()
        if installed is None:
            self.events.publish(ChunkRefused(time=now, sequence=capture.sequence))
            return False
        self.scheduler.installed(horizon)
        for event in installed_events(now, prediction, playing, installed, len(playhead.tail)):
            self.events.publish(event)
        if options.on_chunk is not None:
            options.on_chunk(prediction)
        self.rows.installed(installed.first_due, playing, list(playhead.tail))
        return True
