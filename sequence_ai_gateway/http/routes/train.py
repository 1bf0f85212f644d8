"""``/v1/train``: submit, list, read and cancel fine-tuning jobs, each key its own (§1.7)."""

from __future__ import annotations

from typing import Any, Dict, Optional

from fastapi import APIRouter, HTTPException, Query, Request

from sequence_ai_gateway.http.routes.access import GatewayDep, authorise, bearer, find_row
from sequence_ai_gateway.http.wire import TrainRequest, error_responses
from sequence_ai_gateway.service.training import (
    MAX_BASE_MODEL_CHARS,
    TrainRefused,
    check_text,
    check_trainable,
)

router = APIRouter()


def _caller(gateway: GatewayDep, request: Request, *, billed: bool) -> str:
    authorise(gateway, request, billed=billed)
    return bearer(request) or ""


@router.post("/v1/train", responses=error_responses(400, 401, 402, 404, 413, 422, 429, 503))
async def submit(body: TrainRequest, request: Request, gateway: GatewayDep) -> Dict[str, Any]:
    key = _caller(gateway, request, billed=True)
    config = body.config.model_dump(exclude_none=True) if body.config else {}
    training = gateway.training
    try:
        training.check_credit(key)  # credit before the model, as on /v1/act
        check_text("base_model", body.base_model, MAX_BASE_MODEL_CHARS)
        base = find_row(gateway, body.base_model)
        check_trainable(base)
        training.check_room(key)
        # A local dataset is read on a thread, bounded in time and threads.
        frames = await training.datasets.frames(body.dataset)
        job = training.submit(key, base, body.dataset, body.method, config, frames=frames)
        return job.wire()
    except TrainRefused as exc:
        raise HTTPException(exc.status, exc.detail) from None


@router.get("/v1/train", responses=error_responses(401))
async def listing(request: Request, gateway: GatewayDep, limit: int = 50,
                  status: Optional[str] = Query(None, max_length=32)) -> Dict[str, Any]:
    key = _caller(gateway, request, billed=False)
    return {"data": [job.wire() for job in gateway.training.jobs(key, limit, status)]}


@router.get("/v1/train/{job_id}", responses=error_responses(401, 404))
async def one(job_id: str, request: Request, gateway: GatewayDep) -> Dict[str, Any]:
    key = _caller(gateway, request, billed=False)
    try:
        return gateway.training.job(key, job_id).wire()
    except TrainRefused as exc:
        raise HTTPException(exc.status, exc.detail) from None


@router.delete("/v1/train/{job_id}", responses=error_responses(401, 404, 409))
async def cancel(job_id: str, request: Request, gateway: GatewayDep) -> Dict[str, Any]:
    key = _caller(gateway, request, billed=False)
    try:
        return gateway.training.cancel(key, job_id).wire()
    except TrainRefused as exc:
        raise HTTPException(exc.status, exc.detail) from None
