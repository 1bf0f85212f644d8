"""Faults below the app's responses: bytes written straight to a request's socket (headers
that never end, endless ``102 Processing``), and a body under stacked content codings."""

from __future__ import annotations

import asyncio
import gzip
import threading
import zlib
from typing import Any, Awaitable, Callable, Dict, Tuple

from fastapi.responses import Response

from sequence_ai_gateway.faults.book import Fault, FaultKind
from sequence_ai_gateway.http.responses import InjectedReset

# Zeros compressed a mebibyte at a time: the bomb is built without holding what it decodes to.
_BLOCK = b"\0" * (1 << 20)


async def serve_raw(
    transport: Any, fault: Fault, pause: Callable[[float], Awaitable[bool]]
) -> None:
    """Write the raw fault to ``transport`` until it is released or the client has gone, then
    drop the connection. Raises ``InjectedReset`` so the app sends nothing after it."""
    if fault.kind is FaultKind.ENDLESS_HEADERS:
        transport.write(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nX-Padding: ")
        piece = b"a"
    else:
        piece = b"HTTP/1.1 102 Processing\r\n\r\n"
    while not transport.is_closing():
        transport.write(piece)
        if await pause(fault.pause_s):
            break
    transport.abort()
    # Lets connection_lost run first, so the server sees a gone client, not an app error.
    await asyncio.sleep(0)
    raise InjectedReset(f"injected fault: {fault.kind.value} ended")


_BOMBS: Dict[Tuple[int, int], bytes] = {}
_BOMBS_LOCK = threading.Lock()


def _zeros_gzip(decoded_bytes: int) -> bytes:
    packer = zlib.compressobj(9, zlib.DEFLATED, 16 + zlib.MAX_WBITS)
    parts = []
    left = decoded_bytes
    while left > 0:
        block = _BLOCK if left >= len(_BLOCK) else _BLOCK[:left]
        parts.append(packer.compress(block))
        left -= len(block)
    parts.append(packer.flush())
    return b"".join(parts)


def stacked_body(layers: int, decoded_bytes: int) -> bytes:
    """``decoded_bytes`` zeros under ``layers`` gzip codings; built once per shape."""
    key = (layers, decoded_bytes)
    with _BOMBS_LOCK:
        cached = _BOMBS.get(key)
    if cached is not None:
        return cached
    body = _zeros_gzip(decoded_bytes)
    for _ in range(layers - 1):
        body = gzip.compress(body, 9)
    with _BOMBS_LOCK:
        _BOMBS[key] = body
    return body


async def stacked_response(fault: Fault) -> Response:
    fields = fault.fields or {}
    layers, size = int(fields["layers"]), int(fields["decoded_bytes"])
    # Seconds of compression for a gibibyte: off the event loop.
    body = await asyncio.get_running_loop().run_in_executor(None, stacked_body, layers, size)
    return Response(body, media_type="application/json",
                    headers={"Content-Encoding": ", ".join(["gzip"] * layers)})
