"""Response classes of the gateway and the handlers that turn exceptions into error bodies."""

from __future__ import annotations

import asyncio
import json
import math
from typing import Any, Awaitable, Callable, Optional

from fastapi import Request
from fastapi.encoders import jsonable_encoder
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, Response
from starlette.exceptions import HTTPException as StarletteHTTPException


class InjectedReset(Exception):
    """Raised after a partial response so the server drops the connection (``reset`` fault)."""


def ascii_json(content: Any) -> bytes:
    """Compact JSON escaped to ASCII: a lone surrogate echoed from a request cannot break it."""
    return json.dumps(content, ensure_ascii=True, allow_nan=False,
                      separators=(",", ":")).encode("ascii")


class AsciiJSONResponse(JSONResponse):
    def render(self, content: Any) -> bytes:
        return ascii_json(content)


class RawJSONResponse(Response):
    media_type = "application/json"


class ResetResponse(Response):
    """Starts a 200, sends part of the body, then fails so the connection is dropped."""

    def __init__(self) -> None:
        super().__init__(content=b"", media_type="application/json")

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        await send({
            "type": "http.response.start",
            "status": 200,
            "headers": [(b"content-type", b"application/json"), (b"content-length", b"4096")],
        })
        await send({"type": "http.response.body", "body": b'{"id": "act-', "more_body": True})
        raise InjectedReset("injected fault: connection reset mid-response")


class TrickleResponse(Response):
    """A valid 200 sent one byte per ``interval_s`` (``trickle`` fault). ``pause`` waits one
    interval and says whether the fault was released (cleared, server stopping): the rest then
    goes at once. Nothing more is sent once the client has gone."""

    def __init__(
        self, body: bytes, interval_s: float, pause: Callable[[float], Awaitable[bool]]
    ) -> None:
        super().__init__(content=b"", media_type="application/json")
        self._body = body
        self._interval_s = interval_s
        self._pause = pause

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        await send({
            "type": "http.response.start",
            "status": 200,
            "headers": [(b"content-type", b"application/json"),
                        (b"content-length", str(len(self._body)).encode())],
        })
        gone = asyncio.ensure_future(_disconnected(receive))
        try:
            sent, released = 0, False
            while sent < len(self._body):
                size = len(self._body) - sent if released else 1
                await send({"type": "http.response.body", "body": self._body[sent:sent + size],
                            "more_body": sent + size < len(self._body)})
                sent += size
                if sent < len(self._body):
                    pausing = await _unless_gone(self._pause(self._interval_s), gone)
                    if pausing is None:
                        return
                    released = pausing
        finally:
            gone.cancel()


async def _disconnected(receive: Any) -> None:
    while (await receive())["type"] != "http.disconnect":
        pass


async def _unless_gone(pause: Awaitable[bool], gone: asyncio.Future[None]) -> Optional[bool]:
    """The pause's answer, or None when the client disconnected first."""
    waiting = asyncio.ensure_future(pause)
    await asyncio.wait({waiting, gone}, return_when=asyncio.FIRST_COMPLETED)
    if not waiting.done():
        waiting.cancel()
        return None
    return waiting.result()


def _json_safe(value: Any) -> Any:
    """Validation errors echo the input; a NaN there must not turn a 422 into a 500."""
    if isinstance(value, float) and not math.isfinite(value):
        return repr(value)
    if isinstance(value, dict):
        return {k: _json_safe(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_json_safe(v) for v in value]
    return value


async def validation_error(request: Request, exc: Exception) -> JSONResponse:
    errors = exc.errors() if isinstance(exc, RequestValidationError) else [str(exc)]
    return AsciiJSONResponse({"detail": _json_safe(jsonable_encoder(errors))}, status_code=422)


async def http_error(request: Request, exc: Exception) -> Response:
    if not isinstance(exc, StarletteHTTPException):
        return AsciiJSONResponse({"detail": "internal server error"}, status_code=500)
    if exc.status_code in (204, 304):
        return Response(status_code=exc.status_code, headers=exc.headers)
    return AsciiJSONResponse({"detail": exc.detail}, status_code=exc.status_code,
                             headers=exc.headers)
