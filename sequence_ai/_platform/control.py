"""The control plane of a deployment on the gateway: connect, ready, keepalive, release, label.

``connect`` hands out a worker (URL, bearer secret, certificate pin, lease) and the deployment's
schedule (``hz``, valid rows, replan step); a cold deployment answers 503 warming with its ETA,
which the first request waits out as it does for a shared model.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Mapping, Optional, Tuple
from urllib.parse import quote

from .._transport.deadline import Exchange
from .._transport.transport import Transport
from ..errors import InvalidResponse

__all__ = ["ControlPlane", "Deployment", "Lease", "Seat"]


@dataclass(frozen=True)
class Lease:
    """How long a worker's secret holds: ``epoch`` rolls whenever the worker or secret changes."""

    epoch: int
    ttl_s: float


@dataclass(frozen=True)
class Seat:
    """One worker to send observations and acts to, and how to trust and address it."""

    worker_url: str
    direct_secret: str = field(repr=False)
    cert_fingerprint: str
    lease: Lease


@dataclass(frozen=True)
class Deployment:
    """What ``connect`` answered: the worker, an optional standby, and the schedule."""

    seat: Seat
    standby: Optional[Seat]
    hz: float
    valid_len: Optional[int]
    replan_at: Optional[int]
    request_timeout_s: Optional[float]
    keepalive_every_s: Optional[float]


def _field(body: Mapping[str, object], key: str, where: str) -> object:
    if key not in body:
        raise InvalidResponse(f"{where} has no {key!r}")
    return body[key]


def _text(body: Mapping[str, object], key: str, where: str) -> str:
    value = _field(body, key, where)
    if not isinstance(value, str) or not value:
        raise InvalidResponse(f"{where}.{key} is {value!r:.80}; expected a non-empty string")
    return value


def _number(value: object, where: str, *, positive: bool = True) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise InvalidResponse(f"{where} is {value!r:.80}; expected a number")
    if positive and value <= 0:
        raise InvalidResponse(f"{where} is {value!r}; expected a positive number")
    return float(value)


def _count(body: Mapping[str, object], key: str, where: str) -> Optional[int]:
    value = body.get(key)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise InvalidResponse(f"{where}.{key} is {value!r:.80}; expected a positive integer")
    return value


def _seat(body: object, where: str) -> Seat:
    if not isinstance(body, Mapping):
        raise InvalidResponse(f"{where} is {body!r:.80}; expected an object")
    lease = _field(body, "lease", where)
    if not isinstance(lease, Mapping):
        raise InvalidResponse(f"{where}.lease is {lease!r:.80}; expected an object")
    epoch = _field(lease, "epoch", f"{where}.lease")
    if isinstance(epoch, bool) or not isinstance(epoch, int):
        raise InvalidResponse(f"{where}.lease.epoch is {epoch!r:.80}; expected an integer")
    return Seat(
        worker_url=_text(body, "worker_url", where).rstrip("/"),
        direct_secret=_text(body, "direct_secret", where),
        cert_fingerprint=_text(body, "cert_fingerprint", where),
        lease=Lease(epoch, _number(_field(lease, "ttl_s", f"{where}.lease"),
                                   f"{where}.lease.ttl_s")),
    )


def parse_deployment(body: object) -> Deployment:
    """A connect answer, checked field by field (``InvalidResponse`` names the field)."""
    where = "connect"
    if not isinstance(body, Mapping):
        raise InvalidResponse(f"{where} answered {body!r:.80}; expected an object")
    hz = body.get("hz")
    if hz is None:
        raise InvalidResponse("connect has no 'hz': the deployment states no control rate")
    timeout = body.get("request_timeout_s")
    keepalive = body.get("keepalive")
    every = keepalive.get("every_s") if isinstance(keepalive, Mapping) else None
    standby = body.get("standby")
    return Deployment(
        seat=_seat(body, where),
        standby=None if standby is None else _seat(standby, f"{where}.standby"),
        hz=_number(hz, f"{where}.hz"),
        valid_len=_count(body, "action_chunk_valid_len", where),
        replan_at=_count(body, "action_chunk_replan_at", where),
        request_timeout_s=(None if timeout is None
                           else _number(timeout, f"{where}.request_timeout_s")),
        keepalive_every_s=None if every is None else _number(every, f"{where}.keepalive.every_s"),
    )


class ControlPlane:
    """The gateway's ``/v1/act/*`` and label routes for one deployment and robot session."""

    def __init__(self, transport: Transport, model: str, session: str) -> None:
        self.transport = transport
        self.model = model
        self.session = session

    def connect(
        self, *, switched: bool = False, timeout: Optional[float] = None,
        exchange: Optional[Exchange] = None,
    ) -> Deployment:
        body = {"model": self.model, "session": self.session, "standby": True,
                "switched": switched}
        answer = self.transport.post("/v1/act/connect", body, timeout=timeout, exchange=exchange)
        return parse_deployment(answer)

    def ready(
        self, *, timeout: Optional[float] = None, exchange: Optional[Exchange] = None
    ) -> Tuple[bool, Optional[float]]:
        answer = self.transport.get("/v1/act/ready",
                                    params={"model": self.model, "session": self.session},
                                    timeout=timeout, exchange=exchange)
        if not isinstance(answer, Mapping) or "ready" not in answer:
            raise InvalidResponse(f"GET /v1/act/ready answered {answer!r:.80}; expected 'ready'")
        eta = answer.get("eta_s")
        eta_s = None if eta is None or isinstance(eta, bool) or not isinstance(
            eta, (int, float)) else float(eta)
        return bool(answer["ready"]), eta_s

    def keepalive(self, *, timeout: Optional[float] = None) -> bool:
        """Keep this session's seat; False when the gateway no longer holds it."""
        answer = self.transport.post("/v1/act/keepalive",
                                     {"model": self.model, "session": self.session},
                                     timeout=timeout)
        return bool(isinstance(answer, Mapping) and answer.get("held"))

    def release(self, *, timeout: Optional[float] = None) -> None:
        self.transport.post("/v1/act/release", {"model": self.model, "session": self.session},
                            timeout=timeout)

    def label(self, episode: str, success: bool, notes: str) -> None:
        path = (f"/v1/deployments/{quote(self.model, safe='')}/episodes/"
                f"{quote(episode, safe='')}/label")
        self.transport.post(path, {"success": success, "notes": notes})
