"""``connect()`` and ``Policy``: the front of one model's Session.

``Policy`` checks arguments, keeps one thread driving at a time and hands the work to the
``Session`` (state across calls), ``warmup`` (first request) and ``RunLoop`` (run/act).
"""

from __future__ import annotations

import contextlib
import dataclasses
import threading
import time
import warnings
from collections.abc import Iterator
from typing import Callable, Optional, Union

from ._model.catalogue import Model, full_model_id
from ._platform.adapter import Adapter
from ._platform.link import DeploymentLink
from ._playback.speed import PlaybackSpeed, check_playback_speed
from ._requests.calls import CallHandle, Wake
from ._requests.predict import predict_chunk
from ._requests.session import VALIDATE_MODES, Session, WarmingCallback
from ._run.control_loop import RunLoop
from ._run.handover import actions_for, check_instruction, hand_over
from ._transport.connection import Connection, ConnectionSetting, connection_of
from ._transport.deadline import Exchange
from .errors import ChunkExhausted, RateLimited, SequencesError, Unavailable
from .options import RunOptions, check_max_in_flight, positive_seconds, run_options_of
from .outcome import RunOutcome, RunProgress
from .types import Observation, Prediction

__all__ = ["Policy", "connect"]

DEFAULT_STARTUP_TIMEOUT_S = 300.0

Row = list[float]


def connect(
    model: Union[str, Model],
    *,
    connection: Optional[Connection] = None,
    validate: str = "warn",
    control_hz: Optional[float] = None,
    startup_timeout_s: float = DEFAULT_STARTUP_TIMEOUT_S,
    on_warming: Optional[WarmingCallback] = None,
    max_in_flight: int = 1,
    playback_speed: PlaybackSpeed = 1.0,
    adapter: Optional[Adapter] = None,
    **settings: ConnectionSetting,
) -> Policy:
    """Open a ``Policy`` for ``model`` (use it as a context manager).

    Sends nothing: no request is made until the Policy is used. ``connection=`` (or its
    fields as keywords: ``api_key``, ``base_url``, ``timeout_s``, ``verify``,
    ``allow_insecure``) says where the service is. ``max_in_flight`` and ``playback_speed``
    are the defaults of every ``run``/``act`` (each may override them).
    ``protocol="deployment"`` (a ``Connection`` field) drives a deployment of the account over
    the platform's protocol; it needs ``adapter=`` (``load_adapter``), what its inputs and
    outputs mean to the robot. The default, ``"shared-model"``, calls ``POST /v1/act``.
    """
    # Spelled out, not **kwargs: this is the signature users and their editors read.
    return Policy(
        model,
        connection_of(connection, settings, "connect"),
        validate=validate,
        control_hz=control_hz,
        startup_timeout_s=startup_timeout_s,
        on_warming=on_warming,
        max_in_flight=max_in_flight,
        playback_speed=playback_speed,
        adapter=adapter,
    )


