"""``GET /v1/models``: the public catalogue (§1.6), optionally of one endpoint."""

from __future__ import annotations

from typing import Any, Dict, Literal, Optional

from fastapi import APIRouter

from sequence_ai_gateway.routes.access import GatewayDep

router = APIRouter()


@router.get("/v1/models")
async def models(
    gateway: GatewayDep,
    endpoint: Optional[Literal["act", "chat", "perceive"]] = None,
) -> Dict[str, Any]:
    gateway.training.settle()  # tuned models of simulated jobs that have just succeeded
    return {"data": gateway.catalogue.rows(endpoint)}
