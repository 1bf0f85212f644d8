"""``GET /v1/health``: a liveness answer that needs no key."""

from __future__ import annotations

from typing import Dict

from fastapi import APIRouter

router = APIRouter()


@router.get("/v1/health")
async def health() -> Dict[str, str]:
    return {"backend": "sequence_ai-local-gateway (simulated models)", "auth": "keystore"}
