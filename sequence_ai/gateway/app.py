"""FastAPI routes speaking PROTOCOL §1: health, catalogue, readiness, act, and loopback control."""

from __future__ import annotations

import asyncio
import json
import math
import time
import uuid
from dataclasses import asdict
from typing import Any, Awaitable, Callable, Dict, List, Literal, Optional, Union

from fastapi import FastAPI, HTTPException, Request
from fastapi.encoders import jsonable_encoder
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, Response
from pydantic import BaseModel, ConfigDict
from starlette.exceptions import HTTPException as StarletteHTTPException

from sequence_ai.gateway.catalogue import short_id
from sequence_ai.gateway.core import Gateway
from sequence_ai.gateway.faults import Fault
from sequence_ai.gateway.observations import Frame, ObservationRejected, check_observation

MAX_BODY_BYTES = 2 * 1024 * 1024
# Beyond this an oversized body is not read any further; the connection is simply answered.
MAX_DRAIN_BYTES = 64 * 1024 * 1024
_COUNTED_PATHS = {
    "/v1/health": "health",
    "/v1/models": "models",
    "/v1/act/ready": "ready",
    "/v1/act": "act",
}
_LOOPBACK_HOSTS = ("127.0.0.1", "::1", "localhost")


class InjectedReset(Exception):
    """Raised after a partial response so the server drops the connection (``reset`` fault)."""


# --- wire schema (§1.3); nested optionals accept explicit null like absent -----------------------
class ImageFrameIn(BaseModel):
    model_config = ConfigDict(extra="ignore")
    view: str
    data: str
    timestamp_ms: Optional[int] = None


class ProprioceptionIn(BaseModel):
    model_config = ConfigDict(extra="ignore", allow_inf_nan=False)
    joint_positions: List[float]
    joint_velocities: Optional[List[float]] = None
    end_effector_pose: Optional[List[float]] = None
    gripper: Optional[List[float]] = None


class ObservationIn(BaseModel):
    model_config = ConfigDict(extra="ignore")
    images: List[ImageFrameIn]
    proprioception: ProprioceptionIn
    instruction: str


class ActRequest(BaseModel):
    # Pass-through options (action_horizon, robot, ...) are accepted at the top level.
    model_config = ConfigDict(extra="allow")
    model: str
    observation: ObservationIn
    seed: Optional[int] = None


class FaultIn(BaseModel):
    model_config = ConfigDict(extra="forbid")
    fault: str
    count: int = 1
    model: Optional[str] = None
    seconds: Optional[float] = None
    status: Optional[int] = None


class LatencyIn(BaseModel):
    model_config = ConfigDict(extra="forbid")
    latency_ms: Optional[float] = None
    jitter_ms: Optional[float] = None
    scale: Optional[float] = None


class ColdIn(BaseModel):
    model_config = ConfigDict(extra="forbid")
    model: str


class ErrorBody(BaseModel):
    """Every error answer (§1.9): a string, an object (warming 503) or a list (422)."""

    detail: Any


_ERROR_MEANING = {
    400: "observation refused: a declared view missing, a frame that does not decode or is "
         "outside the trained aspect ratio, or a model served on another endpoint",
    401: "API key missing or unknown",
    402: "balance exhausted",
    404: "unknown model",
    413: "request body over 2 MB",
    503: "model warming up (detail.status 'warming_up' and Retry-After) or unavailable",
    504: "upstream timed out",
}


def _errors(*statuses: int) -> Dict[Union[int, str], Dict[str, Any]]:
    """OpenAPI entries for the error statuses a route can answer, so /openapi.json lists them."""
    return {s: {"model": ErrorBody, "description": _ERROR_MEANING[s]} for s in statuses}


# --- responses ---------------------------------------------------------------------------------
class AsciiJSONResponse(JSONResponse):
    """JSON escaped to ASCII: a lone surrogate echoed from a request cannot break the encoding."""

    def render(self, content: Any) -> bytes:
        return json.dumps(content, ensure_ascii=True, allow_nan=False,
                          separators=(",", ":")).encode("ascii")


class RawJSONResponse(Response):
    media_type = "application/json"


class ResetResponse(Response):
    """Starts a 200, sends part of the body, then fails so the connection is dropped."""

    def __init__(self) -> None:
        super().__init__(content=b"", media_type="application/json")

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        await send({
            "type": "http.response.start",
            "status": 200,
            "headers": [(b"content-type", b"application/json"), (b"content-length", b"4096")],
        })
        await send({"type": "http.response.body", "body": b'{"id": "act-', "more_body": True})
        raise InjectedReset("injected fault: connection reset mid-response")


