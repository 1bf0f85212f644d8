"""The control plane's routes on the gateway: connect, ready, keepalive, release, labels, and the
loopback fault switch. Every refusal is the platform's typed error body."""

from __future__ import annotations

import json
from typing import Any, Dict, Mapping, Optional

from fastapi import APIRouter, Depends, Request
from pydantic import BaseModel, Field

from sequence_ai_gateway.platform.errors import ErrorCode, PlatformError
from sequence_ai_gateway.platform.faults import DEFAULT_RETRY_AFTER_S
from sequence_ai_gateway.platform.service import Platform

router = APIRouter(tags=["platform"])


def bearer(request: Request) -> Optional[str]:
    scheme, _, token = request.headers.get("authorization", "").partition(" ")
    return token.strip() if scheme.lower() == "bearer" and token.strip() else None


async def require_loopback(request: Request) -> None:
    host = request.client.host if request.client else ""
    if host not in ("::1", "localhost") and not host.startswith("127."):
        raise PlatformError(ErrorCode.FORBIDDEN, "control endpoints answer loopback clients only")


def platform_of(request: Request) -> Platform:
    platform: Optional[Platform] = request.app.state.gateway.platform
    if platform is None:  # routes are included only with a platform; kept for the type
        raise PlatformError(ErrorCode.NOT_FOUND, "this gateway serves no platform")
    return platform


async def _json(request: Request) -> Mapping[str, Any]:
    try:
        body = json.loads(await request.body() or b"{}")
    except ValueError as exc:
        raise PlatformError(ErrorCode.INVALID_REQUEST, f"body is not JSON: {exc}") from None
    if not isinstance(body, dict):
        raise PlatformError(ErrorCode.INVALID_REQUEST,
                            f"body: {type(body).__name__}; expected a JSON object")
    return body


@router.post("/v1/act/connect")
async def connect(request: Request) -> Dict[str, Any]:
    return platform_of(request).connect(bearer(request), await _json(request))


@router.post("/v1/act/keepalive")
async def keepalive(request: Request) -> Dict[str, Any]:
    return platform_of(request).keepalive(bearer(request), await _json(request))


@router.post("/v1/act/release")
async def release(request: Request) -> Dict[str, Any]:
    return platform_of(request).release(bearer(request), await _json(request))


@router.post("/v1/deployments/{model}/episodes/{episode}/label")
async def label(model: str, episode: str, request: Request) -> Dict[str, Any]:
    return platform_of(request).label(bearer(request), model, episode, await _json(request))


def ready(request: Request, model: str) -> Dict[str, Any]:
    """``GET /v1/act/ready?model=&session=`` for a deployment (the ready route hands it here)."""
    return platform_of(request).ready(bearer(request), model, request.query_params.get("session"))


class PlatformFaultIn(BaseModel):
    kind: str
    deployment: str = "my-pi05"
    count: int = Field(1, ge=1)
    seconds: float = Field(1.0, ge=0)
    retry_after_s: float = Field(DEFAULT_RETRY_AFTER_S, ge=0)


control = APIRouter(prefix="/_control/platform", include_in_schema=False,
                    dependencies=[Depends(require_loopback)])


@control.post("/faults")
async def add_fault(spec: PlatformFaultIn, request: Request) -> Dict[str, Any]:
    try:
        platform_of(request).inject(spec.kind, spec.deployment, count=spec.count,
                                    seconds=spec.seconds, retry_after_s=spec.retry_after_s)
    except ValueError as exc:
        raise PlatformError(ErrorCode.INVALID_REQUEST, str(exc)) from None
    return {"armed": spec.kind}


@control.delete("/faults")
async def clear_faults(request: Request) -> Dict[str, Any]:
    platform_of(request).clear_faults()
    return {"cleared": True}


@control.get("/labels")
async def labels(request: Request) -> Dict[str, Any]:
    return platform_of(request).labels.all()
