"""The data plane: one worker's ``/observe``, ``/act``, ``/ping`` and ``/act/episode_end``.

Straight to the worker with its own bearer secret (the account key never goes there), its
certificate checked by the pin connect handed out, and bodies in msgpack.
"""

from __future__ import annotations

import json
import uuid
from typing import Mapping, Optional

from .._transport.deadline import Exchange
from .._transport.pinned_tls import pinned_context
from .._transport.transport import Transport
from ..errors import InvalidResponse
from . import codec
from .control import Seat

__all__ = ["REQUEST_ID_HEADER", "SESSION_HEADER", "Worker"]

SESSION_HEADER = "X-Seq-Session"
REQUEST_ID_HEADER = "X-Seq-Request-Id"


class Worker:
    """One worker seat. Safe from any thread; each call may be aborted through its exchange."""

    def __init__(self, seat: Seat, *, session: str, timeout_s: float) -> None:
        self.seat = seat
        self.transport = Transport(
            base_url=seat.worker_url,
            api_key=seat.direct_secret,
            timeout_s=timeout_s,
            verify=pinned_context(seat.cert_fingerprint),
            headers={SESSION_HEADER: session, "Accept": codec.MEDIA_TYPE},
        )

    @property
    def epoch(self) -> int:
        return self.seat.lease.epoch

    def _post(self, path: str, body: Mapping[str, object], *, timeout: Optional[float],
              exchange: Optional[Exchange]) -> Mapping[str, object]:
        data, media = self.transport.send_bytes(
            "POST", path, codec.pack(body), content_type=codec.MEDIA_TYPE,
            headers={REQUEST_ID_HEADER: uuid.uuid4().hex}, timeout=timeout, exchange=exchange)
        try:
            answer = codec.unpack(data) if media.startswith(codec.MEDIA_TYPE) else _json(data)
        except ValueError as exc:
            raise InvalidResponse(f"POST {path} answered a body that cannot be read: {exc}",
                                  status=200) from None
        if not isinstance(answer, Mapping):
            raise InvalidResponse(f"POST {path} answered {answer!r:.80}; expected a map",
                                  status=200)
        return answer

    def observe(self, episode: str, seq: int, inputs: Mapping[str, object], *,
                timeout: Optional[float] = None, exchange: Optional[Exchange] = None) -> None:
        """Post observation ``seq`` of ``episode``."""
        self._post("/observe", {"episode_id": episode, "frames": [{"seq": seq, "inputs": inputs}],
                                "skipped": []}, timeout=timeout, exchange=exchange)

    def act(self, episode: str, seq: int, *, timeout: Optional[float] = None,
            exchange: Optional[Exchange] = None) -> object:
        """The deployment's outputs for the newest observation of ``episode`` (``seq`` on)."""
        answer = self._post("/act", {"episode_id": episode, "seq": seq},
                            timeout=timeout, exchange=exchange)
        if "outputs" not in answer:
            raise InvalidResponse("POST /act answered no 'outputs'", status=200)
        return answer["outputs"]

    def end_episode(self, episode: str, *, timeout: Optional[float] = None) -> None:
        self._post("/act/episode_end", {"episode_id": episode}, timeout=timeout, exchange=None)

    def ping(self, *, timeout: Optional[float] = None) -> bool:
        answer = self.transport.get("/ping", timeout=timeout)
        return isinstance(answer, Mapping) and bool(answer.get("ok"))

    def close(self) -> None:
        self.transport.abort()


def _json(data: bytes) -> object:
    return json.loads(data) if data else {}
