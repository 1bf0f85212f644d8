"""``connect()`` and ``Policy``: one model, one kept-alive connection, one control loop."""

from __future__ import annotations

import math
import threading
import warnings
from collections import deque
from typing import TYPE_CHECKING, Any, Callable, Optional, Union

from . import control_loop as loop
from .actions import gripper_dims
from .catalogue import Model, find_model, full_model_id, models
from .errors import ChunkExhausted, InvalidRequest, SequencesError, Unavailable
from .observation import is_fatal, problems_with
from .outcome import RunOutcome
from .transport import Transport
from .types import Observation, Prediction

if TYPE_CHECKING:
    from .transport import VerifyArg

__all__ = ["connect", "Policy"]

VALIDATE_MODES = ("warn", "strict", "off")
DEFAULT_STARTUP_TIMEOUT_S = 300.0
# Body keys a caller's **options may not overwrite.
RESERVED_OPTIONS = ("model", "observation")


def connect(
    model: Union[str, Model],
    *,
    api_key: Optional[str] = None,
    base_url: Optional[str] = None,
    timeout_s: float = 30.0,
    validate: str = "warn",
    control_hz: Optional[float] = None,
    startup_timeout_s: float = DEFAULT_STARTUP_TIMEOUT_S,
    on_warming: Optional[Callable[[float, Optional[float]], Any]] = None,
    verify: VerifyArg = True,
    allow_insecure: bool = False,
) -> Policy:
    """Open a ``Policy`` for ``model`` (use it as a context manager).

    Sends nothing: no request is made until the Policy is used.
    """
    # Spelled out, not **kwargs: this is the signature users and their editors read.
    return Policy(
        model,
        api_key=api_key,
        base_url=base_url,
        timeout_s=timeout_s,
        validate=validate,
        control_hz=control_hz,
        startup_timeout_s=startup_timeout_s,
        on_warming=on_warming,
        verify=verify,
        allow_insecure=allow_insecure,
    )


def _check_options(options: dict[str, Any]) -> dict[str, Any]:
    for key in RESERVED_OPTIONS:
        if key in options:
            raise ValueError(
                f"option {key!r} cannot be passed through: the Policy sets the request's {key}"
            )
    return {key: value for key, value in options.items() if value is not None}


