"""``POST /v1/chat``: messages in, one message out (PROTOCOL §8), from a simulated chat model.

Checks run in the order of ``/v1/act``: body schema (422), key (401), credit (402), model
(404), endpoint (400), then the frames and the prompt (400). The answer takes the model's own
latency: the request's transport, then the provider's time. No queue and no cold start: the
service hands chat to an external provider.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import io
import random
import time
import uuid
from typing import Any, Dict, List, Optional

from fastapi import APIRouter, HTTPException, Request
from fastapi.responses import Response
from PIL import Image, UnidentifiedImageError

from sequence_ai_gateway.faults.book import Fault, FaultKind
from sequence_ai_gateway.http.chat_wire import ChatRequest, MessageIn
from sequence_ai_gateway.http.fault_effects import before_inference, nested_json
from sequence_ai_gateway.http.responses import AsciiJSONResponse, RawJSONResponse, ResetResponse
from sequence_ai_gateway.http.routes.access import GatewayDep, authorise, find_row
from sequence_ai_gateway.http.wire import error_responses
from sequence_ai_gateway.models.catalogue import short_id
from sequence_ai_gateway.models.planner_model import PlannerReply, PromptRejected
from sequence_ai_gateway.service.serving import sample_latency_s
from sequence_ai_gateway.service.state import Gateway

router = APIRouter()
# Tokens a frame costs in ``usage``, as on /v1/act.
TOKENS_PER_IMAGE = 256
# The faults that mean something for a chat answer, taken only when injected for the chat
# model; the others shape action chunks, and a fault for every model is one of act calls.
CHAT_FAULTS = frozenset(
    {FaultKind.STATUS, FaultKind.STALL, FaultKind.RESET, FaultKind.MALFORMED, FaultKind.NESTED}
)
# Provider time varies; one generator for every chat answer (jitter_ms sets the spread).
_RNG = random.Random(0)


@router.post("/v1/chat", responses=error_responses(400, 401, 402, 404, 413, 503, 504))
async def chat(body: ChatRequest, request: Request, gateway: GatewayDep) -> Any:
    received = time.monotonic()
    row = _admit(gateway, request, body)
    images = _check_images(body.messages)
    server = gateway.servers[row["id"]]
    # Answered before any simulated time is spent, so a prompt the model cannot read is
    # refused like any other check: before faults and without the model's latency.
    reply = _reply(server.policy, row, _last_user(body.messages))
    transport_ms = await server.arrive(len(await request.body()))
    fault = gateway.faults.take(row["id"], CHAT_FAULTS, named_only=True)
    await before_inference(gateway, server, fault, gateway.release_generation)
    started = time.monotonic()
    await _provider_time(gateway, float(getattr(server.policy, "inference_ms", 0.0) or 0.0))
    inference_ms = (time.monotonic() - started) * 1000.0
    out = _answer(row, body, reply, images)
    ttfa_ms = (time.monotonic() - received) * 1000.0
    out["perf"] = {
        "inference_ms": round(inference_ms, 3),
        "transport_ms": round(transport_ms, 3),
        "ttfa_ms": round(ttfa_ms, 3),
        "gateway_ms": round(max(0.0, ttfa_ms - transport_ms - inference_ms), 3),
    }
    faulted = _faulted(fault)
    return faulted if faulted is not None else AsciiJSONResponse(out)


def _admit(gateway: Gateway, request: Request, body: ChatRequest) -> Dict[str, Any]:
    """Key, credit, model and endpoint, in that order; the row of the model to answer."""
    authorise(gateway, request, billed=True)
    row = find_row(gateway, body.model)
    if row.get("endpoint") != "chat":
        chat_ids = [r["id"] for r in gateway.catalogue.rows("chat")]
        raise HTTPException(
            400,
            f"model {body.model!r} is served on /v1/{row.get('endpoint')}, not /v1/chat; "
            f"chat models here: {', '.join(chat_ids) or 'none'}",
        )
    return row


def _last_user(messages: List[MessageIn]) -> MessageIn:
    """The last user message: what the model answers."""
    for message in reversed(messages):
        if message.role == "user":
            return message
    raise HTTPException(400, "messages: no message with role 'user'; expected at least one")


def _check_images(messages: List[MessageIn]) -> int:
    """Every image block must be a base64 JPEG; returns how many there are."""
    count = 0
    for m, message in enumerate(messages):
        for b, block in enumerate(message.content if isinstance(message.content, list) else []):
            if block.type != "image":
                continue
            count += 1
            where = f"messages[{m}].content[{b}].data"
            try:
                raw = base64.b64decode(block.data, validate=True)
            except (binascii.Error, ValueError):
                raise HTTPException(
                    400, f"{where}: not base64 (standard alphabet, padded, no 'data:' prefix)"
                ) from None
            try:
                kind = Image.open(io.BytesIO(raw)).format
            except (UnidentifiedImageError, OSError, ValueError, Image.DecompressionBombError):
                kind = None
            if kind != "JPEG":
                raise HTTPException(
                    400, f"{where}: {len(raw)} bytes that are {kind or 'not an image'}; "
                         "expected a JPEG (sequence_ai.encode() makes one)"
                )
    return count


def _reply(model: Any, row: Dict[str, Any], message: MessageIn) -> PlannerReply:
    reply = getattr(model, "reply", None)
    if not callable(reply):
        raise HTTPException(
            501, f"model {short_id(row['id'])} is listed for /v1/chat but this gateway serves "
                 "no chat answers for it (its plug-in has no reply(prompt_text))"
        )
    try:
        if getattr(model, "reads_images", False):
            # Checked JPEGs already (_check_images): they decode.
            frames = [Image.open(io.BytesIO(base64.b64decode(b.data))) for b in message.images()]
            return reply(message.text(), frames)
        return reply(message.text())
    except PromptRejected as exc:
        raise HTTPException(400, f"messages: {exc}") from None


async def _provider_time(gateway: Gateway, inference_ms: float) -> None:
    """The provider's time: a sample around the model's median (the gateway's settings)."""
    settings = gateway.latency
    median = settings.latency_ms if settings.latency_ms is not None else inference_ms
    seconds = sample_latency_s(median, settings.jitter_ms, settings.scale, _RNG)
    if seconds > 0:
        await asyncio.sleep(seconds)


def _tokens(text: str) -> int:
    return len(text.split())


def _answer(
    row: Dict[str, Any], body: ChatRequest, reply: PlannerReply, images: int
) -> Dict[str, Any]:
    """The §8 envelope; an answer longer than ``max_tokens`` (words) is cut and says so."""
    words = reply.text.split()
    cut = len(words) > body.max_tokens
    content = " ".join(words[: body.max_tokens]) if cut else reply.text
    warnings = list(reply.warnings)
    if body.tools:
        warnings.append("the simulated planner never calls tools: answered in text")
    prompt_tokens = sum(_tokens(m.text()) for m in body.messages) + TOKENS_PER_IMAGE * images
    completion_tokens = _tokens(content)
    return {
        "id": "chat-" + uuid.uuid4().hex,
        "model": row["id"],
        "message": {"role": "assistant", "content": content},
        "finish_reason": "length" if cut else "stop",
        "usage": {
            "prompt_tokens": prompt_tokens,
            "completion_tokens": completion_tokens,
            "total_tokens": prompt_tokens + completion_tokens,
            "images": images,
        },
        "perf": {},
        "warnings": warnings,
    }


def _faulted(fault: Optional[Fault]) -> Optional[Response]:
    if fault is None:
        return None
    if fault.kind is FaultKind.RESET:
        return ResetResponse()
    if fault.kind is FaultKind.MALFORMED:
        return RawJSONResponse(b'{"id": "chat-malformed", "message": {"role": ')
    if fault.kind is FaultKind.NESTED:
        return RawJSONResponse(nested_json(fault, b"message"))
    return None
