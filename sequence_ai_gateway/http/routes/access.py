"""What every route needs first: the gateway, the caller's key, the model's row."""

from __future__ import annotations

from typing import Annotated, Any, Dict, Optional

from fastapi import Depends, HTTPException, Request

from sequence_ai_gateway.service.state import Gateway, KeyStatus

_LOOPBACK_HOSTS = ("127.0.0.1", "::1", "localhost")


# Dependencies are coroutines: FastAPI would run plain functions on a worker thread.
async def current_gateway(request: Request) -> Gateway:
    return request.app.state.gateway


# A route parameter typed so is filled with the app's gateway (no OpenAPI footprint).
GatewayDep = Annotated[Gateway, Depends(current_gateway)]


def bearer(request: Request) -> Optional[str]:
    header = request.headers.get("authorization", "")
    scheme, _, token = header.partition(" ")
    if scheme.lower() != "bearer" or not token.strip():
        return None
    return token.strip()


def authorise(gateway: Gateway, request: Request, *, billed: bool) -> None:
    """401 for a missing or unknown key; 402 for an out-of-credit key on a billed call."""
    status = gateway.key_status(bearer(request))
    if status is KeyStatus.MISSING:
        raise HTTPException(401, "missing API key: send the header 'Authorization: Bearer <key>'")
    if status is KeyStatus.UNKNOWN:
        raise HTTPException(401, "API key not recognised (unknown, revoked or expired)")
    if status is KeyStatus.BROKE and billed:
        raise HTTPException(402, "balance exhausted: add credit to this key's account")


def find_row(gateway: Gateway, model: str) -> Dict[str, Any]:
    gateway.training.settle()  # a simulated job that has just succeeded serves its model now
    row = gateway.catalogue.find(model)
    if row is None:
        raise HTTPException(
            404,
            f"model {model!r} not found; GET /v1/models lists the served ids "
            f"({', '.join(gateway.catalogue.ids())})",
        )
    return row


async def require_loopback(request: Request) -> None:
    host = request.client.host if request.client else ""
    if host not in _LOOPBACK_HOSTS and not host.startswith("127."):
        raise HTTPException(403, "control endpoints answer only to loopback clients")
