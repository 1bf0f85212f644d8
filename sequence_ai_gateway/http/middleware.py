"""ASGI middleware in front of every route: request counters and the 2 MB body limit."""

from __future__ import annotations

import json
from typing import Any, Dict, List, Optional

from sequence_ai_gateway.service.state import Gateway

MAX_BODY_BYTES = 2 * 1024 * 1024
# Beyond this an oversized body is not read any further; the connection is simply answered.
MAX_DRAIN_BYTES = 64 * 1024 * 1024
_COUNTED_PATHS = {
    "/v1/health": "health",
    "/v1/models": "models",
    "/v1/act/ready": "ready",
    "/v1/act": "act",
    "/v1/chat": "chat",
}


class BodyLimitAndCounters:
    """Counts requests per endpoint and refuses bodies over the limit with 413 before anything
    parses them."""

    def __init__(self, app: Any, gateway: Gateway) -> None:
        self.app = app
        self.gateway = gateway

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        client = scope.get("client")
        self.gateway.first_request(
            tuple(client[:2]) if client else None, scope["path"].startswith("/_control/")
        )
        endpoint = _COUNTED_PATHS.get(scope["path"].rstrip("/") or "/")
        if endpoint is not None:
            self.gateway.count_request(endpoint)
        if scope["method"] not in ("POST", "PUT", "PATCH"):
            await self.app(scope, receive, send)
            return
        scope = _as_json(scope)
        # Read up to the limit without parsing; an oversized body is drained (so the client sees
        # the 413 rather than a reset) and refused.
        chunks: List[bytes] = []
        size = 0
        more = True
        while more:
            message = await receive()
            if message["type"] != "http.request":
                await self.app(scope, _replay([message]), send)
                return
            body = message.get("body", b"")
            size += len(body)
            more = message.get("more_body", False)
            if size > MAX_BODY_BYTES:
                if not await _drain(receive, size, more):
                    return
                declared = dict(scope["headers"]).get(b"content-length", b"")
                await _too_large(send, int(declared) if declared.isdigit() else None)
                return
            chunks.append(body)
        if endpoint == "act":
            self.gateway.count_body(size)
        await self.app(scope, _replay_body(b"".join(chunks), receive), send)


async def _too_large(send: Any, size: Optional[int]) -> None:
    told = f"{size} bytes" if size is not None else f"more than {MAX_BODY_BYTES} bytes"
    body = json.dumps({
        "detail": f"request body is {told}; the limit is {MAX_BODY_BYTES} bytes (2 MB): "
                  "send JPEG frames at the model's training_frame_size"
    }).encode()
    await send({
        "type": "http.response.start",
        "status": 413,
        "headers": [(b"content-type", b"application/json"),
                    (b"content-length", str(len(body)).encode())],
    })
    await send({"type": "http.response.body", "body": body})


async def _drain(receive: Any, size: int, more: bool) -> bool:
    """Read and discard the rest of an oversized body (up to a cap); False if the client left."""
    while more and size <= MAX_DRAIN_BYTES:
        message = await receive()
        if message["type"] != "http.request":
            return False
        size += len(message.get("body", b""))
        more = message.get("more_body", False)
    return True


def _as_json(scope: Dict[str, Any]) -> Dict[str, Any]:
    """Bodies are JSON whatever the declared type (e.g. curl's form default), so parse them so."""
    headers = [(k, v) for k, v in scope["headers"] if k != b"content-type"]
    headers.append((b"content-type", b"application/json"))
    return dict(scope, headers=headers)


def _replay(messages: List[Dict[str, Any]]) -> Any:
    async def receive() -> Dict[str, Any]:
        if messages:
            return messages.pop(0)
        return {"type": "http.disconnect"}
    return receive


def _replay_body(body: bytes, downstream: Any) -> Any:
    sent = False

    async def receive() -> Dict[str, Any]:
        nonlocal sent
        if not sent:
            sent = True
            return {"type": "http.request", "body": body, "more_body": False}
        return await downstream()
    return receive
