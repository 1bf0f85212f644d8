"""Loopback-only control of faults, counters, latency and warmth (not in the OpenAPI document)."""

from __future__ import annotations

from dataclasses import asdict
from typing import Any, Dict, Optional

from fastapi import APIRouter, Depends, HTTPException
from pydantic import BaseModel, ConfigDict

from sequence_ai_gateway.http.routes.access import GatewayDep, require_loopback

router = APIRouter(prefix="/_control", include_in_schema=False,
                   dependencies=[Depends(require_loopback)])


class FaultIn(BaseModel):
    model_config = ConfigDict(extra="forbid")
    fault: str
    count: int = 1
    model: Optional[str] = None
    seconds: Optional[float] = None
    status: Optional[int] = None
    fields: Optional[Dict[str, Any]] = None
    rows: Optional[int] = None


class LatencyIn(BaseModel):
    model_config = ConfigDict(extra="forbid")
    latency_ms: Optional[float] = None
    jitter_ms: Optional[float] = None
    scale: Optional[float] = None
    network_ms: Optional[float] = None
    per_kb_ms: Optional[float] = None
    spread: Optional[float] = None


class ColdIn(BaseModel):
    model_config = ConfigDict(extra="forbid")
    model: str


@router.post("/faults")
async def add_fault(spec: FaultIn, gateway: GatewayDep) -> Dict[str, Any]:
    try:
        made = gateway.inject(spec.fault, count=spec.count, model=spec.model,
                              seconds=spec.seconds, status=spec.status, fields=spec.fields,
                              rows=spec.rows)
    except ValueError as exc:
        raise HTTPException(422, str(exc)) from None
    return {"pending": [asdict(f) for f in gateway.faults.pending()], "added": asdict(made)}


@router.delete("/faults")
async def clear_faults(gateway: GatewayDep) -> Dict[str, Any]:
    gateway.clear_faults()
    return {"pending": []}


@router.get("/counters")
async def counters(gateway: GatewayDep) -> Dict[str, Any]:
    return gateway.counters()


@router.post("/latency")
async def latency(spec: LatencyIn, gateway: GatewayDep) -> Dict[str, Any]:
    try:
        gateway.set_latency(**spec.model_dump())
    except ValueError as exc:
        raise HTTPException(422, str(exc)) from None
    return dict(gateway.latency.__dict__)


@router.post("/reset")
async def reset(gateway: GatewayDep) -> Dict[str, Any]:
    gateway.reset()
    return gateway.counters()


@router.post("/cold")
async def cold(spec: ColdIn, gateway: GatewayDep) -> Dict[str, Any]:
    try:
        gateway.force_cold(spec.model)
    except ValueError as exc:
        raise HTTPException(404, str(exc)) from None
    return {"cold": spec.model}
