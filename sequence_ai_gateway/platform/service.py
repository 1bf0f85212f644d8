"""The platform as the gateway serves it: deployments, keys, seats and leases, the worker, faults
and labels, behind the control plane's calls (``control.py``)."""

from __future__ import annotations

import datetime
import random
import threading
from typing import Any, Dict, List, Mapping, Optional, Sequence

from sequence_base.contract.connect import ConnectResponse, Lease
from sequence_base.contract.errors import WarmingError

from sequence_ai_gateway.models import catalogue
from sequence_ai_gateway.models.vision_policies import LookingPi05Droid
from sequence_ai_gateway.platform.deployments import DEPLOYMENTS, Deployment
from sequence_ai_gateway.platform.episodes import Label, Labels
from sequence_ai_gateway.platform.errors import ErrorCode, PlatformError
from sequence_ai_gateway.platform.faults import DEFAULT_RETRY_AFTER_S, KINDS, PlatformFaults
from sequence_ai_gateway.platform.keys import DEFAULT_ACCOUNT_KEY, Keys, default_robot_key
from sequence_ai_gateway.platform.seats import (
    KEEPALIVE_EVERY_S,
    LEASE_TTL_S,
    SEAT_TTL_S,
    Seat,
    Seats,
)
from sequence_ai_gateway.platform.worker import Worker, WorkerParts
from sequence_ai_gateway.service.serving import LatencySettings, ModelServer, WarmthSettings


