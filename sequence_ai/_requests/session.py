"""``Session``: what lives across the calls of one Policy, shared by ``Policy`` and ``RunLoop``.

The connection and model id, the catalogue row, the latency estimate, whether the model is
known warm, the instruction latch, the open calls and the fetch threads, and the run defaults
given to ``connect`` (requests in flight, playback speed). Every method here is safe from any
thread unless its docstring names the driving thread.
"""

from __future__ import annotations

import contextlib
import threading
import time
import uuid
import warnings
from collections import deque
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from enum import Enum
from typing import Callable, Optional

from .._model.catalogue import Model, act_row, check_answer_model, check_chunk, models
from .._model.observation import is_fatal, problems_with
from .._platform.adapter import ACTION_SPACE, Adapter
from .._platform.control import Deployment
from .._platform.link import DeploymentLink
from .._playback.speed import PlaybackSpeed
from .._transport.deadline import Exchange
from .._transport.transport import Transport, encode_json
from ..errors import InvalidRequest, SequencesError
from ..types import Observation, Prediction
from .calls import CallHandle
from .fetch import Fetch

__all__ = [
    "EMA_WEIGHT",
    "SPREAD_FACTOR",
    "VALIDATE_MODES",
    "LatencyAverage",
    "RunDefaults",
    "Session",
    "ValidateMode",
]


class ValidateMode(str, Enum):
    """``connect(validate=)``: what the pre-send check does with an observation that does not
    match the model's catalogue row. String-valued: ``"strict"`` and the member are equal."""

    WARN = "warn"
    STRICT = "strict"
    OFF = "off"

    def __str__(self) -> str:
        return self.value


# The one list of the modes: connect() checks against it, the node's parameter offers it.
VALIDATE_MODES = tuple(mode.value for mode in ValidateMode)
# Weight of a new sample in the refill-latency average that sets the prefetch lead, and in the
# average of its deviation.
EMA_WEIGHT = 0.3
# A high latency is the average plus this many average deviations (as TCP's retransmission
# timeout, RFC 6298): about the p99 of the measured service's lognormal latencies.
SPREAD_FACTOR = 4.0

WarmingCallback = Callable[[float, Optional[float]], object]


@dataclass(frozen=True)
class RunDefaults:
    """What ``connect()`` set for every run of its Policy (a run may override each)."""

    # None: the catalogue's rate.
    control_hz: Optional[float]
    startup_timeout_s: float
    max_in_flight: int
    playback_speed: PlaybackSpeed


@dataclass
class LatencyAverage:
    """The refill latency's average and its average deviation (as TCP's RTO, RFC 6298)."""

    mean: Optional[float] = None
    deviation: Optional[float] = None

    @property
    def high(self) -> Optional[float]:
        if self.mean is None or self.deviation is None:
            return None
        return self.mean + SPREAD_FACTOR * self.deviation

    def add(self, sample: float) -> None:
        if self.mean is None:
            self.mean, self.deviation = sample, sample / 4.0
            return
        deviation = self.deviation if self.deviation is not None else 0.0
        self.deviation = (1.0 - EMA_WEIGHT) * deviation + EMA_WEIGHT * abs(sample - self.mean)
        self.mean = (1.0 - EMA_WEIGHT) * self.mean + EMA_WEIGHT * sample


@dataclass
class InstructionLatch:
    """The instruction for the requests built from now on, and when it changed (None once a
    request carried it)."""

    text: Optional[str] = None
    since: Optional[float] = None


