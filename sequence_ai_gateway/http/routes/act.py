"""``POST /v1/act``: admit, check the observation, apply a fault, infer (the frames decoded at
the request's turn), answer one chunk (§1.4)."""

from __future__ import annotations

import asyncio
import contextlib
import math
import time
import uuid
from typing import Any, Dict, Iterator, List

from fastapi import APIRouter, HTTPException, Request
from fastapi.responses import Response

from sequence_ai_gateway.http.fault_effects import before_inference, faulted_answer, shaped_rows
from sequence_ai_gateway.http.responses import AsciiJSONResponse
from sequence_ai_gateway.http.routes.access import GatewayDep, authorise, bearer, find_row
from sequence_ai_gateway.http.wire import ActRequest, error_responses
from sequence_ai_gateway.models.catalogue import short_id
from sequence_ai_gateway.models.observations import (
    CheckedObservation,
    Frame,
    FrameTooLarge,
    ObservationRejected,
    check_observation,
)
from sequence_ai_gateway.service.admission import AdmissionRefused
from sequence_ai_gateway.service.serving import Inference, Rows
from sequence_ai_gateway.service.state import Gateway

router = APIRouter()
# Tokens a frame costs in ``usage`` (a ViT-style patch grid).
TOKENS_PER_FRAME = 256


@router.post(
    "/v1/act", responses=error_responses(400, 401, 402, 404, 413, 429, 503, 504)
)
async def act(body: ActRequest, request: Request, gateway: GatewayDep) -> Any:
    received = time.monotonic()
    row = _admit(gateway, request, body)
    # Bounded before any frame is looked at: each admitted request holds its body until answered.
    with _admitted(gateway, request):
        return await _served(gateway, request, body, row, received)


@contextlib.contextmanager
def _admitted(gateway: Gateway, request: Request) -> Iterator[None]:
    """429 with Retry-After past the requests in progress a key, or the gateway, may have."""
    try:
        with gateway.admission.admit(bearer(request) or ""):
            yield
    except AdmissionRefused as exc:
        raise HTTPException(
            429, exc.detail, headers={"Retry-After": str(exc.retry_after_s)}
        ) from None


async def _served(
    gateway: Gateway, request: Request, body: ActRequest, row: Dict[str, Any], received: float
) -> Any:
    checked = await _checked(row, body)
    server = gateway.servers[row["id"]]
    # The simulated network, before the model's queue: concurrent requests overlap it.
    transport_ms = await server.arrive(len(await request.body()))
    fault = gateway.faults.take(row["id"])
    since = gateway.release_generation  # clearing faults from now on releases this one's waits
    hold = await before_inference(gateway, server, fault, since)
    remaining = server.use()
    if remaining is not None:
        return _warming_response(gateway, row["id"], remaining)
    try:
        result = await server.infer(checked.decoded, hold)
    except ObservationRejected as exc:  # a frame whose pixels do not decode, found at its turn
        raise HTTPException(400, exc.detail) from None
    except Exception as exc:  # a plug-in policy raised
        raise HTTPException(500, f"policy for {short_id(row['id'])} failed: {exc}") from None
    _check_rows(result.rows, row)
    rows = shaped_rows(fault, result.rows)
    out = _answer(row, rows, _perf(received, transport_ms, result),
                  _usage(row, checked, body, rows), checked.warnings + result.notes)
    faulted = await faulted_answer(gateway, fault, since, out, _peer(request))
    return faulted if faulted is not None else AsciiJSONResponse(out)


def _peer(request: Request) -> Any:
    return tuple(request.client) if request.client else None


def _perf(received: float, transport_ms: float, result: Inference) -> Dict[str, float]:
    """The timing fields: ``ttfa_ms`` from receipt to answer is transport + queue + worker +
    the gateway's own work (checks, a stall) in ``gateway_ms``."""
    ttfa_ms = (time.monotonic() - received) * 1000.0
    spent = {
        "inference_ms": result.inference_ms,
        "queue_ms": result.queue_ms,
        "ttfa_ms": ttfa_ms,
        "transport_ms": transport_ms,
        "worker_ms": result.worker_ms,
        "gateway_ms": max(0.0, ttfa_ms - transport_ms - result.queue_ms - result.worker_ms),
    }
    return {name: round(value, 3) for name, value in spent.items()}


