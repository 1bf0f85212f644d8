"""The gateway against its own /openapi.json (schemathesis): no 5xx and no response that breaks
the schema, whatever the body; plus the size limit and the key checks of act and ready."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import httpx
import pytest
import schemathesis
from hypothesis import HealthCheck, given, settings
from hypothesis.errors import Unsatisfiable
from schemathesis import GenerationMode
from schemathesis.checks import not_a_server_error
from schemathesis.specs.openapi.checks import (
    content_type_conformance,
    response_schema_conformance,
    status_code_conformance,
)
from support.gateway_fixture import run_gateway
from support.policy_support import make_observation

MB = 1024 * 1024
EXAMPLES_PER_OPERATION = 40


@pytest.fixture(scope="module")
def schema_gateway() -> Iterator[Any]:
    with run_gateway() as gw:
        yield gw


@pytest.mark.slow
def test_no_input_makes_the_gateway_fail_or_break_its_schema(schema_gateway: Any) -> None:
    """Every operation of the gateway's own schema, fed generated valid and invalid input."""
    gw = schema_gateway
    schema = schemathesis.openapi.from_url(gw.url + "/openapi.json")
    operations = [result.ok() for result in schema.get_all_operations()]
    labels = sorted(op.label for op in operations)
    served = {"POST /v1/act", "POST /v1/chat", "GET /v1/act/ready", "GET /v1/models"}
    assert served <= set(labels), labels
    headers = {"Authorization": f"Bearer {gw.api_key}"}
    checks = [not_a_server_error, response_schema_conformance, content_type_conformance,
              status_code_conformance]
    for operation in operations:
        for mode in (GenerationMode.POSITIVE, GenerationMode.NEGATIVE):

            @settings(max_examples=EXAMPLES_PER_OPERATION, deadline=None, database=None,
                      suppress_health_check=list(HealthCheck))
            @given(case=operation.as_strategy(generation_mode=mode))
            def call(case: Any) -> None:
                case.call_and_validate(headers=headers, checks=checks)

            try:
                call()
            except Unsatisfiable:
                # An operation without parameters or body has nothing to make invalid.
                assert mode is GenerationMode.NEGATIVE

    assert gw.counters()["requests"]["act"] > 0


def _act_body() -> dict[str, Any]:
    return {"model": "pi05-droid", "observation": make_observation().to_wire()}


def _post(gw: Any, body: Any = None, *, key: str | None = None, content: bytes | None = None,
          ) -> httpx.Response:
    headers = {"Authorization": f"Bearer {key}"} if key is not None else {}
    if content is not None:
        headers["Content-Type"] = "application/json"
        return httpx.post(gw.url + "/v1/act", content=content, headers=headers, trust_env=False,
                          timeout=60)
    return httpx.post(gw.url + "/v1/act", json=body, headers=headers, trust_env=False, timeout=60)


def test_a_body_over_2_mb_gets_413_before_anything_else(schema_gateway: Any) -> None:
    gw = schema_gateway
    acts = gw.counters()["requests"]["act"]
    body = _act_body()
    body["observation"]["images"][0]["data"] = "A" * (2 * MB + 1024)
    for key in (gw.api_key, None, "seq_not_a_key"):
        answer = _post(gw, body, key=key)
        assert answer.status_code == 413, answer.text
        assert "limit" in answer.json()["detail"]
    # Not JSON at all, just large: still refused by size, never parsed.
    assert _post(gw, key=gw.api_key, content=b"x" * (3 * MB)).status_code == 413
    assert _post(gw, _act_body(), key=gw.api_key).status_code == 200
    assert gw.counters()["requests"]["act"] == acts + 5


@pytest.mark.parametrize("key,status", [
    (None, 401), ("seq_not_a_key", 401), ("Bearer", 401), ("broke", 402),
])
def test_act_refuses_missing_and_wrong_keys(schema_gateway: Any, key: Any, status: int) -> None:
    gw = schema_gateway
    key = gw.broke_key if key == "broke" else key
    answer = _post(gw, _act_body(), key=key)
    assert answer.status_code == status, answer.text
    assert "action_chunk" not in answer.text


@pytest.mark.parametrize("header", [None, "", "Bearer", "Bearer seq_not_a_key", "Basic abc",
                                    "seq_dev_local_gateway"])
def test_ready_refuses_missing_and_wrong_keys(schema_gateway: Any, header: Any) -> None:
    gw = schema_gateway
    headers = {} if header is None else {"Authorization": header}
    answer = httpx.get(gw.url + "/v1/act/ready", params={"model": "pi05-droid"},
                       headers=headers, trust_env=False)
    assert answer.status_code == 401, answer.text
    assert "ready" not in answer.json()
