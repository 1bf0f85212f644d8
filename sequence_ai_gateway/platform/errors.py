"""The platform's one error body ``{detail, code, retryable, retry_after_s, request_id, hint,
details}``, checked against sequence-base's contract before it is sent."""

from __future__ import annotations

import json
import math
import uuid
from typing import Any, Dict, Mapping, Optional

from sequence_base.contract.errors import ERRORS, ErrorBody, ErrorCode
from starlette.requests import Request
from starlette.responses import Response

from sequence_ai_gateway.platform.wire import FORMATS, FORMATS_HEADER, REQUEST_ID_HEADER


class PlatformError(Exception):
    """A refusal of the platform's: the status comes from the code's row in the table."""

    def __init__(
        self,
        code: ErrorCode,
        detail: str,
        *,
        retry_after_s: Optional[float] = None,
        hint: Optional[str] = None,
        details: Optional[Mapping[str, Any]] = None,
    ) -> None:
        super().__init__(detail)
        self.code = code
        self.detail = detail
        self.retry_after_s = retry_after_s
        self.hint = hint
        self.details: Dict[str, Any] = dict(details or {})

    @property
    def status(self) -> int:
        return ERRORS[self.code].status


def request_id(request: Request) -> str:
    """The caller's request id when it sent one, else a new one in the same shape."""
    return request.headers.get(REQUEST_ID_HEADER) or f"r-{uuid.uuid4().hex[:8]}"


def error_response(exc: PlatformError, rid: str, *, worker: bool = False) -> Response:
    body = ErrorBody(
        detail=exc.detail,
        code=exc.code,
        retry_after_s=exc.retry_after_s,
        request_id=rid,
        hint=exc.hint,
        details=exc.details,
    ).model_dump(mode="json")
    headers = {REQUEST_ID_HEADER: rid}
    if exc.retry_after_s is not None:
        headers["Retry-After"] = str(max(1, math.ceil(exc.retry_after_s)))
    if worker:
        # A worker names its formats on every answer, its refusals included.
        headers[FORMATS_HEADER] = FORMATS
    return Response(json.dumps(body, separators=(",", ":")).encode(), status_code=exc.status,
                    media_type="application/json", headers=headers)


async def platform_error(request: Request, exc: Exception) -> Response:
    """The gateway app's handler for ``PlatformError`` (the control plane's routes)."""
    if not isinstance(exc, PlatformError):
        raise exc
    return error_response(exc, request_id(request))
