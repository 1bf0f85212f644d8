"""``GET /v1/models``: the public catalogue (§1.6), optionally of one endpoint."""

from __future__ import annotations

from typing import Any, Dict, Literal, Optional

from fastapi import APIRouter

from sequence_ai_gateway.faults.book import FaultKind
from sequence_ai_gateway.http.routes.access import GatewayDep

router = APIRouter()


@router.get("/v1/models")
async def models(
    gateway: GatewayDep,
    endpoint: Optional[Literal["act", "chat", "perceive"]] = None,
) -> Dict[str, Any]:
    gateway.training.settle()  # tuned models of simulated jobs that have just succeeded
    rows = gateway.catalogue.rows(endpoint)
    for row in rows:
        # A lying catalogue (``catalogue_fields``) alters the rows of its model, one use per
        # listing; ``catalogue_stall`` holds the listing back.
        since = gateway.release_generation
        fault = gateway.faults.take(row["id"], endpoint="models")
        if fault is None:
            continue
        if fault.kind is FaultKind.CATALOGUE_STALL:
            await gateway.wait_stall(fault.seconds, since)
        elif fault.fields:
            row.update(fault.fields)
    return {"data": rows}