def _admit(gateway: Gateway, request: Request, body: ActRequest) -> Dict[str, Any]:
    """Key, credit, model and endpoint, in that order; the row of the model to serve."""
    authorise(gateway, request, billed=True)
    row = find_row(gateway, body.model)
    if row.get("endpoint") != "act":
        raise HTTPException(
            400, f"model {body.model!r} is served on /v1/{row.get('endpoint')}, not /v1/act"
        )
    return row


async def _checked(row: Dict[str, Any], body: ActRequest) -> CheckedObservation:
    """The §1.10 checks, off the event loop: decoding frames is the slow part."""
    obs = body.observation
    frames = [Frame(view=f.view, data=f.data) for f in obs.images]
    loop = asyncio.get_running_loop()
    try:
        return await loop.run_in_executor(
            None, check_observation, row, frames, obs.proprioception.joint_positions,
            obs.proprioception.gripper, obs.instruction, body.seed, dict(body.model_extra or {}),
            obs.proprioception.end_effector_pose,
        )
    except FrameTooLarge as exc:
        raise HTTPException(413, exc.detail) from None
    except ObservationRejected as exc:
        raise HTTPException(400, exc.detail) from None


def _warming_response(gateway: Gateway, model_id: str, remaining_s: float) -> Response:
    server = gateway.servers[model_id]
    retry = max(1, int(round(remaining_s)))
    detail = {
        "status": "warming_up",
        "retry_after_s": retry,
        "warming_job_id": server.warming_job_id,
        "message": (
            f"model {short_id(model_id)} is loading (full load takes about "
            f"{server.load_eta_s:.0f} s); retry in {retry} s"
        ),
    }
    return AsciiJSONResponse({"detail": detail}, status_code=503,
                             headers={"Retry-After": str(retry)})


def _check_rows(rows: Rows, row: Dict[str, Any]) -> None:
    """A plug-in policy's output must be a usable chunk; anything else is a server fault."""
    width = int(row["action_dim"])
    for i, values in enumerate(rows):
        if len(values) != width or not all(math.isfinite(float(v)) for v in values):
            raise HTTPException(
                500, f"policy for {short_id(row['id'])} returned an invalid step {i}: "
                     f"{len(values)} values (action_dim {width}) or a non-finite value"
            )
    if not rows:
        raise HTTPException(500, f"policy for {short_id(row['id'])} returned no steps")


def _usage(
    row: Dict[str, Any], checked: CheckedObservation, body: ActRequest, rows: Rows
) -> Dict[str, int]:
    state_values = len(checked.joint_positions) + len(checked.gripper)
    observation_tokens = (TOKENS_PER_FRAME * checked.frames_used
                          + len(body.observation.instruction.split()) + state_values)
    action_tokens = len(rows) * int(row["action_dim"])
    return {
        "observation_tokens": observation_tokens,
        "action_tokens": action_tokens,
        "total_tokens": observation_tokens + action_tokens,
        "frames_received": checked.frames_received,
        "frames_used": checked.frames_used,
    }


def _answer(
    row: Dict[str, Any],
    rows: Rows,
    perf: Dict[str, float],
    usage: Dict[str, int],
    warnings: List[str],
) -> Dict[str, Any]:
    hz = float(row["control_hz"])
    horizon = row.get("open_loop_horizon")
    covers = round(len(rows) / hz, 4)
    return {
        "id": "act-" + uuid.uuid4().hex,
        "model": row["id"],
        "action_chunk": {
            "steps": [{"index": i, "values": [float(v) for v in r]} for i, r in enumerate(rows)],
            "robot": row.get("robot") or "",
            "action_space": row.get("action_space") or "",
            "action_dim": int(row["action_dim"]),
            "control_frequency_hz": hz,
            "covers_seconds": covers,
            "open_loop_horizon": horizon,
            # With no open-loop horizon the whole chunk is usable runway.
            "sustains_seconds": round(horizon / hz, 4) if horizon else covers,
        },
        "perf": perf,
        "usage": usage,
        "warnings": warnings,
    }
