"""The platform's one error body ``{detail, code, retryable, retry_after_s, request_id, hint,
details}`` as this client's typed errors; the code decides the class, the status only when a body
names no code (a proxy's page, a worker that died mid-answer)."""

from __future__ import annotations

import json
import math
from typing import Dict, Mapping, Optional, Type

from ..errors import (
    AuthError,
    InvalidRequest,
    OutOfCredit,
    RateLimited,
    SequencesError,
    Unavailable,
)

__all__ = ["CODE_CLASSES", "code_for_status", "refusal"]

# What each code means to a controller: stop and fix (InvalidRequest), stop (AuthError,
# OutOfCredit, SequencesError), wait within Retry-After (RateLimited, warming Unavailable).
CODE_CLASSES: Dict[str, Type[SequencesError]] = {
    "invalid_request": InvalidRequest,
    "payload_too_large": InvalidRequest,
    "not_found": InvalidRequest,
    "conflict": InvalidRequest,
    "gone": InvalidRequest,
    "unauthenticated": AuthError,
    "forbidden": AuthError,
    "insufficient_credit": OutOfCredit,
    "budget_exhausted": OutOfCredit,
    "busy": RateLimited,
    "warming": Unavailable,
    "unavailable": Unavailable,
    "upstream_error": Unavailable,
    "timeout": Unavailable,
    "policy_error": SequencesError,
    "internal": SequencesError,
    "dependency_missing": SequencesError,
}

_STATUS_CODES: Dict[int, str] = {
    400: "invalid_request", 401: "unauthenticated", 402: "insufficient_credit", 403: "forbidden",
    404: "not_found", 409: "conflict", 410: "gone", 413: "payload_too_large",
    422: "invalid_request", 424: "dependency_missing", 429: "busy", 500: "internal",
    502: "upstream_error", 503: "unavailable", 504: "timeout",
}

_MAX_DETAIL_CHARS = 500


def code_for_status(status: int) -> str:
    """The code a bare status stands for (any other 4xx: invalid_request; else internal)."""
    if status in _STATUS_CODES:
        return _STATUS_CODES[status]
    return "invalid_request" if 400 <= status < 500 else "internal"


def _seconds(value: object) -> Optional[float]:
    if isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value):
        return max(0.0, float(value))
    return None


def _text(value: object) -> Optional[str]:
    return value if isinstance(value, str) and value else None


def refusal(
    what: str, status: int, text: str, headers: Mapping[str, str], parsed: object = None
) -> SequencesError:
    """The typed error for a non-2xx answer to ``what`` ("POST /v1/act/connect").

    ``text`` is the body as text (already scrubbed of secrets); ``parsed`` the body when it came
    as msgpack (else ``text`` is read as JSON).
    """
    if parsed is None:
        try:
            parsed = json.loads(text) if text else None
        except ValueError:
            parsed = None
    body: Mapping[str, object] = parsed if isinstance(parsed, dict) else {}
    code = _text(body.get("code"))
    if code is None or code not in CODE_CLASSES:
        code = code_for_status(status)
    detail = body.get("detail")
    message = detail if isinstance(detail, str) and detail else (text.strip() or "no detail")
    if len(message) > _MAX_DETAIL_CHARS:
        message = message[:_MAX_DETAIL_CHARS] + "..."
    hint = _text(body.get("hint"))
    request_id = _text(body.get("request_id")) or _text(headers.get("x-seq-request-id"))
    raw_details = body.get("details")
    details: Mapping[str, object] = raw_details if isinstance(raw_details, dict) else {}
    line = f"{what} failed with {status} ({code}): {message}"
    if hint:
        line += f" Hint: {hint}"
    if request_id:
        line += f" [request {request_id}]"
    cls = CODE_CLASSES[code]
    if issubclass(cls, Unavailable):
        retry = _seconds(body.get("retry_after_s"))
        if retry is None:
            retry = _seconds(details.get("eta_s"))
        if retry is None:
            retry = _retry_after_header(headers.get("retry-after"))
        return cls(line, status=status, body=text, code=code, request_id=request_id, hint=hint,
                   details=details, retry_after_s=retry, warming=code == "warming")
    return cls(line, status=status, body=text, code=code, request_id=request_id, hint=hint,
               details=details)


def _retry_after_header(value: Optional[str]) -> Optional[float]:
    try:
        return _seconds(float(value)) if value is not None else None
    except ValueError:
        return None
