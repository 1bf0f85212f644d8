"""``GET /v1/act/ready``: is the model warm; polling a cold one starts loading it (§1.5)."""

from __future__ import annotations

from typing import Any, Dict

from fastapi import APIRouter, Request

from sequence_ai_gateway.http.routes.access import GatewayDep, authorise, find_row
from sequence_ai_gateway.http.wire import error_responses

router = APIRouter()


@router.get("/v1/act/ready", responses=error_responses(401, 404))
async def ready(request: Request, model: str, gateway: GatewayDep) -> Dict[str, Any]:
    if gateway.platform is not None and model in gateway.platform.deployments:
        from sequence_ai_gateway.platform.control import ready as deployment_ready

        return deployment_ready(request, model)
    authorise(gateway, request, billed=False)
    server = gateway.servers[find_row(gateway, model)["id"]]
    fault = gateway.faults.take(server.row["id"], endpoint="ready")
    if fault is not None:
        # ``ready_stall``: a readiness check that answers late, or (seconds None) only once
        # faults are cleared.
        await gateway.wait_stall(fault.seconds, gateway.release_generation)
    remaining = server.use()
    return {"ready": remaining is None, "eta_s": server.load_eta_s}
