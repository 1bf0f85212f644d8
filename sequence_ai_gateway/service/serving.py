"""Serving one model the way the measured service does: the network in front of it, then a FIFO
queue shared by the model's workers, each running one inference at a time; cold start and
keep-warm.

One request's time (PROTOCOL §1.4 ``perf``) is

    transport  network base (lognormal, median ``network_ms``, sigma ``spread``)
               + request body kB x ``per_kb_ms``      spent before the request reaches the queue,
                                                        so concurrent requests overlap it
    queue      waiting for a free worker of the model
    worker     the inference (the policy's ``inference_ms``), one request per worker at a time

all multiplied by ``scale``. ``latency_ms`` set is the flat override: no transport, the whole
time (lognormal around it, spread ``jitter_ms``) spent on the worker.
"""

from __future__ import annotations

import asyncio
import math
import random
import threading
import time
import uuid
from dataclasses import dataclass, field
from enum import Enum
from typing import Any, Awaitable, Callable, Dict, List, Optional, Union

from sequence_ai_gateway.policies import Chunk, PolicyObservation

Rows = List[List[float]]
# What a request queues with: the observation, or what makes it when the request's turn on a
# worker comes (the route's frames queue compressed and are decoded then).
Observed = Union[PolicyObservation, Callable[[], PolicyObservation]]

# Calibrated on the two measured points of the reference client's README (pi05-droid, one warm
# worker, p50): 14.6 kB -> 586 ms and 3.4 kB -> 384 ms. 16 ms/kB is the per-kB cost measured
# directly against the worker (181 ms for 11.2 kB); 115 ms the inference it reported (111-119);
# the base puts both points within 12 ms (575 and 395 ms). See docs/gateway.md.
NETWORK_MS = 226.0
PER_KB_MS = 16.0
NETWORK_SPREAD = 0.3
BYTES_PER_KB = 1000.0


@dataclass
class LatencySettings:
    """Shared by every model. Written by the control API from any thread, one attribute at a
    time; each request reads them when its phase starts."""

    latency_ms: Optional[float] = None  # flat override; None: the model below
    jitter_ms: float = 0.0  # lognormal spread of the worker time, in ms at its median
    scale: float = 1.0
    network_ms: float = NETWORK_MS
    per_kb_ms: float = PER_KB_MS
    spread: float = NETWORK_SPREAD  # lognormal sigma of the network base

    def transport_median_ms(self, body_bytes: int) -> float:
        if self.latency_ms is not None:
            return 0.0
        return self.scale * (self.network_ms + body_bytes / BYTES_PER_KB * self.per_kb_ms)

    def worker_median_ms(self, inference_ms: float) -> float:
        return self.scale * (inference_ms if self.latency_ms is None else self.latency_ms)

    def expected_ms(self, body_bytes: int, inference_ms: float) -> float:
        """Median time of one request alone on its model (nothing queued before it): transport
        and inference, each at its median. Adding constants to a lognormal keeps its median,
        so with the default constant inference this is the p50 exactly."""
        return self.transport_median_ms(body_bytes) + self.worker_median_ms(inference_ms)


def lognormal(median: float, sigma: float, rng: random.Random) -> float:
    return median * math.exp(rng.gauss(0.0, sigma)) if sigma > 0 and median > 0 else median


def sample_latency_s(median_ms: float, jitter_ms: float, scale: float, rng: random.Random) -> float:
    """Lognormal around ``median_ms`` with a spread of about ``jitter_ms``, times ``scale``."""
    if scale <= 0 or median_ms <= 0:
        return 0.0
    return lognormal(median_ms, jitter_ms / median_ms, rng) * scale / 1000.0


def sample_transport_s(settings: LatencySettings, body_bytes: int, rng: random.Random) -> float:
    """One request's network time: a lognormal base plus the per-kB cost of its body."""
    if settings.latency_ms is not None or settings.scale <= 0:
        return 0.0
    base = lognormal(settings.network_ms, settings.spread, rng)
    return settings.scale * (base + body_bytes / BYTES_PER_KB * settings.per_kb_ms) / 1000.0


@dataclass
class WarmthSettings:
    cold_start_s: float = 0.0
    keep_warm_s: float = 600.0


class Warmth(str, Enum):
    COLD = "cold"
    WARMING = "warming"
    WARM = "warm"


