"""What an injected fault does to the one ``POST /v1/act`` call that takes it."""

from __future__ import annotations

import json
import math
from typing import Any, Awaitable, Callable, Dict, Optional

from fastapi import HTTPException
from fastapi.responses import Response

from sequence_ai_gateway.core import Gateway
from sequence_ai_gateway.faults import Fault, FaultKind
from sequence_ai_gateway.responses import RawJSONResponse, ResetResponse
from sequence_ai_gateway.serving import ModelServer

Hold = Callable[[], Awaitable[None]]

_STATUS_DETAIL = {
    401: "API key not recognised (injected fault)",
    402: "balance exhausted (injected fault)",
    500: "internal server error (injected fault)",
    503: "service unavailable (injected fault)",
    504: "upstream timed out (injected fault)",
}


async def before_inference(
    gateway: Gateway, server: ModelServer, fault: Optional[Fault]
) -> Optional[Hold]:
    """Apply the faults that act before the model's queue; return a hold for its worker."""
    if fault is None:
        return None
    if fault.kind is FaultKind.STATUS:
        status = fault.status or 500
        raise HTTPException(status, _STATUS_DETAIL[status])
    if fault.kind is FaultKind.STALL:
        await gateway.wait_stall(fault.seconds)
    elif fault.kind is FaultKind.WARMING:
        server.force_warming(gateway.forced_warming_s(fault.seconds))
    elif fault.kind is FaultKind.HOLD:
        seconds = fault.seconds

        async def hold() -> None:
            await gateway.wait_stall(seconds)
        return hold
    return None


def faulted_answer(fault: Optional[Fault], body: Dict[str, Any]) -> Optional[Response]:
    """Alter a finished 200 body in place, or replace it; None when the body goes out as is."""
    if fault is None:
        return None
    steps = body["action_chunk"]["steps"]
    if fault.kind is FaultKind.RESET:
        return ResetResponse()
    if fault.kind is FaultKind.MALFORMED:
        return RawJSONResponse(b'{"id": "act-malformed", "action_chunk": {"steps": [[0.0, ')
    if fault.kind in (FaultKind.NAN, FaultKind.INF) and steps:
        steps[len(steps) // 2]["values"][0] = math.nan if fault.kind is FaultKind.NAN else math.inf
        return RawJSONResponse(json.dumps(body, allow_nan=True).encode())
    if fault.kind is FaultKind.WRONG_DIM:
        for step in steps:
            step["values"].append(0.0)
    if fault.kind is FaultKind.EMPTY:
        body["action_chunk"]["steps"] = []
        body["action_chunk"]["covers_seconds"] = 0.0
    return None