class BodyLimitAndCounters:
    """ASGI middleware: counts requests per endpoint and refuses bodies over the limit with 413
    before anything parses them."""

    def __init__(self, app: Any, gateway: Gateway) -> None:
        self.app = app
        self.gateway = gateway

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        client = scope.get("client")
        self.gateway.first_request(
            tuple(client[:2]) if client else None, scope["path"].startswith("/_control/")
        )
        endpoint = _COUNTED_PATHS.get(scope["path"].rstrip("/") or "/")
        if endpoint is not None:
            self.gateway.count_request(endpoint)
        if scope["method"] not in ("POST", "PUT", "PATCH"):
            await self.app(scope, receive, send)
            return
        scope = _as_json(scope)
        # Read up to the limit without parsing; an oversized body is drained (so the client sees
        # the 413 rather than a reset) and refused.
        chunks: List[bytes] = []
        size = 0
        more = True
        while more:
            message = await receive()
            if message["type"] != "http.request":
                await self.app(scope, _replay([message]), send)
                return
            body = message.get("body", b"")
            size += len(body)
            more = message.get("more_body", False)
            if size > MAX_BODY_BYTES:
                if not await _drain(receive, size, more):
                    return
                declared = dict(scope["headers"]).get(b"content-length", b"")
                await self._too_large(send, int(declared) if declared.isdigit() else None)
                return
            chunks.append(body)
        await self.app(scope, _replay_body(b"".join(chunks), receive), send)

    @staticmethod
    async def _too_large(send: Any, size: Optional[int]) -> None:
        told = f"{size} bytes" if size is not None else f"more than {MAX_BODY_BYTES} bytes"
        body = json.dumps({
            "detail": f"request body is {told}; the limit is {MAX_BODY_BYTES} bytes (2 MB): "
                      "send JPEG frames at the model's training_frame_size"
        }).encode()
        await send({
            "type": "http.response.start",
            "status": 413,
            "headers": [(b"content-type", b"application/json"),
                        (b"content-length", str(len(body)).encode())],
        })
        await send({"type": "http.response.body", "body": body})


async def _drain(receive: Any, size: int, more: bool) -> bool:
    """Read and discard the rest of an oversized body (up to a cap); False if the client left."""
    while more and size <= MAX_DRAIN_BYTES:
        message = await receive()
        if message["type"] != "http.request":
            return False
        size += len(message.get("body", b""))
        more = message.get("more_body", False)
    return True


def _as_json(scope: Dict[str, Any]) -> Dict[str, Any]:
    """Bodies are JSON whatever the declared type (e.g. curl's form default), so parse them so."""
    headers = [(k, v) for k, v in scope["headers"] if k != b"content-type"]
    headers.append((b"content-type", b"application/json"))
    return dict(scope, headers=headers)


def _replay(messages: List[Dict[str, Any]]) -> Any:
    async def receive() -> Dict[str, Any]:
        if messages:
            return messages.pop(0)
        return {"type": "http.disconnect"}
    return receive


def _replay_body(body: bytes, downstream: Any) -> Any:
    sent = False

    async def receive() -> Dict[str, Any]:
        nonlocal sent
        if not sent:
            sent = True
            return {"type": "http.request", "body": body, "more_body": False}
        return await downstream()
    return receive


def _bearer(request: Request) -> Optional[str]:
    header = request.headers.get("authorization", "")
    scheme, _, token = header.partition(" ")
    if scheme.lower() != "bearer" or not token.strip():
        return None
    return token.strip()


def _authorise(gateway: Gateway, request: Request, *, billed: bool) -> None:
    status = gateway.key_status(_bearer(request))
    if status == "missing":
        raise HTTPException(401, "missing API key: send the header 'Authorization: Bearer <key>'")
    if status == "unknown":
        raise HTTPException(401, "API key not recognised (unknown, revoked or expired)")
    if status == "broke" and billed:
        raise HTTPException(402, "balance exhausted: add credit to this key's account")


def _find_row(gateway: Gateway, model: str) -> Dict[str, Any]:
    row = gateway.catalogue.find(model)
    if row is None:
        raise HTTPException(
            404,
            f"model {model!r} not found; GET /v1/models lists the served ids "
            f"({', '.join(gateway.catalogue.ids())})",
        )
    return row