@dataclass(frozen=True)
class Inference:
    rows: Rows
    queue_ms: float  # waiting for a free worker
    worker_ms: float  # on the worker: a held fault, then the inference
    inference_ms: float
    notes: List[str] = field(default_factory=list)  # the policy's, for the answer's warnings


@dataclass
class _Job:
    observation: Observed
    future: asyncio.Future[Inference]
    enqueued: float
    hold: Optional[Callable[[], Awaitable[None]]]


class ModelServer:
    """Serving state of one model.

    Queue, workers and their loop belong to the server's event loop. ``_lock`` guards warmth
    and the counters (``queue_depth``, ``max_queue_depth``, ``in_transport``, ``requests``,
    ``bytes_received``, ``_busy_s``, ``_since``), which the control API reads from any thread.
    """

    def __init__(
        self,
        row: Dict[str, Any],
        policy: Any,
        latency: LatencySettings,
        warmth: WarmthSettings,
        rng: random.Random,
        workers: int = 1,
    ) -> None:
        if isinstance(workers, bool) or not isinstance(workers, int) or workers < 1:
            raise ValueError(f"workers={workers!r}: expected an integer >= 1")
        self.row = row
        self.policy = policy
        self.workers = workers
        self._latency = latency
        self._warmth = warmth
        self._rng = rng
        self._lock = threading.Lock()
        self._queue: Optional[asyncio.Queue[_Job]] = None
        self._tasks: List[asyncio.Task[None]] = []
        self._loop: Optional[asyncio.AbstractEventLoop] = None
        self.queue_depth = 0
        self.max_queue_depth = 0
        self.in_transport = 0
        self.reset_counters()
        self.reset_warmth()

    @property
    def inference_ms(self) -> float:
        """The policy's median simulated inference time (0 when it names none)."""
        return float(getattr(self.policy, "inference_ms", 0.0) or 0.0)

    # --- warmth -------------------------------------------------------------------------------
    def reset_warmth(self) -> None:
        """Initial state: warm when cold start is 0, else cold until the first poll or act."""
        with self._lock:
            self._state = Warmth.WARM if self._warmth.cold_start_s <= 0 else Warmth.COLD
            self._last_used = time.monotonic()
            self._warm_at = 0.0
            self._load_s = self._warmth.cold_start_s
            self._job_id: Optional[str] = None

    def _advance(self, now: float) -> None:
        if self._state is Warmth.WARMING and now >= self._warm_at:
            self._state = Warmth.WARM
            self._last_used = self._warm_at
        if self._state is Warmth.WARM and now - self._last_used >= self._warmth.keep_warm_s:
            self._state = Warmth.COLD

    def _start_warming(self, now: float, seconds: float) -> None:
        self._load_s = seconds
        if seconds <= 0:
            self._state = Warmth.WARM
            self._last_used = now
            return
        self._state = Warmth.WARMING
        self._warm_at = now + seconds
        self._job_id = "job-" + uuid.uuid4().hex[:16]

    def force_cold(self) -> None:
        with self._lock:
            self._state = Warmth.COLD

    def force_warming(self, seconds: float) -> None:
        with self._lock:
            self._start_warming(time.monotonic(), seconds)

    def use(self) -> Optional[float]:
        """A ready poll or act: start warming a cold model; seconds left while warming, else None.

        Any call also counts as use for keep-warm.
        """
        now = time.monotonic()
        with self._lock:
            self._advance(now)
            if self._state is Warmth.COLD:
                self._start_warming(now, self._warmth.cold_start_s)
            if self._state is Warmth.WARMING:
                return max(0.0, self._warm_at - now)
            self._last_used = now
            return None

    @property
    def load_eta_s(self) -> float:
        """Duration of a full load (a property of the operation, not a countdown)."""
        with self._lock:
            return self._load_s if self._state is Warmth.WARMING else self._warmth.cold_start_s

    @property
    def warming_job_id(self) -> Optional[str]:
        with self._lock:
            return self._job_id

    # --- counters -----------------------------------------------------------------------------
    def reset_counters(self) -> None:
        """Counters start again; requests still queued or in transport stay counted there."""
        with self._lock:
            self.max_queue_depth = self.queue_depth
            self.requests = 0
            self.bytes_received = 0
            self._busy_s = 0.0
            self._since = time.monotonic()

    def _depth(self, change: int) -> None:
        with self._lock:
            self.queue_depth += change
            self.max_queue_depth = max(self.max_queue_depth, self.queue_depth)

    def counters(self) -> Dict[str, Any]:
        with self._lock:
            elapsed = time.monotonic() - self._since
            return {
                "requests": self.requests,
                "bytes_received": self.bytes_received,
                "workers": self.workers,
                "busy_s": round(self._busy_s, 6),
                # Finished work only, over the time since start or the last reset.
                "utilisation": round(self._busy_s / (self.workers * elapsed), 4)
                if elapsed > 0 else 0.0,
                "in_transport": self.in_transport,
                "queue_depth": self.queue_depth,
                "max_queue_depth": self.max_queue_depth,
            }

    # --- network, queue and workers -----------------------------------------------------------
    async def arrive(self, body_bytes: int) -> float:
        """The request's way to this model: count it, spend its transport time (concurrently
        with any other request's), return that time in ms."""
        seconds = sample_transport_s(self._latency, body_bytes, self._rng)
        with self._lock:
            self.requests += 1
            self.bytes_received += body_bytes
            self.in_transport += 1
        try:
            if seconds > 0:
                await asyncio.sleep(seconds)
        finally:
            with self._lock:
                self.in_transport -= 1
        return seconds * 1000.0

    def _ensure_workers(self) -> asyncio.Queue[_Job]:
        loop = asyncio.get_running_loop()
        if self._queue is None or self._loop is not loop or any(t.done() for t in self._tasks):
            # A restarted server runs a new event loop: queue and workers belong to it.
            for task in self._tasks:
                task.cancel()
            self._loop = loop
            self._queue = asyncio.Queue()
            self._tasks = [loop.create_task(self._work(self._queue)) for _ in range(self.workers)]
        return self._queue

    async def infer(
        self,
        observation: Observed,
        hold: Optional[Callable[[], Awaitable[None]]] = None,
    ) -> Inference:
        """Queue behind earlier requests for this model (FIFO) and wait for the result; an
        observation given as a callable is made on the worker, when the request's turn comes."""
        queue = self._ensure_workers()
        job = _Job(observation, asyncio.get_running_loop().create_future(), time.monotonic(), hold)
        self._depth(+1)
        try:
            queue.put_nowait(job)
            return await job.future
        finally:
            self._depth(-1)

    def _worker_time_s(self) -> float:
        settings = self._latency
        median = settings.latency_ms if settings.latency_ms is not None else self.inference_ms
        return sample_latency_s(median, settings.jitter_ms, settings.scale, self._rng)

    def _chunk(self, observed: Observed) -> Chunk:
        """The policy's rows, with its notes when it gives any (``chunk`` over ``steps``)."""
        observation = observed if isinstance(observed, PolicyObservation) else observed()
        chunk = getattr(self.policy, "chunk", None)
        if callable(chunk):
            return chunk(observation)
        return Chunk(self.policy.steps(observation))

    async def _work(self, queue: asyncio.Queue[_Job]) -> None:
        loop = asyncio.get_running_loop()
        while True:
            job = await queue.get()
            started = time.monotonic()
            try:
                if job.hold is not None:
                    await job.hold()
                worker_s = self._worker_time_s()
                computing = time.monotonic()
                chunk = await loop.run_in_executor(None, self._chunk, job.observation)
                spent = time.monotonic() - computing
                if worker_s > spent:
                    await asyncio.sleep(worker_s - spent)
                finished = time.monotonic()
                result = Inference(
                    rows=[list(r) for r in chunk.rows],
                    queue_ms=(started - job.enqueued) * 1000.0,
                    worker_ms=(finished - started) * 1000.0,
                    inference_ms=(finished - computing) * 1000.0,
                    notes=list(chunk.notes),
                )
            except asyncio.CancelledError:
                if not job.future.done():
                    job.future.cancel()
                raise
            except Exception as exc:  # a plug-in policy's failure goes back to its request
                if not job.future.done():
                    job.future.set_exception(exc)
                continue
            finally:
                with self._lock:
                    self._busy_s += time.monotonic() - started
            if not job.future.done():
                job.future.set_result(result)
