"""What an injected fault does to the one ``POST /v1/act`` call that takes it."""

from __future__ import annotations

import asyncio
import json
import math
from typing import Any, Awaitable, Callable, Dict, Optional

from fastapi import HTTPException
from fastapi.responses import Response

from sequence_ai_gateway.faults.book import NESTED_DEPTH, Fault, FaultKind
from sequence_ai_gateway.http.responses import (
    RawJSONResponse,
    ResetResponse,
    TrickleResponse,
    ascii_json,
)
from sequence_ai_gateway.http.wire_faults import serve_raw, stacked_response
from sequence_ai_gateway.service.serving import ModelServer, Rows
from sequence_ai_gateway.service.state import Gateway

Hold = Callable[[], Awaitable[None]]

_STATUS_DETAIL = {
    401: "API key not recognised (injected fault)",
    402: "balance exhausted (injected fault)",
    429: "rate limit exceeded (injected fault)",
    500: "internal server error (injected fault)",
    503: "service unavailable (injected fault)",
    504: "upstream timed out (injected fault)",
}


async def before_inference(
    gateway: Gateway, server: ModelServer, fault: Optional[Fault], since: int
) -> Optional[Hold]:
    """Apply the faults that act before the model's queue; return a hold for its worker.
    A release (faults cleared, server stopping) after generation ``since`` ends any wait."""
    if fault is None:
        return None
    if fault.kind is FaultKind.STATUS:
        status = fault.status or 500
        if status == 429:
            raise HTTPException(429, f"{_STATUS_DETAIL[429]}: retry in {fault.retry_after} s",
                                headers={"Retry-After": fault.retry_after})
        raise HTTPException(status, _STATUS_DETAIL[status])
    if fault.kind is FaultKind.STALL:
        await gateway.wait_stall(fault.seconds, since)
    elif fault.kind is FaultKind.WARMING:
        server.force_warming(gateway.forced_warming_s(fault.seconds))
    elif fault.kind is FaultKind.HOLD:
        seconds = fault.seconds

        async def hold() -> None:
            await gateway.wait_stall(seconds, since)
        return hold
    return None


def shaped_rows(fault: Optional[Fault], rows: Rows) -> Rows:
    """The ``rows`` fault: the model's rows cut or extended (last row repeated) to its count."""
    if fault is None or fault.kind is not FaultKind.ROWS or fault.rows is None:
        return rows
    wanted = fault.rows
    return rows[:wanted] + [list(rows[-1]) for _ in range(wanted - len(rows))]


# The model a ``wrong_model`` answer names: one no request can have asked for.
WRONG_MODEL_ID = "accounts/sequences/models/not-the-model-asked"


def nested_json(fault: Fault, field: bytes) -> bytes:
    """The ``nested`` fault's body: its ``field`` is lists nested ``depth`` deep."""
    depth = int((fault.fields or {}).get("depth", NESTED_DEPTH))
    return b'{"' + field + b'": ' + b"[" * depth + b"]" * depth + b"}"


async def faulted_answer(
    gateway: Gateway, fault: Optional[Fault], since: int, body: Dict[str, Any], peer: Any = None
) -> Optional[Response]:
    """Alter a finished 200 body in place, or replace it; None when the body goes out as is.
    ``peer`` is the client's address, for the faults written straight to its socket."""
    if fault is None:
        return None
    chunk = body["action_chunk"]
    steps = chunk["steps"]
    if fault.kind in (FaultKind.ENDLESS_HEADERS, FaultKind.INTERIM):
        link = gateway.faults.links.find(peer)
        if link is not None:
            async def pause(seconds: float) -> bool:
                return await gateway.wait_stall(seconds, since)
            await serve_raw(link, fault, pause)
        return ResetResponse()
    if fault.kind is FaultKind.STACKED_ENCODING:
        return await stacked_response(fault)
    if fault.kind is FaultKind.WRONG_MODEL:
        body["model"] = WRONG_MODEL_ID
    elif fault.kind is FaultKind.HUGE_INT and steps:
        steps[len(steps) // 2]["values"][0] = 10 ** 400
        return RawJSONResponse(json.dumps(body).encode())
    if fault.kind is FaultKind.RESET:
        return ResetResponse()
    if fault.kind is FaultKind.MALFORMED:
        return RawJSONResponse(b'{"id": "act-malformed", "action_chunk": {"steps": [[0.0, ')
    if fault.kind is FaultKind.NESTED:
        return RawJSONResponse(nested_json(fault, b"action_chunk"))
    if fault.kind in (FaultKind.NAN, FaultKind.INF) and steps:
        steps[len(steps) // 2]["values"][0] = math.nan if fault.kind is FaultKind.NAN else math.inf
        return RawJSONResponse(json.dumps(body, allow_nan=True).encode())
    if fault.kind is FaultKind.WRONG_DIM:
        for step in steps:
            step["values"].append(0.0)
    elif fault.kind is FaultKind.EMPTY:
        chunk["steps"] = []
        chunk["covers_seconds"] = 0.0
    elif fault.kind is FaultKind.CHUNK_FIELDS and fault.fields:
        chunk.update(fault.fields)
    elif fault.kind is FaultKind.ROWS:
        # Tens of megabytes take seconds to encode: off the event loop.
        encoded = await asyncio.get_running_loop().run_in_executor(None, ascii_json, body)
        return RawJSONResponse(encoded)
    elif fault.kind is FaultKind.TRICKLE and fault.seconds:
        async def pause(seconds: float) -> bool:
            return await gateway.wait_stall(seconds, since)
        return TrickleResponse(ascii_json(body), fault.seconds, pause)
    return None
