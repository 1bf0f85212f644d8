"""``DeploymentLink``: one robot session on a deployment — the connect, the worker it handed
out, the standby, the lease, the keep-alive, the episode — and the recovery of a failed call.

Recovery, each at most once per call: a 401 (the lease's epoch moved on) connects again; a
worker that cannot be reached or is draining hands over to the standby (the next connect says
it switched), else connects again; a 429 is waited out within its Retry-After and the call's
time. Every wait ends as soon as the call's exchange is aborted (an interrupt, a run's end).
"""

from __future__ import annotations

import threading
import time
import uuid
from typing import Mapping, Optional, Tuple

from .._transport.deadline import Exchange
from .._transport.transport import Transport
from ..errors import AuthError, RateLimited, SequencesError, Unavailable
from .control import ControlPlane, Deployment
from .worker import Worker

__all__ = ["DeploymentLink"]

# Attempts of one call: the first and up to two recoveries (a stale lease, then a dead worker).
ATTEMPTS = 3
# How often a wait checks whether its call was abandoned.
_WAIT_STEP_S = 0.02


class DeploymentLink:
    """Safe from any thread. Fields below ``_lock`` are guarded by it."""

    def __init__(self, transport: Transport, model: str) -> None:
        self.control = ControlPlane(transport, model, uuid.uuid4().hex)
        self._timeout_s = transport.timeout_s
        # Lock order: a leaf (no request is made under it).
        self._lock = threading.Lock()
        self._deployment: Optional[Deployment] = None
        self._worker: Optional[Worker] = None
        self._switched = False
        self._episode: Optional[str] = None
        self._last_episode: Optional[str] = None
        self._seq = 0
        self._closed = False
        self.failovers = 0
        self._stop = threading.Event()
        self._keepalive: Optional[threading.Thread] = None

    @property
    def session(self) -> str:
        return self.control.session

    @property
    def deployment(self) -> Optional[Deployment]:
        with self._lock:
            return self._deployment

    @property
    def connections_opened(self) -> int:
        with self._lock:
            worker = self._worker
        return 0 if worker is None else worker.transport.connections_opened

    # -- connecting -------------------------------------------------------------------------

    def connect(self, *, exchange: Optional[Exchange] = None,
                timeout: Optional[float] = None) -> Tuple[Worker, Deployment]:
        """The worker to use, connecting first when there is none (503 warming raises)."""
        with self._lock:
            if self._closed:
                raise SequencesError("the deployment's session was released; connect again")
            if self._worker is not None and self._deployment is not None:
                return self._worker, self._deployment
            switched = self._switched
        deployment = self.control.connect(switched=switched, timeout=timeout, exchange=exchange)
        worker = Worker(deployment.seat, session=self.session,
                        timeout_s=deployment.request_timeout_s or self._timeout_s)
        with self._lock:
            first = self._worker, self._deployment
            if first[0] is None or first[1] is None:
                self._worker, self._deployment, self._switched = worker, deployment, False
        if first[0] is not None and first[1] is not None:
            # Another thread connected meanwhile: keep the first, drop ours.
            worker.close()
            return first[0], first[1]
        self._start_keepalive(deployment)
        return worker, deployment

    def _drop(self, worker: Worker, *, standby: bool) -> None:
        """Stop using ``worker``: its standby takes over when one was handed out, else the
        next call connects again."""
        with self._lock:
            if self._worker is not worker:
                return
            deployment = self._deployment
            self._worker = None
            if standby and deployment is not None and deployment.standby is not None:
                seat = deployment.standby
                self._worker = Worker(seat, session=self.session,
                                      timeout_s=deployment.request_timeout_s or self._timeout_s)
                self._deployment = Deployment(seat, None, deployment.hz, deployment.valid_len,
                                              deployment.replan_at, deployment.request_timeout_s,
                                              deployment.keepalive_every_s)
                self._switched = True
            self.failovers += 1
        worker.close()

    # -- observing and acting ---------------------------------------------------------------

    def episode(self) -> str:
        with self._lock:
            if self._episode is None:
                self._episode, self._seq = uuid.uuid4().hex, 0
            return self._episode

    def infer(self, inputs: Mapping[str, object], *, exchange: Exchange,
              timeout: Optional[float] = None) -> Tuple[object, Deployment]:
        """Observe ``inputs`` and act on them: the deployment's outputs, as it returned them."""
        deadline = time.monotonic() + (timeout or self._timeout_s)
        with self._lock:
            if self._episode is None:
                self._episode, self._seq = uuid.uuid4().hex, 0
            episode, seq = self._episode, self._seq
            self._seq += 1
        error: Optional[SequencesError] = None
        for _ in range(ATTEMPTS):
            worker, deployment = self.connect(exchange=exchange, timeout=_left(deadline))
            try:
                worker.observe(episode, seq, inputs, timeout=_left(deadline), exchange=exchange)
                return worker.act(episode, seq, timeout=_left(deadline),
                                  exchange=exchange), deployment
            except AuthError as exc:
                # A stale lease (its epoch moved on, a rotated secret): connect again.
                if exc.status != 401:
                    raise
                error = exc
                self._drop(worker, standby=False)
            except RateLimited as exc:
                error = exc
                wait = exc.retry_after_s if exc.retry_after_s is not None else 0.5
                if time.monotonic() + wait >= deadline or not _wait(wait, exchange):
                    raise
            except Unavailable as exc:
                if exc.warming or exchange.ended is not None:
                    raise
                # Unreachable, draining, dead mid-act: the standby, else a new connect.
                error = exc
                self._drop(worker, standby=True)
        assert error is not None
        raise error

    def end_episode(self) -> Optional[str]:
        """End the current episode (the worker forgets its observations); its id, or None."""
        with self._lock:
            episode, worker = self._episode, self._worker
            self._episode = None
            if episode is not None:
                self._last_episode = episode
        if episode is not None and worker is not None:
            worker.end_episode(episode)
        return episode

    def label(self, success: bool, notes: str, episode: Optional[str] = None) -> str:
        """Label ``episode`` (the current one, else the last ended); its id."""
        with self._lock:
            chosen = episode or self._episode or self._last_episode
        if chosen is None:
            raise SequencesError("no episode to label: run or act first, or pass episode=")
        self.control.label(chosen, success, notes)
        return chosen

    # -- keep-alive and release -------------------------------------------------------------

    def _start_keepalive(self, deployment: Deployment) -> None:
        every = deployment.keepalive_every_s
        with self._lock:
            if every is None or self._keepalive is not None or self._closed:
                return
            thread = threading.Thread(target=self._keep, args=(every,), daemon=True,
                                      name="sequence_ai-keepalive")
            self._keepalive = thread
        thread.start()

    def _keep(self, every: float) -> None:
        while not self._stop.wait(every):
            try:
                if not self.control.keepalive(timeout=every):
                    with self._lock:
                        worker = self._worker
                    if worker is not None:
                        self._drop(worker, standby=False)
            except SequencesError:
                continue  # the next act finds out whether the seat is gone

    def close(self) -> None:
        """Release the seat and close the worker's connections. Idempotent."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
            worker, self._worker = self._worker, None
            connected = self._deployment is not None
        self._stop.set()
        if worker is not None:
            worker.close()
        if connected:
            try:
                self.control.release(timeout=2.0)
            except SequencesError:
                pass  # the seat expires on its own when its keep-alive stops


def _left(deadline: float) -> float:
    return max(0.05, deadline - time.monotonic())


def _wait(seconds: float, exchange: Exchange) -> bool:
    """Sleep ``seconds``; False as soon as ``exchange`` is aborted."""
    end = time.monotonic() + seconds
    while exchange.ended is None:
        left = end - time.monotonic()
        if left <= 0:
            return True
        time.sleep(min(left, _WAIT_STEP_S))
    return False