class Platform:
    """Safe from any thread: the control plane runs on the gateway's loop, each worker on its
    own."""

    def __init__(
        self,
        latency: LatencySettings,
        warmth: WarmthSettings,
        *,
        account_keys: Optional[Sequence[str]] = None,
        robot_keys: Optional[Mapping[str, str]] = None,
        host: str = "127.0.0.1",
        lease_ttl_s: int = LEASE_TTL_S,
    ) -> None:
        # The gateway's own settings objects: set_latency changes the workers' time too.
        self.latency, self.warmth = latency, warmth
        self.host = host
        self.deployments: Dict[str, Deployment] = {d.name: d for d in DEPLOYMENTS}
        self.keys = Keys(account_keys or [DEFAULT_ACCOUNT_KEY],
                         robot_keys if robot_keys is not None
                         else {default_robot_key(name): name for name in self.deployments})
        self.seats = Seats(lease_ttl_s)
        self.faults = PlatformFaults()
        self.labels = Labels()
        self._lock = threading.Lock()
        self._generation = 0
        self._seeds = 0  # each model server's latency draws, reproducible per generation
        self._worker: Optional[Worker] = None
        self._retired: List[Worker] = []

    @property
    def account_key(self) -> str:
        return self.keys.account_keys[0]

    # --- workers ---------------------------------------------------------------------------
    def _parts(self) -> WorkerParts:
        return WorkerParts(self.seats, self.faults, self.deployments, self._model_server,
                           self.worker_died)

    def _model_server(self, deployment: Deployment) -> ModelServer:
        """The looking model behind a deployment, on the gateway's latency model (its
        ``latency_ms``, ``jitter_ms`` and ``scale`` apply to the worker as to ``/v1/act``)."""
        self._seeds += 1
        return ModelServer(catalogue.simulated_row(deployment.template), LookingPi05Droid(),
                           self.latency, self.warmth, random.Random(self._seeds), 1)

    def _start_worker(self) -> Worker:
        """A new worker generation, serving (called under _lock)."""
        self._generation += 1
        worker = Worker(self._generation, self._parts(), self.host)
        worker.start()
        self._worker = worker
        return worker

    def start(self) -> None:
        with self._lock:
            if self._worker is None:
                self._start_worker()

    def worker(self) -> Worker:
        with self._lock:
            return self._worker if self._worker is not None else self._start_worker()

    def worker_died(self, worker: Worker) -> None:
        """``worker`` is gone (the ``die`` fault): its connections drop, a new one serves."""
        with self._lock:
            if self._worker is worker:
                self._start_worker()
        worker.stop(abort=True)

    def drain(self) -> None:
        """The serving worker drains (its acts answer 503 draining); a new one takes over."""
        with self._lock:
            old = self._worker
            self._start_worker()
            if old is not None:
                old.draining = True
                self._retired.append(old)

    def stop(self) -> None:
        with self._lock:
            workers = [*self._retired, *([self._worker] if self._worker else [])]
            self._worker, self._retired = None, []
        for worker in workers:
            worker.stop(abort=True)

    # --- the control plane -----------------------------------------------------------------
    def deployment(self, key: Optional[str], name: Any) -> Deployment:
        """The named deployment, for this key: 401/403 for the key, 404 for the name."""
        if not isinstance(name, str) or not name:
            raise PlatformError(ErrorCode.INVALID_REQUEST,
                                f"model: {name!r}; expected a deployment's name")
        self.keys.check(key, name)
        found = self.deployments.get(name)
        if found is None:
            raise PlatformError(
                ErrorCode.NOT_FOUND, f"no deployment named {name!r} in this account",
                hint=f"deployments here: {', '.join(self.deployments)}",
                details={"resource": "deployment", "name": name})
        return found

    def _warming(self, deployment: Deployment) -> Optional[float]:
        return self.faults.warming_s(deployment.name)

    def connect(self, key: Optional[str], body: Mapping[str, Any]) -> Dict[str, Any]:
        deployment = self.deployment(key, body.get("model"))
        session = body.get("session")
        if not isinstance(session, str) or not session:
            raise PlatformError(ErrorCode.INVALID_REQUEST,
                                f"session: {session!r}; expected a non-empty string")
        eta = self._warming(deployment)
        if eta is not None:
            warming = WarmingError(detail=f"{deployment.name} is starting; about {eta:.1f} s left",
                                   retry_after_s=round(eta, 3), details={"eta_s": round(eta, 3)})
            raise PlatformError(ErrorCode.WARMING, warming.detail,
                                retry_after_s=warming.retry_after_s,
                                details=warming.details)
        worker = self.worker()
        seat = self.seats.connect(deployment.name, session, worker.generation)
        return self._coordinates(deployment, worker, seat)

    def _coordinates(self, deployment: Deployment, worker: Worker, seat: Seat) -> Dict[str, Any]:
        expires = datetime.datetime.fromtimestamp(seat.expires_at, datetime.timezone.utc)
        answer = ConnectResponse(
            worker_url=worker.url,
            cert_fingerprint=worker.certificate.fingerprint,
            direct_secret=seat.secret,
            lease=Lease(ttl_s=self.seats.ttl_s, expires_at=expires, epoch=seat.epoch),
            hz=deployment.hz,
            action_chunk_valid_len=deployment.action_chunk_valid_len,
            action_chunk_replan_at=deployment.action_chunk_replan_at,
        ).model_dump(mode="json", exclude_none=True)
        # Fields the published client reads beyond sequence-base 0.7.0's model.
        answer.update(
            request_timeout_s=deployment.request_timeout_s,
            keepalive={"every_s": KEEPALIVE_EVERY_S, "seat_ttl_s": SEAT_TTL_S},
            params={},
        )
        return answer

    def ready(self, key: Optional[str], name: str, session: Optional[str]) -> Dict[str, Any]:
        deployment = self.deployment(key, name)
        eta = self._warming(deployment)
        if eta is not None:
            return {"ready": False, "eta_s": round(eta, 3), "status": "starting"}
        answer: Dict[str, Any] = {"ready": True, "eta_s": 0.0, "status": "running"}
        if session:
            answer["keepalive"] = {"every_s": KEEPALIVE_EVERY_S, "seat_ttl_s": SEAT_TTL_S}
        return answer

    def keepalive(self, key: Optional[str], body: Mapping[str, Any]) -> Dict[str, Any]:
        deployment = self.deployment(key, body.get("model"))
        held = self.seats.keep(deployment.name, str(body.get("session")))
        return {"held": held, "every_s": KEEPALIVE_EVERY_S, "seat_ttl_s": SEAT_TTL_S}

    def release(self, key: Optional[str], body: Mapping[str, Any]) -> Dict[str, Any]:
        deployment = self.deployment(key, body.get("model"))
        return {"released": self.seats.release(deployment.name, str(body.get("session")))}

    def label(self, key: Optional[str], name: str, episode: str,
              body: Mapping[str, Any]) -> Dict[str, Any]:
        deployment = self.deployment(key, name)
        success, notes = body.get("success"), body.get("notes", "")
        if not isinstance(success, bool):
            raise PlatformError(ErrorCode.INVALID_REQUEST,
                                f"success: {success!r}; expected true or false")
        if not isinstance(notes, str):
            raise PlatformError(ErrorCode.INVALID_REQUEST, f"notes: {notes!r}; expected a string")
        self.labels.put(deployment.name, episode, Label(success, notes))
        return {"deployment": deployment.name, "episode_id": episode, "success": success,
                "notes": notes}

    # --- faults ----------------------------------------------------------------------------
    def inject(self, kind: str, deployment: str = "my-pi05", *, count: int = 1,
               seconds: float = 1.0, retry_after_s: float = DEFAULT_RETRY_AFTER_S) -> None:
        """Arm one fault (faults.py lists them); a bad kind or deployment is a ValueError."""
        if kind not in KINDS:
            raise ValueError(f"fault {kind!r}: expected one of {', '.join(KINDS)}")
        if deployment not in self.deployments:
            raise ValueError(f"deployment {deployment!r}: expected one of "
                             f"{', '.join(self.deployments)}")
        if kind == "warming":
            self.faults.warm_after(deployment, seconds)
        elif kind == "busy":
            self.faults.arm_busy(deployment, count, retry_after_s)
        elif kind == "stall":
            self.faults.arm_stall(deployment, count, seconds)
        elif kind == "die":
            self.faults.arm_die(deployment, count)
        elif kind == "drain":
            self.drain()
        elif kind == "rotate":
            self.seats.rotate()
        else:
            self.seats.expire()

    def clear_faults(self) -> None:
        self.faults.clear()