class Session:
    """Shared state of one Policy. Fields say which thread or lock owns them."""

    def __init__(
        self,
        model_id: str,
        transport: Transport,
        *,
        validate: str,
        control_hz: Optional[float],
        startup_timeout_s: float,
        on_warming: Optional[WarmingCallback],
        max_in_flight: int = 1,
        playback_speed: PlaybackSpeed = 1.0,
        adapter: Optional[Adapter] = None,
    ) -> None:
        # Set here, never rebound: read by any thread without a lock.
        self.model_id = model_id
        self.transport = transport
        # A deployment's session (protocol "deployment"): its link and adapter; else None.
        self.adapter = adapter
        self.link = None if adapter is None else DeploymentLink(transport, model_id)
        self.validate = ValidateMode(validate)
        self.on_warming = on_warming
        self.defaults = RunDefaults(control_hz, startup_timeout_s, max_in_flight, playback_speed)

        # Owned by the driving thread (the holder of the Policy's driver guard): the steps
        # left of the last predict(). Other threads only take len(). A run clears it.
        self.buffer: deque[list[float]] = deque()

        # Lock order 9: nothing is taken under it (calls are interrupted after its release).
        self._lock = threading.Lock()
        # Everything below is read and written under _lock.
        self._closed = False
        # One entry per open call (a handle shared by two calls appears twice).
        self._calls: list[CallHandle] = []
        # Each fetch thread and its exchange, which abandon_requests() ends.
        self._fetch_threads: dict[threading.Thread, Exchange] = {}
        # (row,) once fetched, row None when the catalogue does not list the model; None
        # until a fetch succeeded, so a failed fetch is retried by the next caller.
        self._spec: Optional[tuple[Optional[Model]]] = None
        self._latency = LatencyAverage()
        # A chunk was received: later first requests need not wait out a cold start.
        self._served = False
        # ready() reported the model loaded: the next request measures plain round-trip
        # latency (no cold load inside it), so it may seed the latency average.
        self._seen_ready = False
        self._latch = InstructionLatch()

    # -- lifecycle and calls ------------------------------------------------------------

    @property
    def closed(self) -> bool:
        with self._lock:
            return self._closed

    def check_open(self, method: str) -> None:
        if self.closed:
            raise SequencesError(
                f"{method}() on a closed Policy; call sequence_ai.connect() again to reconnect"
            )

    def close(self, join_s: float) -> None:
        """Interrupt every open call, close the connection, join the fetch threads."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
            calls = list(self._calls)
            threads = list(self._fetch_threads)
        for call in calls:
            call.interrupt()
        if self.link is not None:
            # Before the transport closes: the release goes through it.
            self.link.close()
        # abort() wakes a thread blocked reading a stalled response, so the joins are short.
        self.transport.abort()
        for thread in threads:
            thread.join(join_s)

    def abandon_requests(self) -> None:
        """A run ended: close the connections of its requests still in flight, so their
        threads end now rather than at their own deadline."""
        with self._lock:
            exchanges = list(self._fetch_threads.values())
        for exchange in exchanges:
            exchange.abort()

    def interrupt_all(self) -> None:
        """Interrupt the handle of every open call; a no-op when none is open."""
        with self._lock:
            calls = list(self._calls)
        for call in calls:
            call.interrupt()

    @contextlib.contextmanager
    def open_call(self, method: str, call: Optional[CallHandle]) -> Iterator[CallHandle]:
        """Register one call (under ``call``, or a handle of its own) for its duration.

        A handle of its own lives exactly as long as the call, so an interrupt that arrives
        when nothing runs has nothing to mark and cannot leak into a later call.
        """
        if call is not None and not isinstance(call, CallHandle):
            raise TypeError(f"call is {call!r}; expected a sequence_ai.CallHandle or None")
        handle = call if call is not None else CallHandle()
        with self._lock:
            if self._closed:
                raise SequencesError(
                    f"{method}() on a closed Policy; call sequence_ai.connect() again"
                )
            self._calls.append(handle)
        try:
            yield handle
        finally:
            with self._lock:
                self._calls.remove(handle)

    # -- catalogue and readiness ----------------------------------------------------------

    def spec(self) -> Optional[Model]:
        """The model's catalogue row (None if unlisted); cached once a fetch succeeded."""
        self.check_open("spec")
        if self.link is not None:
            _, deployment = self.link.connect()
            return self._deployment_row(deployment)
        with self._lock:
            cached = self._spec
        if cached is not None:
            return cached[0]
        # Fetched outside the lock: two first callers may both fetch, and agree.
        row = act_row(models(transport=self.transport), self.model_id)
        with self._lock:
            self._spec = (row,)
        return row

    def _deployment_row(self, deployment: Deployment) -> Model:
        """The deployment as a catalogue row: rate and horizons from connect, the rest from
        the adapter (the rows it hands the loop are absolute joints and the gripper)."""
        adapter = self.adapter
        assert adapter is not None
        gripper = 0 if adapter.gripper_column is None else 1
        return Model.from_wire({
            "id": self.model_id, "robot": adapter.robot, "action_dim": adapter.action_dim,
            "state_dim": adapter.joint_count + gripper,
            "state_layout": {"joint_positions": adapter.joint_count, "gripper": gripper},
            "action_horizon": deployment.valid_len, "control_hz": deployment.hz,
            "open_loop_horizon": deployment.replan_at,
            "camera_views": [camera.view for camera in adapter.cameras],
            "action_space": ACTION_SPACE,
        })

    def spec_or_none(self) -> Optional[Model]:
        """The catalogue row, or None when unlisted or when the catalogue cannot be fetched
        now (the next caller retries)."""
        try:
            return self.spec()
        except SequencesError:
            return None

    def known_spec(self) -> Optional[Model]:
        """The catalogue row if one was fetched already; never sends a request."""
        if self.link is not None:
            deployment = self.link.deployment
            return None if deployment is None else self._deployment_row(deployment)
        with self._lock:
            cached = self._spec
        return None if cached is None else cached[0]

    def ready(
        self, *, timeout: Optional[float] = None, exchange: Optional[Exchange] = None
    ) -> tuple[bool, Optional[float]]:
        """``(ready, eta_s)`` from ``GET /v1/act/ready``; remembers a ready model."""
        self.check_open("ready")
        if self.link is not None:
            ready, eta_s = self.link.control.ready(timeout=timeout, exchange=exchange)
            if ready:
                with self._lock:
                    self._seen_ready = True
            return ready, eta_s
        body = self.transport.get("/v1/act/ready", params={"model": self.model_id},
                                  timeout=timeout, exchange=exchange)
        if not isinstance(body, dict) or "ready" not in body:
            raise SequencesError(f"GET /v1/act/ready returned {body!r:.80}; expected 'ready'")
        eta = body.get("eta_s")
        eta_s = float(eta) if isinstance(eta, (int, float)) and not isinstance(eta, bool) else None
        if body["ready"]:
            with self._lock:
                self._seen_ready = True
        return bool(body["ready"]), eta_s

    # -- warmth and latency ---------------------------------------------------------------

    @property
    def served(self) -> bool:
        """A chunk has been received on this Policy."""
        with self._lock:
            return self._served

    def mark_served(self) -> None:
        with self._lock:
            self._served = True

    @property
    def latency_s(self) -> Optional[float]:
        """Average refill latency of warm requests (None before the first warm sample)."""
        with self._lock:
            return self._latency.mean

    @property
    def latency_high_s(self) -> Optional[float]:
        """A high refill latency: the average plus SPREAD_FACTOR average deviations."""
        with self._lock:
            return self._latency.high

    def note_latency(self, sample: float) -> None:
        with self._lock:
            self._latency.add(sample)

    # -- the instruction latch ------------------------------------------------------------

    @property
    def instruction(self) -> Optional[str]:
        with self._lock:
            return self._latch.text

    def set_instruction(self, text: str) -> None:
        """Latch ``text`` for every request built from now on (same text: no-op)."""
        with self._lock:
            if text != self._latch.text:
                self._latch.text, self._latch.since = text, time.monotonic()

    def clear_instruction(self) -> None:
        with self._lock:
            self._latch.text = self._latch.since = None

    def take_instruction(self) -> tuple[Optional[str], Optional[float]]:
        """The latched text, and when it changed if no request has carried it yet."""
        with self._lock:
            text, since = self._latch.text, self._latch.since
            self._latch.since = None
        return text, since

    # -- requests -------------------------------------------------------------------------

    def check_observation(self, observation: Observation) -> None:
        """Pre-send check against the catalogue (validate="warn"|"strict"; "off" skips)."""
        # A deployment's adapter checks every observation against what it sends.
        if self.validate is ValidateMode.OFF or self.link is not None:
            return
        model = self.spec_or_none()
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
        if self.validate is ValidateMode.STRICT:
            raise InvalidRequest(message)
        warnings.warn(message, UserWarning, stacklevel=4)

    def submit(
        self,
        observe: Callable[[], Observation],
        body_fields: Mapping[str, object],
        call: CallHandle,
        *,
        model: Optional[Model],
        timeout: Optional[float],
        deadline: Optional[float],
    ) -> Fetch:
        """Start one request on a fetch thread: ``observe()`` there, then ``POST /v1/act``;
        ``call`` is notified when it finishes.

        The observation is built on the fetch thread, never on the caller's: a caller's
        ``observe`` must be safe to call from another thread. ``timeout`` bounds the whole
        request (the Transport's default when None), and the run's ``deadline`` bounds it
        further. A chunk disagreeing with ``model``, the catalogue row, fails as
        ``InvalidResponse`` on the fetch thread, before anyone can play it.
        """
        if deadline is not None:
            # An abandoned request must not outlive its run by much: bound it by the deadline.
            left = max(0.5, deadline - time.monotonic() + 0.5)
            timeout = min(timeout or self.transport.timeout_s, left)
        exchange = Exchange()

        def request() -> Prediction:
            if self.link is not None:
                return self._deployment_request(observe(), model, timeout, exchange)
            observation = observe()
            body: dict[str, object] = {
                "model": self.model_id, "observation": observation.to_wire()
            }
            body.update(body_fields)
            content = encode_json(body)
            answer = self.transport.post("/v1/act", content, timeout=timeout, exchange=exchange)
            prediction = Prediction.from_wire(answer, observation=observation)
            check_answer_model(prediction, self.model_id)
            prediction.request_bytes = len(content)
            if model is not None:
                check_chunk(model, prediction.action_chunk)
            return prediction

        with self._lock:
            if self._closed:
                raise SequencesError("the Policy was closed; call sequence_ai.connect() again")
            fetch = Fetch(request, call, self._fetch_done, warm=self._served or self._seen_ready)
            self._fetch_threads[fetch.thread] = exchange
            fetch.start()
        return fetch

    def _deployment_request(
        self, observation: Observation, model: Optional[Model], timeout: Optional[float],
        exchange: Exchange,
    ) -> Prediction:
        """One chunk from the deployment: observe + act on the worker, the adapter's rows."""
        link, adapter = self.link, self.adapter
        assert link is not None and adapter is not None
        outputs, deployment = link.infer(adapter.inputs(observation), exchange=exchange,
                                         timeout=timeout)
        chunk = adapter.chunk(outputs, observation, hz=deployment.hz,
                              valid_len=deployment.valid_len, replan_at=deployment.replan_at)
        if model is not None:
            check_chunk(model, chunk)
        return Prediction(id=uuid.uuid4().hex, model=self.model_id, action_chunk=chunk,
                          observation=observation)

    def _fetch_done(self, thread: threading.Thread) -> None:
        with self._lock:
            self._fetch_threads.pop(thread, None)
