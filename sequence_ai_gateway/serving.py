"""One worker per model: FIFO queue, simulated inference time, cold start and keep-warm."""

from __future__ import annotations

import asyncio
import math
import random
import threading
import time
import uuid
from dataclasses import dataclass
from typing import Any, Awaitable, Callable, List, Optional

from sequence_ai_gateway.policies import PolicyObservation

Rows = List[List[float]]


@dataclass
class LatencySettings:
    """Shared by every model; ``latency_ms`` None means each policy's own median."""

    latency_ms: Optional[float] = None
    jitter_ms: float = 0.0
    scale: float = 1.0


@dataclass
class WarmthSettings:
    cold_start_s: float = 0.0
    keep_warm_s: float = 600.0


@dataclass(frozen=True)
class Inference:
    rows: Rows
    queue_ms: float
    inference_ms: float


@dataclass
class _Job:
    observation: PolicyObservation
    future: asyncio.Future[Inference]
    enqueued: float
    hold: Optional[Callable[[], Awaitable[None]]]


def sample_latency_s(median_ms: float, jitter_ms: float, scale: float, rng: random.Random) -> float:
    """Lognormal around ``median_ms`` with a spread of about ``jitter_ms``, times ``scale``."""
    if scale <= 0 or median_ms <= 0:
        return 0.0
    value = median_ms
    if jitter_ms > 0:
        value = median_ms * math.exp(rng.gauss(0.0, jitter_ms / median_ms))
    return value * scale / 1000.0


class ModelServer:
    """Serving state of one model. Warmth is read from the control thread, hence the lock."""

    def __init__(
        self,
        row: dict,
        policy: Any,
        latency: LatencySettings,
        warmth: WarmthSettings,
        rng: random.Random,
    ) -> None:
        self.row = row
        self.policy = policy
        self._latency = latency
        self._warmth = warmth
        self._rng = rng
        self._lock = threading.Lock()
        self._queue: Optional[asyncio.Queue[_Job]] = None
        self._worker: Optional[asyncio.Task[None]] = None
        self._loop: Optional[asyncio.AbstractEventLoop] = None
        self.queue_depth = 0
        self.max_queue_depth = 0
        self.reset_warmth()

    # --- warmth -------------------------------------------------------------------------------
    def reset_warmth(self) -> None:
        """Initial state: warm when cold start is 0, else cold until the first poll or act."""
        with self._lock:
            self._state = "warm" if self._warmth.cold_start_s <= 0 else "cold"
            self._last_used = time.monotonic()
            self._warm_at = 0.0
            self._load_s = self._warmth.cold_start_s
            self._job_id: Optional[str] = None

    def _advance(self, now: float) -> None:
        if self._state == "warming" and now >= self._warm_at:
            self._state = "warm"
            self._last_used = self._warm_at
        if self._state == "warm" and now - self._last_used >= self._warmth.keep_warm_s:
            self._state = "cold"

    def _start_warming(self, now: float, seconds: float) -> None:
        self._load_s = seconds
        if seconds <= 0:
            self._state = "warm"
            self._last_used = now
            return
        self._state = "warming"
        self._warm_at = now + seconds
        self._job_id = "job-" + uuid.uuid4().hex[:16]

    def force_cold(self) -> None:
        with self._lock:
            self._state = "cold"

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
            if self._state == "cold":
                self._start_warming(now, self._warmth.cold_start_s)
            if self._state == "warming":
                return max(0.0, self._warm_at - now)
            self._last_used = now
            return None

    @property
    def load_eta_s(self) -> float:
        """Duration of a full load (a property of the operation, not a countdown)."""
        with self._lock:
            return self._load_s if self._state == "warming" else self._warmth.cold_start_s

    @property
    def warming_job_id(self) -> Optional[str]:
        with self._lock:
            return self._job_id

    # --- queue and worker ---------------------------------------------------------------------
    def _ensure_worker(self) -> asyncio.Queue[_Job]:
        loop = asyncio.get_running_loop()
        if self._queue is None or self._loop is not loop or self._worker is None or \
                self._worker.done():
            # A restarted server runs a new event loop: queue and worker belong to it.
            self._loop = loop
            self._queue = asyncio.Queue()
            self._worker = loop.create_task(self._work(self._queue))
        return self._queue

    def reset_max_queue_depth(self) -> None:
        with self._lock:
            self.max_queue_depth = self.queue_depth

    def _depth(self, change: int) -> None:
        with self._lock:
            self.queue_depth += change
            self.max_queue_depth = max(self.max_queue_depth, self.queue_depth)

    async def infer(
        self,
        observation: PolicyObservation,
        hold: Optional[Callable[[], Awaitable[None]]] = None,
    ) -> Inference:
        """Queue behind earlier requests for this model (FIFO) and wait for the result."""
        queue = self._ensure_worker()
        job = _Job(observation, asyncio.get_running_loop().create_future(), time.monotonic(), hold)
        self._depth(+1)
        try:
            queue.put_nowait(job)
            return await job.future
        finally:
            self._depth(-1)

    async def _work(self, queue: asyncio.Queue[_Job]) -> None:
        loop = asyncio.get_running_loop()
        while True:
            job = await queue.get()
            started = time.monotonic()
            try:
                if job.hold is not None:
                    await job.hold()
                latency_s = sample_latency_s(
                    self._latency.latency_ms
                    if self._latency.latency_ms is not None
                    else float(getattr(self.policy, "latency_ms", 0.0) or 0.0),
                    self._latency.jitter_ms,
                    self._latency.scale,
                    self._rng,
                )
                computing = time.monotonic()
                rows = await loop.run_in_executor(None, self.policy.steps, job.observation)
                spent = time.monotonic() - computing
                if latency_s > spent:
                    await asyncio.sleep(latency_s - spent)
                finished = time.monotonic()
                result = Inference(
                    rows=[list(r) for r in rows],
                    queue_ms=(started - job.enqueued) * 1000.0,
                    inference_ms=(finished - computing) * 1000.0,
                )
            except asyncio.CancelledError:
                if not job.future.done():
                    job.future.cancel()
                raise
            except Exception as exc:  # a plug-in policy's failure goes back to its request
                if not job.future.done():
                    job.future.set_exception(exc)
                continue
            if not job.future.done():
                job.future.set_result(result)