class Policy:
    """A handle on one model: ``predict``/``next_action`` for caller-owned loops, ``run``/``act``
    for the built-in prefetching loop. One Policy per control loop; ``interrupt()`` is the only
    method meant for other threads.
    """

    def __init__(
        self,
        model: Union[str, Model],
        *,
        api_key: Optional[str] = None,
        base_url: Optional[str] = None,
        timeout_s: float = 30.0,
        validate: str = "warn",
        control_hz: Optional[float] = None,
        startup_timeout_s: float = DEFAULT_STARTUP_TIMEOUT_S,
        on_warming: Optional[Callable[[float, Optional[float]], Any]] = None,
        verify: VerifyArg = True,
        allow_insecure: bool = False,
    ) -> None:
        if isinstance(model, Model):
            model = model.id
        if not isinstance(model, str) or not model.strip():
            raise ValueError(f"model is {model!r}; expected a model id such as 'pi05-droid'")
        if validate not in VALIDATE_MODES:
            raise ValueError(f"validate is {validate!r}; expected one of {VALIDATE_MODES}")
        loop.positive_seconds("control_hz", control_hz, allow_none=True, unit="Hz")
        loop.positive_seconds("startup_timeout_s", startup_timeout_s, allow_none=False,
                              allow_zero=True)
        if on_warming is not None and not callable(on_warming):
            raise TypeError(f"on_warming is {on_warming!r}; expected a callable(waited_s, eta_s)")
        self._model_id = full_model_id(model.strip())
        self._validate = validate
        self._control_hz = None if control_hz is None else float(control_hz)
        self._startup_timeout_s = float(startup_timeout_s)
        self._on_warming = on_warming
        self._transport = Transport(
            base_url=base_url,
            api_key=api_key,
            timeout_s=timeout_s,
            verify=verify,
            allow_insecure=allow_insecure,
        )
        self._timeout_s = self._transport.timeout_s

        # Re-entrant so next_action -> predict and act -> run work on the driving thread;
        # acquired without blocking so a second driver is refused, never queued.
        self._driver = threading.RLock()
        self._state = threading.Lock()
        self._scopes: set[loop.CallScope] = set()
        self._workers: set[threading.Thread] = set()
        self._closed = False

        self._buffer: deque[list[float]] = deque()
        self._served = False
        # Set once ready() reported the model loaded: the next request then measures plain
        # round-trip latency (no cold load inside it), so it may seed the prefetch average.
        self._seen_ready = False
        self._run_active = False
        self._latency_ema: Optional[float] = None
        self._spec_cache: Optional[tuple[Optional[Model]]] = None
        self._warned_no_validate = False

        self._latch: Optional[str] = None
        self._latch_since: Optional[float] = None

    # -- properties and lifecycle ----------------------------------------------------------

    @property
    def model(self) -> str:
        """The full model id."""
        return self._model_id

    @property
    def buffered(self) -> int:
        """Steps left in the buffer (those of a running loop, or of the last predict)."""
        return len(self._buffer)

    @property
    def instruction(self) -> Optional[str]:
        """The instruction latch: overrides every observation's instruction while set."""
        with self._state:
            return self._latch

    @property
    def closed(self) -> bool:
        return self._closed

    def __repr__(self) -> str:
        state = "closed" if self._closed else "open"
        return f"Policy({self._model_id!r}, base_url={self._transport.base_url!r}, {state})"

    def __enter__(self) -> Policy:
        return self

    def __exit__(self, *exc_info: Any) -> None:
        self.close()

    def close(self) -> None:
        """Stop any running call, close the connection and join the fetch threads. Idempotent."""
        with self._state:
            if self._closed:
                return
            self._closed = True
            scopes = list(self._scopes)
            workers = list(self._workers)
        for scope in scopes:
            scope.interrupt()
        # abort() wakes a thread blocked reading a stalled response, so the joins are short.
        self._transport.abort()
        for thread in workers:
            thread.join(self._timeout_s)

    def interrupt(self) -> None:
        """Stop the running call within one control period. Any thread; a no-op when idle."""
        with self._state:
            scopes = list(self._scopes)
        for scope in scopes:
            scope.interrupt()

    def set_instruction(self, text: str) -> None:
        """Change the instruction of every request built from now on (same text: no-op)."""
        if not isinstance(text, str):
            raise TypeError(f"instruction is {type(text).__name__}; expected a str")
        with self._state:
            if text == self._latch:
                return
            self._latch = text
            self._latch_since = loop.monotonic()

    # -- read-only calls -------------------------------------------------------------------

    def spec(self) -> Optional[Model]:
        """This model's catalogue row (None if not listed), fetched on this Policy's connection.

        Cached once fetched; a failed fetch raises and is retried on the next call.
        """
        self._check_open("spec")
        cached = self._spec_cache
        if cached is not None:
            return cached[0]
        row = find_model(models(endpoint="act", transport=self._transport), self._model_id)
        self._spec_cache = (row,)
        return row

    def ready(self) -> tuple[bool, Optional[float]]:
        """``(ready, eta_s)``; polling a cold model starts loading it. Not billed."""
        self._check_open("ready")
        body = self._transport.get("/v1/act/ready", params={"model": self._model_id})
        if not isinstance(body, dict) or "ready" not in body:
            raise SequencesError(f"GET /v1/act/ready returned {body!r:.80}; expected 'ready'")
        eta = body.get("eta_s")
        eta_s = float(eta) if isinstance(eta, (int, float)) and not isinstance(eta, bool) else None
        if body["ready"]:
            self._seen_ready = True
        return bool(body["ready"]), eta_s

    def wait_until_ready(self, timeout_s: float = 300.0, poll_s: float = 5.0) -> float:
        """Poll ``ready()`` until the model is loaded; returns the seconds waited.

        Needs no observation. Raises ``Unavailable`` (warming) after ``timeout_s``, and
        ``SequencesError`` if ``interrupt()`` is called meanwhile.
        """
        loop.positive_seconds("timeout_s", timeout_s, allow_none=False, allow_zero=True)
        loop.positive_seconds("poll_s", poll_s, allow_none=False)
        scope = self._open_scope("wait_until_ready")
        try:
            start = loop.monotonic()
            deadline = start + timeout_s
            while True:
                is_ready, eta_s = self.ready()
                now = loop.monotonic()
                if is_ready:
                    return now - start
                if now >= deadline:
                    raise Unavailable(
                        f"{self._model_id} was not ready after {timeout_s:g}s "
                        f"(full load takes about {eta_s}s)",
                        status=503,
                        retry_after_s=eta_s,
                        warming=True,
                    )
                if scope.sleep_until(min(now + poll_s, deadline)) == "interrupted":
                    raise SequencesError("wait_until_ready() was interrupted")
        finally:
            self._close_scope(scope)

    # -- caller-owned loops ----------------------------------------------------------------

    def predict(self, observation: Observation, **options: Any) -> Prediction:
        """One request; the whole chunk. Replaces the buffer with its executable steps."""
        with self._drive("predict"):
            self._refuse_inside_run("predict")
            return self._predict(observation, options)

    def next_action(self, observation: Optional[Observation] = None, **options: Any) -> list[float]:
        """The next buffered step; fetches a chunk from ``observation`` when the buffer is empty."""
        with self._drive("next_action"):
            self._refuse_inside_run("next_action")
            if not self._buffer:
                if observation is None:
                    raise ChunkExhausted(
                        "next_action() has no buffered step and was given no observation; "
                        "pass the current observation on every call"
                    )
                self._predict(observation, options)
            return self._buffer.popleft()

    def _predict(self, observation: Observation, options: dict[str, Any]) -> Prediction:
        if not isinstance(observation, Observation):
            raise TypeError(
                f"observation is {type(observation).__name__}; expected a sequence_ai.Observation"
            )
        body_options = _check_options(options)
        with self._state:
            latch = self._latch
        if latch is not None and observation.instruction != latch:
            observation = observation.with_instruction(latch)
        self._check_observation(observation)
        scope = self._open_scope("predict")
        try:
            budget = 0.0 if self._served else self._startup_timeout_s
            job = loop.await_first_chunk(
                self, scope, lambda: observation, body_options, budget_s=budget, deadline=None
            )
        except loop.Ending:
            raise SequencesError("predict() was interrupted") from None
        finally:
            self._close_scope(scope)
        prediction = job.prediction()
        if job.warm:
            self._note_latency(job.latency_s)
        self._served = True
        chunk = prediction.action_chunk
        steps = [list(step) for step in chunk.steps]
        if chunk.open_loop_horizon:
            steps = steps[: chunk.open_loop_horizon]
        # Always replace: steps left from an earlier chunk belong to an older observation.
        self._buffer.clear()
        self._buffer.extend(steps)
        return prediction

    # -- the built-in loop -----------------------------------------------------------------

    def run(
        self,
        observe: Callable[[], Observation],
        act: Callable[[list[float]], Any],
        *,
        max_actions: int,
        validate: Optional[Callable[[list[float]], Any]] = None,
        hold: Optional[Callable[[], Any]] = None,
        until: Optional[Callable[[], Any]] = None,
        on_chunk: Optional[Callable[[Prediction], Any]] = None,
        on_underrun: Optional[Callable[[float], Any]] = None,
        on_status: Optional[Callable[[str], Any]] = None,
        progress: Any = "auto",
        prefetch: bool = True,
        smooth_seam: int = 0,
        max_seconds: Optional[float] = None,
        startup_timeout_s: Optional[float] = None,
        open_loop_horizon: Optional[int] = None,
        controller: str = "raw",
        **options: Any,
    ) -> RunOutcome:
        """Drive ``act`` from ``observe`` until ``max_actions`` or an earlier ending.

        Returns a ``RunOutcome``; an error from a callback or the service is re-raised with
        the outcome attached as ``exc.outcome``. ``hold`` is called once on every early end.
        """
        for name, fn in (("observe", observe), ("act", act)):
            if not callable(fn):
                raise TypeError(f"{name} is {fn!r}; expected a callable")
        for name, fn in (("validate", validate), ("hold", hold), ("until", until),
                         ("on_chunk", on_chunk), ("on_underrun", on_underrun),
                         ("on_status", on_status)):
            if fn is not None and not callable(fn):
                raise TypeError(f"{name} is {fn!r}; expected a callable or None")
        _positive_int("max_actions", max_actions)
        if open_loop_horizon is not None:
            _positive_int("open_loop_horizon", open_loop_horizon)
        if isinstance(smooth_seam, bool) or not isinstance(smooth_seam, int) or smooth_seam < 0:
            raise ValueError(f"smooth_seam is {smooth_seam!r}; expected an integer >= 0")
        loop.positive_seconds("max_seconds", max_seconds, allow_none=True)
        loop.positive_seconds("startup_timeout_s", startup_timeout_s, allow_none=True,
                              allow_zero=True)
        if controller not in loop.CONTROLLERS:
            raise ValueError(f"controller is {controller!r}; expected one of {loop.CONTROLLERS}")
        if progress not in loop.PROGRESS_MODES:
            raise ValueError(f"progress is {progress!r}; expected 'auto', True or False")
        body_options = _check_options(options)

        with self._drive("run"):
            self._refuse_inside_run("run")
            model: Optional[Model] = None
            dims: list[int] = []
            if controller != "raw" or smooth_seam > 0:
                model = self.spec()
                loop.check_controller(controller, model, self._model_id)
                if model is not None:
                    dims = sorted(gripper_dims(model))
            if validate is None and not self._warned_no_validate:
                self._warned_no_validate = True
                warnings.warn(
                    "run() without validate=: no safety check stands between the model's "
                    "output and act(); pass validate= on real hardware",
                    UserWarning,
                    stacklevel=3,
                )
            scope = self._open_scope("run")
            try:
                runner = loop.RunLoop(
                    self,
                    scope,
                    observe=observe,
                    act=act,
                    max_actions=max_actions,
                    validate=validate,
                    hold=hold,
                    until=until,
                    on_chunk=on_chunk,
                    on_underrun=on_underrun,
                    status=loop.StatusReporter(on_status, progress),
                    prefetch=bool(prefetch),
                    smooth_seam=smooth_seam,
                    max_seconds=max_seconds,
                    startup_timeout_s=(
                        self._startup_timeout_s if startup_timeout_s is None
                        else float(startup_timeout_s)
                    ),
                    open_loop_horizon=open_loop_horizon,
                    controller=controller,
                    model=model,
                    gripper_dims=dims,
                    options=body_options,
                )
                self._run_active = True
                return runner.execute()
            finally:
                self._run_active = False
                self._close_scope(scope)

    def act(
        self,
        instruction: str,
        observe: Callable[[], Observation],
        act: Callable[[list[float]], Any],
        *,
        max_seconds: float,
        **run_kwargs: Any,
    ) -> RunOutcome:
        """``run()`` bounded by ``max_seconds`` with ``instruction`` on every request it makes."""
        if not isinstance(instruction, str):
            raise TypeError(f"instruction is {type(instruction).__name__}; expected a str")
        loop.positive_seconds("max_seconds", max_seconds, allow_none=False)
        if "max_actions" in run_kwargs:
            raise ValueError("act() is bounded by max_seconds; do not pass max_actions")
        # The guard comes first: a refused act() must not touch the running call's latch.
        with self._drive("act"):
            self.set_instruction(instruction)
            try:
                return self.run(
                    observe,
                    act,
                    max_actions=_actions_for(max_seconds),
                    max_seconds=max_seconds,
                    **run_kwargs,
                )
            finally:
                with self._state:
                    self._latch = None
                    self._latch_since = None

    # -- internals shared with control_loop ------------------------------------------------

    def _check_open(self, method: str) -> None:
        if self._closed:
            raise SequencesError(
                f"{method}() on a closed Policy; call sequence_ai.connect() again to reconnect"
            )

    def _refuse_inside_run(self, method: str) -> None:
        # The driver lock is re-entrant, so a loop callback on the driving thread would get
        # through it and rewrite the running loop's buffer.
        if self._run_active:
            raise SequencesError(
                f"{method}() refused: called from inside a running loop's callback; "
                "it would disturb the loop's buffer"
            )

    def _drive(self, method: str) -> _DriverGuard:
        self._check_open(method)
        return _DriverGuard(self, method)

    def _open_scope(self, method: str) -> loop.CallScope:
        scope = loop.CallScope()
        with self._state:
            if self._closed:
                raise SequencesError(
                    f"{method}() on a closed Policy; call sequence_ai.connect() again"
                )
            self._scopes.add(scope)
        return scope

    def _close_scope(self, scope: loop.CallScope) -> None:
        with self._state:
            self._scopes.discard(scope)

    def _take_latch(self) -> tuple[Optional[str], Optional[float]]:
        with self._state:
            text, since = self._latch, self._latch_since
            self._latch_since = None
        return text, since

    def _note_latency(self, sample: float) -> None:
        ema = self._latency_ema
        self._latency_ema = sample if ema is None else (
            (1.0 - loop.EMA_WEIGHT) * ema + loop.EMA_WEIGHT * sample
        )

    def _full_load_eta(self, exc: Unavailable) -> Optional[float]:
        """The model's full-load ETA for ``on_warming``: from ``/v1/act/ready``, else the 503."""
        try:
            _, eta_s = self.ready()
        except SequencesError:
            eta_s = None
        return eta_s if eta_s is not None else exc.retry_after_s

    def _check_observation(self, observation: Observation) -> None:
        """Pre-send check against the catalogue (validate="warn"|"strict"; "off" skips)."""
        if self._validate == "off":
            return
        try:
            model = self.spec()
        except SequencesError:
            # Without a catalogue nothing can be checked this time; the next request retries.
            return
        if model is None:
            return
        proprio = observation.proprioception
        problems = problems_with(
            model,
            [frame.view for frame in observation.images],
            proprio.joint_positions,
            proprio.gripper,
        )
        if not problems:
            return
        consequence = (
            "the call will fail" if is_fatal(problems)
            else "the gateway would accept it, but the model would act on something else"
        )
        message = (
            f"observation does not match {model.short_id}:\n  - "
            + "\n  - ".join(problems)
            + f"\n{consequence}; build observations with sequence_ai.observation(model, ...)"
        )
        if self._validate == "strict":
            raise InvalidRequest(message)
        warnings.warn(message, UserWarning, stacklevel=4)

    def _submit(
        self,
        observation: Observation,
        options: dict[str, Any],
        scope: loop.CallScope,
        *,
        timeout: Optional[float],
        deadline: Optional[float],
    ) -> loop.FetchJob:
        """Start ``POST /v1/act`` on a fetch thread; the caller waits via ``scope``."""
        if deadline is not None:
            # An abandoned request must not outlive its run by much: bound it by the deadline.
            left = max(0.5, deadline - loop.monotonic() + 0.5)
            timeout = min(timeout or self._timeout_s, left)
        body: dict[str, Any] = {"model": self._model_id, "observation": observation.to_wire()}
        body.update(options)

        def request() -> Prediction:
            answer = self._transport.post("/v1/act", body, timeout=timeout)
            return Prediction.from_wire(answer, observation=observation)

        warm = self._served or self._seen_ready
        job = loop.FetchJob(request, scope, self._worker_done, warm=warm)
        with self._state:
            if self._closed:
                raise SequencesError("the Policy was closed; call sequence_ai.connect() again")
            self._workers.add(job.thread)
            job.start()
        return job

    def _worker_done(self, thread: threading.Thread) -> None:
        with self._state:
            self._workers.discard(thread)


class _DriverGuard:
    """Holds the single-driver lock for one predict/next_action/run/act call."""

    def __init__(self, policy: Policy, method: str) -> None:
        self._policy = policy
        self._method = method

    def __enter__(self) -> None:
        if not self._policy._driver.acquire(blocking=False):
            raise SequencesError(
                f"{self._method}() refused: another thread is driving this Policy. "
                "Use one Policy per control loop (each robot gets its own connect())."
            )

    def __exit__(self, *exc_info: Any) -> None:
        self._policy._driver.release()


def _positive_int(name: str, value: Any) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
        raise ValueError(f"{name} is {value!r}; expected a positive integer")


def _actions_for(max_seconds: float) -> int:
    # act() is bounded by time; this cap only has to exceed any rate a chunk could declare.
    return int(math.ceil(max_seconds * 1000)) + 1000