class Policy:
    """A handle on one model: ``predict``/``next_action`` for caller-owned loops, ``run``/``act``
    for the built-in prefetching loop. One thread drives a Policy at a time; ``interrupt()``,
    ``ready()``, ``spec()`` and ``close()`` are safe from any thread.
    """

    def __init__(
        self,
        model: Union[str, Model],
        connection: Optional[Connection] = None,
        *,
        validate: str = "warn",
        control_hz: Optional[float] = None,
        startup_timeout_s: float = DEFAULT_STARTUP_TIMEOUT_S,
        on_warming: Optional[WarmingCallback] = None,
        max_in_flight: int = 1,
        playback_speed: PlaybackSpeed = 1.0,
        adapter: Optional[Adapter] = None,
        **settings: ConnectionSetting,
    ) -> None:
        if isinstance(model, Model):
            model = model.id
        if not isinstance(model, str) or not model.strip():
            raise ValueError(f"model is {model!r}; expected a model id such as 'pi05-droid'")
        if validate not in VALIDATE_MODES:
            raise ValueError(f"validate is {validate!r}; expected one of {VALIDATE_MODES}")
        positive_seconds("control_hz", control_hz, allow_none=True, unit="Hz")
        positive_seconds("startup_timeout_s", startup_timeout_s, allow_none=False, allow_zero=True)
        if on_warming is not None and not callable(on_warming):
            raise TypeError(f"on_warming is {on_warming!r}; expected a callable(waited_s, eta_s)")
        check_max_in_flight("max_in_flight", max_in_flight)
        speed = check_playback_speed("playback_speed", playback_speed)
        chosen = connection_of(connection, settings, "Policy")
        deployment = chosen.protocol == "deployment"
        if deployment and not isinstance(adapter, Adapter):
            raise TypeError(f"protocol='deployment' needs adapter= a sequence_ai.Adapter "
                            f"(sequence_ai.load_adapter(...)); got {adapter!r}")
        if not deployment and adapter is not None:
            raise ValueError("adapter= is for protocol='deployment'; a shared model's rows "
                             "come from its catalogue row")
        transport = chosen.transport()
        self._session = Session(
            model.strip() if deployment else full_model_id(model.strip()),
            transport,
            validate=validate,
            control_hz=None if control_hz is None else float(control_hz),
            startup_timeout_s=float(startup_timeout_s),
            on_warming=on_warming,
            max_in_flight=max_in_flight,
            playback_speed=speed,
            adapter=adapter,
        )
        # Re-entrant so next_action -> predict and act -> run work on the driving thread;
        # acquired without blocking so a second driver is refused, never queued.
        # Lock order 1 (docs/architecture.md, "lock order"): held for a whole call.
        self._driver = threading.RLock()
        # Owned by the driving thread (the holder of _driver).
        self._warned_no_validate = False
        # The running loop (None: no run): set and cleared by the driving thread, read by any
        # (`progress`).
        self._loop: Optional[RunLoop] = None

    # -- properties and lifecycle ----------------------------------------------------------

    @property
    def model(self) -> str:
        """The full model id."""
        return self._session.model_id

    @property
    def protocol(self) -> str:
        """"deployment" (the platform's protocol) or "shared-model" (``POST /v1/act``)."""
        return "shared-model" if self._session.link is None else "deployment"

    @property
    def buffered(self) -> int:
        """Steps left of the last ``predict``/``next_action`` (a run discards them)."""
        return len(self._session.buffer)

    @property
    def progress(self) -> Optional[RunProgress]:
        """The running ``run``/``act`` so far, or None when none runs. Safe from any thread."""
        loop = self._loop
        return None if loop is None else loop.stats.progress()

    @property
    def connections_opened(self) -> int:
        """Connections this Policy has opened (handshakes); kept-alive ones count once."""
        link = self._session.link
        worker = 0 if link is None else link.connections_opened
        return self._session.transport.connections_opened + worker

    @property
    def instruction(self) -> Optional[str]:
        """The instruction latch: overrides every observation's instruction while set."""
        return self._session.instruction

    @property
    def closed(self) -> bool:
        return self._session.closed

    def __repr__(self) -> str:
        state = "closed" if self.closed else "open"
        base_url = self._session.transport.base_url
        return f"Policy({self.model!r}, base_url={base_url!r}, {state})"

    def __enter__(self) -> Policy:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def close(self) -> None:
        """Stop any running call, close the connection and join the fetch threads. Idempotent."""
        self._session.close(join_s=self._session.transport.timeout_s)

    def interrupt(self) -> None:
        """Stop every open call within one control period. Any thread; a no-op when idle.

        To stop one call among several, pass it a ``CallHandle`` and interrupt that.
        """
        self._session.interrupt_all()

    def set_instruction(self, text: str) -> None:
        """Change the instruction of every request built from now on (same text: no-op)."""
        check_instruction(text)
        self._session.set_instruction(text)

    def hand_over(self, instruction: str, *, max_seconds: float) -> bool:
        """Hand the running ``act()`` over to ``instruction`` without stopping it: its next
        request carries it, its first chunk drops the old rows still queued
        (``InstructionHandedOver``), and the run now ends ``max_seconds`` from now. Any
        thread; False (nothing changed) when no run is under way."""
        return hand_over(self._session, self._loop, instruction, max_seconds)

    # -- a deployment's episodes -----------------------------------------------------------

    def end_episode(self) -> Optional[str]:
        """End the deployment's current episode (each ``run``/``act`` ends its own); its id,
        or None when none was open."""
        return self._link("end_episode").end_episode()

    def label(self, success: bool, notes: str = "", *, episode: Optional[str] = None) -> str:
        """Record how an episode went (the current one, else the last ended); its id."""
        if not isinstance(success, bool):
            raise TypeError(f"success is {success!r}; expected True or False")
        if not isinstance(notes, str):
            raise TypeError(f"notes is {notes!r}; expected a string")
        return self._link("label").label(success, notes, episode)

    def _link(self, method: str) -> DeploymentLink:
        self._session.check_open(method)
        link = self._session.link
        if link is None:
            raise SequencesError(f"{method}() is for a deployment (protocol='deployment'); "
                                 "a shared model keeps no episodes")
        return link

    # -- read-only calls -------------------------------------------------------------------

    def spec(self) -> Optional[Model]:
        """This model's catalogue row (None if not listed), fetched on this Policy's connection.

        Cached once fetched; a failed fetch raises and is retried on the next call. Safe from
        any thread, also while another thread drives the Policy.
        """
        return self._session.spec()

    def ready(
        self, *, timeout: Optional[float] = None, exchange: Optional[Exchange] = None
    ) -> tuple[bool, Optional[float]]:
        """``(ready, eta_s)``; polling a cold model starts loading it. Not billed.

        Safe from any thread, also while another thread drives the Policy. ``timeout`` bounds
        the check (the connection's ``timeout_s`` when None); ``exchange.abort()`` from another
        thread ends it at once.
        """
        return self._session.ready(timeout=timeout, exchange=exchange)

    def wait_until_ready(
        self, timeout_s: float = 300.0, poll_s: float = 5.0, *, call: Optional[CallHandle] = None
    ) -> float:
        """Poll ``ready()`` until the model is loaded; returns the seconds waited.

        Needs no observation. Raises ``Unavailable`` (warming) after ``timeout_s``, and
        ``SequencesError`` if interrupted meanwhile.
        """
        positive_seconds("timeout_s", timeout_s, allow_none=False, allow_zero=True)
        positive_seconds("poll_s", poll_s, allow_none=False)
        with self._session.open_call("wait_until_ready", call) as handle:
            start = time.monotonic()
            deadline = start + timeout_s
            while not handle.interrupted:
                is_ready, eta_s = self.ready()
                now = time.monotonic()
                if is_ready:
                    return now - start
                if now >= deadline:
                    raise Unavailable(
                        f"{self.model} was not ready after {timeout_s:g}s "
                        f"(full load takes about {eta_s}s)",
                        status=503,
                        retry_after_s=eta_s,
                        warming=True,
                    )
                if handle.sleep_until(min(now + poll_s, deadline)) is Wake.INTERRUPTED:
                    break
        raise SequencesError("wait_until_ready() was interrupted")

    # -- caller-owned loops ----------------------------------------------------------------

    def predict(
        self, observation: Observation, *, call: Optional[CallHandle] = None, **options: object
    ) -> Prediction:
        """One request; the whole chunk. Replaces the buffer with its executable steps."""
        with self._drive("predict"):
            self._refuse_inside_run("predict")
            return predict_chunk(self._session, observation, options, call)

    def next_action(
        self,
        observation: Optional[Observation] = None,
        *,
        call: Optional[CallHandle] = None,
        **options: object,
    ) -> Row:
        """The next buffered step; fetches a chunk from ``observation`` when the buffer is empty."""
        with self._drive("next_action"):
            self._refuse_inside_run("next_action")
            buffer = self._session.buffer
            if not buffer:
                if observation is None:
                    raise ChunkExhausted(
                        "next_action() has no buffered step and was given no observation; "
                        "pass the current observation on every call"
                    )
                predict_chunk(self._session, observation, options, call)
            return buffer.popleft()

    # -- the built-in loop -----------------------------------------------------------------

    def run(
        self,
        observe: Optional[Callable[[], Observation]] = None,
        act: Optional[Callable[[Row], object]] = None,
        *,
        options: Optional[RunOptions] = None,
        call: Optional[CallHandle] = None,
        **keywords: object,
    ) -> RunOutcome:
        """Drive ``act`` from ``observe`` until ``max_actions`` or an earlier ending.

        ``options=`` a ``RunOptions`` holds the callbacks, bounds and choices; as a convenience
        its fields may be given as keywords instead (``run(observe, act, max_actions=40,
        validate=check)``), and any other keyword is a field of every request body.
        Returns a ``RunOutcome``; an error from a callback or the service is re-raised with
        the outcome attached as ``exc.outcome``. ``hold`` is called once on every early end.
        ``call=`` a ``CallHandle`` lets another thread stop exactly this run; ``observers``
        receive the run's events (``sequence_ai.events``) on a thread of their own. ``observe`` runs
        on the requests' own threads, never on the caller's (docs/control-loop.md).
        """
        run_options = run_options_of(options, observe, act, keywords, "run")
        if run_options.max_actions is None:
            raise TypeError("run() needs max_actions (act() is the run bounded by max_seconds)")
        with self._drive("run"):
            self._refuse_inside_run("run")
            if run_options.validate is None and not self._warned_no_validate:
                self._warned_no_validate = True
                warnings.warn(
                    "run() without validate=: no safety check stands between the model's "
                    "output and act(); pass validate= on real hardware",
                    UserWarning,
                    stacklevel=3,
                )
            with self._session.open_call("run", call) as handle:
                if self._session.link is not None:
                    self._await_deployment(handle, run_options)
                loop = RunLoop(self._session, handle, run_options)
                self._loop = loop
                try:
                    return loop.execute()
                finally:
                    self._loop = None
                    self._end_run_episode()

    def act(
        self,
        instruction: str,
        observe: Optional[Callable[[], Observation]] = None,
        act: Optional[Callable[[Row], object]] = None,
        *,
        options: Optional[RunOptions] = None,
        call: Optional[CallHandle] = None,
        **keywords: object,
    ) -> RunOutcome:
        """``run()`` bounded by ``max_seconds`` with ``instruction`` on every request it makes.

        ``max_seconds=`` is required: as a keyword, or set in ``options=`` (as for ``run()``,
        with no ``max_actions``).
        """
        check_instruction(instruction)
        if "max_actions" in keywords or (options is not None and options.max_actions is not None):
            raise ValueError("act() is bounded by max_seconds; do not pass max_actions")
        if options is None and "max_seconds" not in keywords:
            raise TypeError("act() missing required keyword argument: 'max_seconds'")
        if options is not None and options.max_seconds is None:
            raise TypeError("act() needs options with max_seconds set")
        seconds = keywords["max_seconds"] if options is None else options.max_seconds
        positive_seconds("max_seconds", seconds, allow_none=False)
        run_options = run_options_of(options, observe, act, keywords, "act")
        assert run_options.max_seconds is not None
        bounded = dataclasses.replace(
            run_options, max_actions=actions_for(run_options.max_seconds)
        )
        # The guard comes first: a refused act() must not touch the running call's latch.
        with self._drive("act"):
            self._session.set_instruction(instruction)
            try:
                return self.run(options=bounded, call=call)
            finally:
                self._session.clear_instruction()

    # -- a deployment's run ----------------------------------------------------------------

    def _await_deployment(self, handle: CallHandle, options: RunOptions) -> None:
        """Connect before the run (its rate comes from the answer), waiting out a warming or
        busy deployment within the startup budget; an interrupt ends the wait at once."""
        link = self._session.link
        assert link is not None
        start = time.monotonic()
        budget_end = start + self._session.defaults.startup_timeout_s
        while True:
            try:
                link.connect()
                return
            except Unavailable as exc:
                if not (exc.warming or isinstance(exc, RateLimited)):
                    raise
                now = time.monotonic()
                if now >= budget_end:
                    raise
                if exc.warming and self._session.on_warming is not None:
                    self._session.on_warming(now - start, exc.retry_after_s)
                pause = min(max(exc.retry_after_s or 1.0, 0.2), 5.0)
                if handle.sleep_until(min(now + pause, budget_end)) is Wake.INTERRUPTED:
                    if options.hold is not None:
                        options.hold()
                    raise SequencesError(
                        f"interrupted while {self.model} was warming; nothing moved") from None

    def _end_run_episode(self) -> None:
        link = self._session.link
        if link is None:
            return
        try:
            link.end_episode()
        except SequencesError:
            pass  # the worker may be gone; its episode ends with its session

    # -- the single-driver guard -------------------------------------------------------------

    @contextlib.contextmanager
    def _drive(self, method: str) -> Iterator[None]:
        """Hold the driver guard for one predict/next_action/run/act call, or refuse."""
        self._session.check_open(method)
        if not self._driver.acquire(blocking=False):
            raise SequencesError(
                f"{method}() refused: another thread is driving this Policy. "
                "Use one Policy per control loop (each robot gets its own connect())."
            )
        try:
            yield
        finally:
            self._driver.release()

    def _refuse_inside_run(self, method: str) -> None:
        # The driver lock is re-entrant, so a loop callback on the driving thread would get
        # through it and rewrite the running loop's buffer.
        if self._loop is not None:
            raise SequencesError(
                f"{method}() refused: called from inside a running loop's callback; "
                "it would disturb the loop's buffer"
            )

