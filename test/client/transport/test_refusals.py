"""The platform's typed error body as this client's typed errors."""

from __future__ import annotations

import json

import pytest

from sequence_ai._transport.refusals import refusal
from sequence_ai.errors import (
    AuthError,
    InvalidRequest,
    RateLimited,
    SequencesError,
    Unavailable,
)


def _body(**fields: object) -> str:
    return json.dumps({"detail": "refused", "retryable": False, **fields})


def test_code_decides_class_and_fields_ride_along() -> None:
    err = refusal("POST /v1/act/connect", 404, _body(
        code="not_found", request_id="rq-1", hint="seq deploy my-pi05",
        details={"resource": "deployment", "name": "nope"}), {})
    assert isinstance(err, InvalidRequest)
    assert (err.code, err.request_id, err.hint, err.status) == ("not_found", "rq-1",
                                                               "seq deploy my-pi05", 404)
    assert err.details == {"resource": "deployment", "name": "nope"}
    assert "not_found" in str(err) and "rq-1" in str(err) and "seq deploy" in str(err)


def test_busy_carries_retry_after() -> None:
    err = refusal("POST /act", 429, _body(code="busy", retry_after_s=0.5), {})
    assert isinstance(err, RateLimited) and err.retry_after_s == 0.5


def test_warming_eta_from_details_or_header() -> None:
    err = refusal("POST /v1/act/connect", 503, _body(code="warming", details={"eta_s": 12}), {})
    assert isinstance(err, Unavailable) and err.warming and err.retry_after_s == 12.0
    bare = refusal("GET /v1/act/ready", 503, "", {"retry-after": "3"})
    assert isinstance(bare, Unavailable) and not bare.warming and bare.retry_after_s == 3.0


@pytest.mark.parametrize(("status", "cls", "code"), [
    (401, AuthError, "unauthenticated"),
    (403, AuthError, "forbidden"),
    (413, InvalidRequest, "payload_too_large"),
    (500, SequencesError, "internal"),
    (418, InvalidRequest, "invalid_request"),
])
def test_bare_status_falls_back_to_its_code(status: int, cls: type, code: str) -> None:
    err = refusal("POST /act", status, "<html>proxy</html>", {})
    assert type(err) is cls and err.code == code and "proxy" in str(err)


def test_parsed_msgpack_body_is_used() -> None:
    err = refusal("POST /observe", 409, "", {}, parsed={"code": "conflict", "detail": "frames"})
    assert isinstance(err, InvalidRequest) and err.code == "conflict"
