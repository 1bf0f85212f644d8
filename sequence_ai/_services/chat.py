"""``chat()``: one ``POST /v1/chat`` — messages in, one message out (the planner's "slow brain").

A function, not a session: no loop, no buffer, no retry. It opens its own connection, checks
that the model is a chat model (one catalogue read), sends, and maps the answer to a
``ChatReply`` or the status to the transport's typed errors.
"""

from __future__ import annotations

import math
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Optional, Union

from .._model.catalogue import Model, find_model, full_model_id, models
from .._model.observation import DEFAULT_QUALITY, encode
from .._transport.connection import Connection, ConnectionSetting, connection_of
from ..errors import InvalidRequest, InvalidResponse, Unavailable

__all__ = ["ChatReply", "chat", "image_block"]

MAX_MESSAGES = 256
DEFAULT_MAX_TOKENS = 1024
ROLES = ("system", "user", "assistant", "tool")
# Deepest nesting of lists and objects an answer may have: §8's shape needs a few levels, and
# deeper JSON would reach Python's recursion limit (in the parser or in a repr) somewhere.
MAX_DEPTH = 64

Content = Union[str, list[dict[str, object]], None]


def image_block(frame: object, *, quality: int = DEFAULT_QUALITY) -> dict[str, object]:
    """A content block carrying one camera frame as base64 JPEG (via ``encode``)."""
    return {"type": "image", "data": encode(frame, quality=quality)}


@dataclass(frozen=True)
class ChatReply:
    """The one message a chat model answered, and the envelope around it (§8)."""

    id: str
    model: str
    role: str
    content: Content
    finish_reason: str
    tool_calls: tuple[dict[str, object], ...] = ()
    usage: dict[str, object] = field(default_factory=dict)
    perf: dict[str, object] = field(default_factory=dict)
    warnings: tuple[str, ...] = ()

    @property
    def text(self) -> str:
        """The answer's text: the string content, or its text blocks joined by newlines."""
        if isinstance(self.content, str):
            return self.content
        parts = [b.get("text") for b in self.content or () if b.get("type") == "text"]
        return "\n".join(p for p in parts if isinstance(p, str))

    @classmethod
    def from_wire(cls, body: object) -> ChatReply:
        """Map a 200 body; anything off the §8 shape raises ``InvalidResponse``."""
        if not isinstance(body, Mapping):
            raise InvalidResponse(f"POST /v1/chat returned {body!r:.80}; expected an object")
        message = body.get("message")
        if not isinstance(message, Mapping):
            raise InvalidResponse(
                f"POST /v1/chat: message is {message!r:.80}; expected an object "
                "{'role': ..., 'content': ...}"
            )
        content = message.get("content")
        if not (content is None or isinstance(content, str) or _is_blocks(content)):
            raise InvalidResponse(
                f"POST /v1/chat: message.content is {content!r:.80}; expected a string, "
                "a list of blocks or null"
            )
        calls = message.get("tool_calls") or []
        warnings = body.get("warnings") or []
        if not _is_blocks(calls):
            raise InvalidResponse(
                f"POST /v1/chat: message.tool_calls is {calls!r:.80}; expected a list of objects"
            )
        if not isinstance(warnings, list) or not all(isinstance(w, str) for w in warnings):
            raise InvalidResponse(
                f"POST /v1/chat: warnings is {warnings!r:.80}; expected a list of strings"
            )
        return cls(
            id=_text(body, "id"),
            model=_text(body, "model"),
            role=_text(message, "role", "message.role"),
            content=[dict(b) for b in content] if isinstance(content, list) else content,
            finish_reason=_text(body, "finish_reason"),
            tool_calls=tuple(dict(c) for c in calls),
            usage=_object(body, "usage"),
            perf=_object(body, "perf"),
            warnings=tuple(warnings),
        )


def _nesting_within(value: object, limit: int) -> bool:
    """True when lists and objects in ``value`` nest at most ``limit`` deep (no recursion)."""
    stack = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        children = (
            item.values() if isinstance(item, dict) else item if isinstance(item, list) else None
        )
        if children is None:
            continue
        if depth > limit:
            return False
        stack.extend((child, depth + 1) for child in children)
    return True


def _is_blocks(value: object) -> bool:
    return isinstance(value, list) and all(isinstance(b, Mapping) for b in value)


def _text(body: Mapping[str, object], key: str, label: Optional[str] = None) -> str:
    value = body.get(key)
    if not isinstance(value, str):
        raise InvalidResponse(f"POST /v1/chat: {label or key} is {value!r:.80}; expected a string")
    return value


def _object(body: Mapping[str, object], key: str) -> dict[str, object]:
    value = body.get(key)
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise InvalidResponse(f"POST /v1/chat: {key} is {value!r:.80}; expected an object")
    return dict(value)