def _require_loopback(request: Request) -> None:
    host = request.client.host if request.client else ""
    if host not in _LOOPBACK_HOSTS and not host.startswith("127."):
        raise HTTPException(403, "control endpoints answer only to loopback clients")


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


_STATUS_DETAIL = {
    401: "API key not recognised (injected fault)",
    402: "balance exhausted (injected fault)",
    500: "internal server error (injected fault)",
    503: "service unavailable (injected fault)",
    504: "upstream timed out (injected fault)",
}


def _check_rows(rows: List[List[float]], row: Dict[str, Any]) -> None:
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


def _act_body(
    row: Dict[str, Any],
    rows: List[List[float]],
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


def _apply_output_fault(fault: Optional[Fault], body: Dict[str, Any]) -> Optional[Response]:
    if fault is None:
        return None
    steps = body["action_chunk"]["steps"]
    if fault.kind == "reset":
        return ResetResponse()
    if fault.kind == "malformed":
        return RawJSONResponse(b'{"id": "act-malformed", "action_chunk": {"steps": [[0.0, ')
    if fault.kind in ("nan", "inf") and steps:
        steps[len(steps) // 2]["values"][0] = math.nan if fault.kind == "nan" else math.inf
        return RawJSONResponse(json.dumps(body, allow_nan=True).encode())
    if fault.kind == "wrong_dim":
        for step in steps:
            step["values"].append(0.0)
    if fault.kind == "empty":
        body["action_chunk"]["steps"] = []
        body["action_chunk"]["covers_seconds"] = 0.0
    return None


def _json_safe(value: Any) -> Any:
    """Validation errors echo the input; a NaN there must not turn a 422 into a 500."""
    if isinstance(value, float) and not math.isfinite(value):
        return repr(value)
    if isinstance(value, dict):
        return {k: _json_safe(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_json_safe(v) for v in value]
    return value


async def _validation_error(request: Request, exc: Exception) -> JSONResponse:
    errors = exc.errors() if isinstance(exc, RequestValidationError) else [str(exc)]
    return AsciiJSONResponse({"detail": _json_safe(jsonable_encoder(errors))}, status_code=422)


async def _http_error(request: Request, exc: Exception) -> Response:
    if not isinstance(exc, StarletteHTTPException):
        return AsciiJSONResponse({"detail": "internal server error"}, status_code=500)
    if exc.status_code in (204, 304):
        return Response(status_code=exc.status_code, headers=exc.headers)
    return AsciiJSONResponse({"detail": exc.detail}, status_code=exc.status_code,
                             headers=exc.headers)


def _holder(gateway: Gateway, seconds: Optional[float]) -> Callable[[], Awaitable[None]]:
    async def hold() -> None:
        await gateway.wait_stall(seconds)
    return hold


def create_app(gateway: Gateway) -> FastAPI:
    app = FastAPI(
        title="Sequences robot-inference API (local gateway)",
        description="Simulated models served on this machine; see docs/gateway.md.",
        version="1",
        default_response_class=AsciiJSONResponse,
    )

    @app.get("/v1/health")
    async def health() -> Dict[str, str]:
        return {"backend": "sequence_ai-local-gateway (simulated models)", "auth": "keystore"}

    @app.get("/v1/models")
    async def models(
        endpoint: Optional[Literal["act", "chat", "perceive"]] = None,
    ) -> Dict[str, Any]:
        return {"data": gateway.catalogue.rows(endpoint)}

    @app.get("/v1/act/ready", responses=_errors(401, 404))
    async def ready(request: Request, model: str) -> Dict[str, Any]:
        _authorise(gateway, request, billed=False)
        row = _find_row(gateway, model)
        server = gateway.servers[row["id"]]
        remaining = server.use()
        return {"ready": remaining is None, "eta_s": server.load_eta_s}

    @app.post("/v1/act", responses=_errors(400, 401, 402, 404, 413, 503, 504))
    async def act(body: ActRequest, request: Request) -> Any:
        received = time.monotonic()
        _authorise(gateway, request, billed=True)
        row = _find_row(gateway, body.model)
        if row.get("endpoint") != "act":
            raise HTTPException(
                400, f"model {body.model!r} is served on /v1/{row.get('endpoint')}, not /v1/act"
            )
        obs = body.observation
        prop = obs.proprioception
        frames = [Frame(view=f.view, data=f.data) for f in obs.images]
        options = dict(body.model_extra or {})
        loop = asyncio.get_running_loop()
        try:
            checked = await loop.run_in_executor(
                None, check_observation, row, frames, prop.joint_positions, prop.gripper,
                obs.instruction, body.seed, options,
            )
        except ObservationRejected as exc:
            raise HTTPException(400, exc.detail) from None

        fault = gateway.faults.take(row["id"])
        server = gateway.servers[row["id"]]
        hold: Optional[Callable[[], Awaitable[None]]] = None
        if fault is not None:
            if fault.kind == "status":
                status = fault.status or 500
                raise HTTPException(status, _STATUS_DETAIL[status])
            if fault.kind == "stall":
                await gateway.wait_stall(fault.seconds)
            elif fault.kind == "warming":
                server.force_warming(gateway.forced_warming_s(fault.seconds))
            elif fault.kind == "hold":
                hold = _holder(gateway, fault.seconds)
        remaining = server.use()
        if remaining is not None:
            return _warming_response(gateway, row["id"], remaining)

        try:
            result = await server.infer(checked.observation, hold)
        except Exception as exc:  # a plug-in policy raised
            raise HTTPException(500, f"policy for {short_id(row['id'])} failed: {exc}") from None
        _check_rows(result.rows, row)
        total_ms = (time.monotonic() - received) * 1000.0
        perf = {
            "inference_ms": round(result.inference_ms, 3),
            "queue_ms": round(result.queue_ms, 3),
            "ttfa_ms": round(total_ms, 3),
        }
        used = checked.frames_used
        state_values = len(checked.observation.joint_positions) + len(checked.observation.gripper)
        observation_tokens = 256 * used + len(obs.instruction.split()) + state_values
        action_tokens = len(result.rows) * int(row["action_dim"])
        usage = {
            "observation_tokens": observation_tokens,
            "action_tokens": action_tokens,
            "total_tokens": observation_tokens + action_tokens,
            "frames_received": checked.frames_received,
            "frames_used": used,
        }
        out = _act_body(row, result.rows, perf, usage, checked.warnings)
        faulted = _apply_output_fault(fault, out)
        return faulted if faulted is not None else AsciiJSONResponse(out)

    # --- control (loopback only, not part of the public API) ----------------------------------
    @app.post("/_control/faults", include_in_schema=False)
    async def add_fault(spec: FaultIn, request: Request) -> Dict[str, Any]:
        _require_loopback(request)
        try:
            made = gateway.inject(spec.fault, count=spec.count, model=spec.model,
                                  seconds=spec.seconds, status=spec.status)
        except ValueError as exc:
            raise HTTPException(422, str(exc)) from None
        return {"pending": [asdict(f) for f in gateway.faults.pending()], "added": asdict(made)}

    @app.delete("/_control/faults", include_in_schema=False)
    async def clear_faults(request: Request) -> Dict[str, Any]:
        _require_loopback(request)
        gateway.clear_faults()
        return {"pending": []}

    @app.get("/_control/counters", include_in_schema=False)
    async def counters(request: Request) -> Dict[str, Any]:
        _require_loopback(request)
        return gateway.counters()

    @app.post("/_control/latency", include_in_schema=False)
    async def latency(spec: LatencyIn, request: Request) -> Dict[str, Any]:
        _require_loopback(request)
        try:
            gateway.set_latency(latency_ms=spec.latency_ms, jitter_ms=spec.jitter_ms,
                                scale=spec.scale)
        except ValueError as exc:
            raise HTTPException(422, str(exc)) from None
        return dict(gateway.latency.__dict__)

    @app.post("/_control/reset", include_in_schema=False)
    async def reset(request: Request) -> Dict[str, Any]:
        _require_loopback(request)
        gateway.reset()
        return gateway.counters()

    @app.post("/_control/cold", include_in_schema=False)
    async def cold(spec: ColdIn, request: Request) -> Dict[str, Any]:
        _require_loopback(request)
        try:
            gateway.force_cold(spec.model)
        except ValueError as exc:
            raise HTTPException(404, str(exc)) from None
        return {"cold": spec.model}

    app.add_exception_handler(RequestValidationError, _validation_error)
    app.add_exception_handler(StarletteHTTPException, _http_error)
    app.add_middleware(BodyLimitAndCounters, gateway=gateway)
    return app