def _checked_messages(messages: object) -> list[dict[str, object]]:
    """The messages as wire objects; a malformed one raises naming its index."""
    if isinstance(messages, (str, bytes, Mapping)) or not isinstance(messages, Sequence):
        raise TypeError(
            f"messages is {messages!r:.60}; expected a list of {{'role': ..., 'content': ...}}"
        )
    if not 1 <= len(messages) <= MAX_MESSAGES:
        raise ValueError(
            f"messages has {len(messages)} entries; expected 1 to {MAX_MESSAGES}"
        )
    out = []
    for i, message in enumerate(messages):
        if not isinstance(message, Mapping):
            raise TypeError(f"messages[{i}] is {message!r:.60}; expected a dict")
        role = message.get("role")
        if role not in ROLES:
            raise ValueError(f"messages[{i}].role is {role!r}; expected one of {ROLES}")
        content = message.get("content")
        if not (content is None or isinstance(content, str) or _is_blocks(content)):
            raise TypeError(
                f"messages[{i}].content is {content!r:.60}; expected a string, a list of "
                "blocks ({'type': 'text', 'text': ...}, image_block(frame)) or None"
            )
        out.append(dict(message))
    return out


def _checked_tools(tools: object) -> list[dict[str, object]]:
    if isinstance(tools, (str, bytes, Mapping)) or not isinstance(tools, Sequence):
        raise TypeError(f"tools is {tools!r:.60}; expected a list of tool objects or None")
    for i, tool in enumerate(tools):
        if not isinstance(tool, Mapping):
            raise TypeError(
                f"tools[{i}] is {tool!r:.60}; expected {{'type': 'function', 'function': {{...}}}}"
            )
    return [dict(t) for t in tools]


def _check_options(max_tokens: int, temperature: Optional[float]) -> None:
    if isinstance(max_tokens, bool) or not isinstance(max_tokens, int) or max_tokens < 1:
        raise ValueError(f"max_tokens is {max_tokens!r}; expected an integer >= 1")
    if temperature is not None and (
        isinstance(temperature, bool)
        or not isinstance(temperature, (int, float))
        or not (math.isfinite(temperature) and 0.0 <= temperature <= 2.0)
    ):
        raise ValueError(f"temperature is {temperature!r}; expected a number in [0, 2] or None")


def chat(
    model: Union[str, Model],
    messages: Sequence[Mapping[str, object]],
    *,
    max_tokens: int = DEFAULT_MAX_TOKENS,
    temperature: Optional[float] = None,
    tools: Optional[Sequence[Mapping[str, object]]] = None,
    connection: Optional[Connection] = None,
    **settings: ConnectionSetting,
) -> ChatReply:
    """Ask a chat model (``models(endpoint="chat")``) one question; its one answer.

    ``messages`` are OpenAI-shaped (``[{"role": "user", "content": "..."}]``); a content list
    may hold ``{"type": "text", "text": ...}`` and ``image_block(frame)`` blocks.
    ``temperature`` and ``tools`` are sent only when given. A model the catalogue lists for
    another endpoint is refused here (``InvalidRequest``); service errors are the transport's
    (``AuthError``, ``OutOfCredit``, ``InvalidRequest``, ``Unavailable`` — a 503 is raised,
    never retried). ``timeout_s`` bounds the whole call, the catalogue read included; an answer
    nested deeper than ``MAX_DEPTH`` is an ``InvalidResponse``.
    """
    model_id = model.id if isinstance(model, Model) else full_model_id(model)
    _check_options(max_tokens, temperature)
    body: dict[str, object] = {
        "model": model_id,
        "messages": _checked_messages(messages),
        "max_tokens": max_tokens,
    }
    if temperature is not None:
        body["temperature"] = float(temperature)
    if tools is not None:
        body["tools"] = _checked_tools(tools)
    where = connection_of(connection, settings, "chat")
    with where.transport() as transport:
        deadline = time.monotonic() + where.timeout_s
        too_deep = InvalidResponse(
            f"POST /v1/chat: an answer nested deeper than {MAX_DEPTH} levels; expected the §8 shape"
        )
        try:
            row = find_model(models(transport=transport), model_id)
        except RecursionError:
            raise too_deep from None
        if row is not None and row.endpoint not in (None, "chat"):
            raise InvalidRequest(
                f"model {row.short_id!r} is served on /v1/{row.endpoint}, not /v1/chat: "
                "chat() takes a model of models(endpoint='chat')"
                + (" (drive this one with sequence_ai.connect())" if row.endpoint == "act" else "")
            )
        left = deadline - time.monotonic()
        if left <= 0:
            raise Unavailable(
                f"POST /v1/chat: timeout_s={where.timeout_s:g} ran out reading the catalogue"
            )
        try:
            answer = transport.post("/v1/chat", body, timeout=left)
        except RecursionError:
            raise too_deep from None
        if not _nesting_within(answer, MAX_DEPTH):
            raise too_deep
        return ChatReply.from_wire(answer)
