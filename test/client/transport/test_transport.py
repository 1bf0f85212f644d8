"""Transport against the local gateway over real HTTP: errors, timeouts, keys, TLS, reuse."""

from __future__ import annotations

import socket
import time
from datetime import datetime, timedelta, timezone
from email.utils import format_datetime

import pytest

from sequence_ai._transport.transport import (
    DEFAULT_BASE_URL,
    MAX_BODY_BYTES,
    Transport,
    parse_retry_after,
    resolve_api_key,
    resolve_base_url,
)
from sequence_ai.errors import (
    AuthError,
    InvalidRequest,
    InvalidResponse,
    OutOfCredit,
    RateLimited,
    SequencesError,
    Unavailable,
)

PI05 = "accounts/sequences/models/pi05-droid"
# A 32x18 (16:9) grey JPEG: the smallest frame the gateway accepts for pi05-droid.
FRAME = (
    "/9j/4AAQSkZJRgABAQAAAQABAAD/2wBDAFA3PEY8MlBGQUZaVVBfeMiCeG5uePWvuZHI//////////////////////"
    "//////////////////////////////wAALCAASACABAREA/8QAFAABAAAAAAAAAAAAAAAAAAAAAP/EABQQAQAAAAAA"
    "AAAAAAAAAAAAAAD/2gAIAQEAAD8AAAAA/9k="
)


def act_body(model=PI05, views=("exterior_1", "wrist_left"), gripper=(0.0,)):
    return {
        "model": model,
        "observation": {
            "images": [{"view": v, "data": FRAME} for v in views],
            "proprioception": {"joint_positions": [0.0] * 7, "gripper": list(gripper)},
            "instruction": "pick up the cup",
        },
    }


@pytest.fixture
def transport(shared_gateway, no_env):
    with Transport(base_url=shared_gateway.url, api_key=shared_gateway.api_key) as t:
        yield t


def assert_no_key(exc, key):
    for text in (str(exc), repr(exc), exc.body or "", exc.message):
        assert key not in text


def test_a_successful_act_returns_the_parsed_chunk(transport):
    body = transport.post("/v1/act", act_body())
    assert body["model"] == PI05
    assert len(body["action_chunk"]["steps"]) == 15


def test_readiness_and_health_are_plain_gets(transport):
    assert transport.get("/v1/act/ready", params={"model": PI05})["ready"] is True
    assert transport.get("/v1/health")["auth"] == "keystore"


def test_an_unknown_key_is_an_auth_error_that_never_shows_the_key(shared_gateway, no_env):
    key = "seq_live_this_key_is_secret_12345"
    with Transport(base_url=shared_gateway.url, api_key=key) as t:
        with pytest.raises(AuthError) as info:
            t.post("/v1/act", act_body())
        assert info.value.status == 401
        assert_no_key(info.value, key)
        assert key not in repr(t)


def test_no_key_sends_no_header_and_the_gateway_refuses_act(shared_gateway, no_env):
    with Transport(base_url=shared_gateway.url, require_key=False) as t:
        assert not t.has_key
        assert t.get("/v1/models")["data"]
        with pytest.raises(AuthError, match="missing API key"):
            t.post("/v1/act", act_body())


def test_a_missing_key_fails_locally_at_construction(no_env):
    with pytest.raises(AuthError, match="SEQUENCES_API_KEY"):
        Transport(base_url="http://127.0.0.1:9")


def test_out_of_credit_is_402(shared_gateway, no_env):
    with Transport(base_url=shared_gateway.url, api_key=shared_gateway.broke_key) as t:
        with pytest.raises(OutOfCredit) as info:
            t.post("/v1/act", act_body())
    assert info.value.status == 402
    assert_no_key(info.value, shared_gateway.broke_key)


@pytest.mark.parametrize(
    ("body", "status", "match"),
    [
        (act_body(model="no-such-model"), 404, "not found"),
        (act_body(views=("exterior_1",)), 400, "wrist_left"),
        ({"model": PI05, "observation": {"instruction": "x"}}, 422, "failed with 422"),
    ],
)
def test_other_4xx_are_invalid_request_with_status_and_body(transport, body, status, match):
    with pytest.raises(InvalidRequest, match=match) as info:
        transport.post("/v1/act", body)
    assert info.value.status == status
    assert info.value.body and "detail" in info.value.body


def test_a_scalar_gripper_is_refused_by_the_schema(transport):
    body = act_body()
    body["observation"]["proprioception"]["gripper"] = 0.0
    with pytest.raises(InvalidRequest) as info:
        transport.post("/v1/act", body)
    assert info.value.status == 422


@pytest.mark.parametrize(
    ("status", "error"),
    [(500, SequencesError), (503, Unavailable), (504, Unavailable), (401, AuthError)],
)
def test_injected_statuses_map_to_their_error_class(shared_gateway, transport, status, error):
    shared_gateway.inject("status", status=status)
    with pytest.raises(error) as info:
        transport.post("/v1/act", act_body())
    assert type(info.value) is error
    assert info.value.status == status
    if isinstance(info.value, Unavailable):
        assert info.value.warming is False


def test_429_is_rate_limited_carrying_retry_after(shared_gateway, transport):
    # Retry-After carries whole seconds (HTTP delay-seconds).
    shared_gateway.inject("status", status=429, seconds=2)
    with pytest.raises(RateLimited) as info:
        transport.post("/v1/act", act_body())
    assert isinstance(info.value, Unavailable) and info.value.status == 429
    assert info.value.retry_after_s == 2.0 and info.value.warming is False
    assert repr(info.value).startswith("RateLimited(")


@pytest.mark.slow  # over half a second of wall time
def test_a_trickled_body_ends_at_the_whole_request_deadline(shared_gateway, no_env):
    # httpx's timeout is per read: a byte every 0.2 s would never trip a 1 s read timeout.
    with Transport(base_url=shared_gateway.url, api_key=shared_gateway.api_key,
                   timeout_s=1.0) as transport:
        shared_gateway.inject("trickle", seconds=0.2)
        with pytest.raises(Unavailable, match=r"timed out after 1s \(reading the response body"):
            transport.post("/v1/act", act_body())
        # The connection it abandoned is not reused half-read: the next call is whole.
        assert len(transport.post("/v1/act", act_body())["action_chunk"]["steps"]) == 15


def test_a_body_over_the_cap_is_refused_unread(shared_gateway, transport):
    rows = 20_000  # about 3 MB of JSON: over the cap, far over any real chunk
    shared_gateway.inject("rows", rows=rows)
    with pytest.raises(InvalidResponse, match=f"expected at most {MAX_BODY_BYTES} bytes"):
        transport.post("/v1/act", act_body())
    assert len(transport.post("/v1/act", act_body())["action_chunk"]["steps"]) == 15


def test_a_warming_model_gives_unavailable_with_eta_and_job(gateway_factory, no_env):
    # Its own gateway: the model stays cold for the rest of this gateway's life.
    own = gateway_factory()
    own.inject("warming", seconds=40)
    with Transport(base_url=own.url, api_key=own.api_key) as transport:
        with pytest.raises(Unavailable) as info:
            transport.post("/v1/act", act_body())
    exc = info.value
    assert exc.status == 503 and exc.warming is True
    assert 30 <= exc.retry_after_s <= 40
    assert exc.job_id
    assert "loading" in str(exc)


def test_a_malformed_200_is_invalid_response(shared_gateway, transport):
    shared_gateway.inject("malformed")
    with pytest.raises(InvalidResponse, match="not JSON") as info:
        transport.post("/v1/act", act_body())
    assert info.value.status == 200


def test_a_reset_connection_is_unavailable_and_the_next_call_works(shared_gateway, transport):
    shared_gateway.inject("reset")
    with pytest.raises(Unavailable, match="could not reach") as info:
        transport.post("/v1/act", act_body())
    assert info.value.status is None and info.value.warming is False
    assert transport.post("/v1/act", act_body())["action_chunk"]["steps"]


def test_a_post_timeout_names_the_per_call_timeout_that_applied(shared_gateway, transport):
    shared_gateway.inject("stall", seconds=30)
    try:
        with pytest.raises(Unavailable, match=r"timed out after 0\.4s"):
            transport.post("/v1/act", act_body(), timeout=0.4)
    finally:
        shared_gateway.clear_faults()


@pytest.fixture
def silent_server():
    """A listening socket that accepts TCP but never answers: every read times out."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.bind(("127.0.0.1", 0))
    sock.listen(8)
    yield f"http://127.0.0.1:{sock.getsockname()[1]}"
    sock.close()


def test_a_get_timeout_names_the_default_timeout(silent_server, no_env):
    with Transport(base_url=silent_server, timeout_s=0.3, require_key=False) as t:
        with pytest.raises(Unavailable, match=r"GET .*/v1/models timed out after 0\.3s"):
            t.get("/v1/models")


def test_a_get_timeout_names_the_per_call_timeout(silent_server, no_env):
    with Transport(base_url=silent_server, timeout_s=30, require_key=False) as t:
        with pytest.raises(Unavailable, match=r"timed out after 0\.25s"):
            t.get("/v1/health", timeout=0.25)


def test_an_unreachable_gateway_is_unavailable(gateway_factory, no_env):
    own = gateway_factory()
    with Transport(base_url=own.url, api_key=own.api_key) as transport:
        assert transport.get("/v1/health")
        own.kill()
        with pytest.raises(Unavailable, match="could not reach"):
            transport.get("/v1/health")
        own.restart()
        deadline = time.monotonic() + 30
        while True:
            try:
                assert transport.get("/v1/health")
                break
            except Unavailable:
                if time.monotonic() > deadline:
                    raise


def test_one_connection_serves_many_requests(shared_gateway, transport):
    before = shared_gateway.counters()["connections"]
    for _ in range(3):
        transport.get("/v1/models")
        transport.get("/v1/act/ready", params={"model": PI05})
        transport.post("/v1/act", act_body())
    assert shared_gateway.counters()["connections"] - before == 1


def test_abort_still_finds_the_pooled_sockets_inside_httpx(transport):
    # abort() reaches into httpx/httpcore internals to wake a blocked read; if an upgrade
    # moved them, abort would silently leave stalled requests blocked until their timeout.
    transport.get("/v1/health")
    sockets = transport._pooled_sockets()
    assert len(sockets) == 1 and sockets[0].fileno() >= 0


def test_a_closed_transport_refuses_calls(transport):
    transport.close()
    transport.close()
    with pytest.raises(SequencesError, match="closed"):
        transport.get("/v1/health")
    assert "closed" in repr(transport)


@pytest.mark.parametrize(
    "url", ["http://example.com", "http://10.0.0.5:8000", "http://[2001:db8::1]/"]
)
def test_plain_http_off_this_machine_is_refused(url, no_env):
    with pytest.raises(ValueError, match="allow_insecure"):
        Transport(base_url=url, api_key="k")
    Transport(base_url=url, api_key="k", allow_insecure=True).close()


@pytest.mark.parametrize(
    "url", ["http://127.0.0.1:8000", "http://localhost:1", "http://[::1]:80", "https://example.com"]
)
def test_loopback_http_and_any_https_are_allowed(url, no_env):
    Transport(base_url=url, api_key="k").close()


@pytest.mark.parametrize("url", ["ftp://example.com", "example.com", "https://"])
def test_a_url_without_http_scheme_or_host_is_refused(url, no_env):
    with pytest.raises(ValueError, match="base_url"):
        Transport(base_url=url, api_key="k")


def test_tls_with_a_ca_bundle_path(gateway_factory, no_env):
    gw = gateway_factory(tls=True)
    assert gw.url.startswith("https://")
    with Transport(base_url=gw.url, api_key=gw.api_key, verify=gw.ca_bundle) as t:
        assert t.post("/v1/act", act_body())["action_chunk"]["steps"]
    with Transport(base_url=gw.url, api_key=gw.api_key) as t:
        with pytest.raises(Unavailable, match="could not reach"):
            t.get("/v1/health")


def test_verify_must_be_an_existing_bundle(tmp_path, no_env):
    with pytest.raises(ValueError, match="CA bundle"):
        Transport(base_url="https://x.example", api_key="k", verify=str(tmp_path / "none.pem"))
    with pytest.raises(TypeError, match="verify"):
        Transport(base_url="https://x.example", api_key="k", verify=3)


@pytest.mark.parametrize("timeout", [0, -1, float("nan"), True])
def test_timeout_must_be_positive(timeout, no_env):
    with pytest.raises(ValueError, match="timeout_s"):
        Transport(base_url="http://127.0.0.1:9", api_key="k", timeout_s=timeout)


def test_resolution_prefers_arguments_then_environment(monkeypatch):
    monkeypatch.setenv("SEQUENCES_BASE_URL", "http://127.0.0.1:8123/")
    monkeypatch.setenv("SEQUENCES_API_KEY", " seq_env ")
    assert resolve_base_url(None) == "http://127.0.0.1:8123"
    assert resolve_base_url("https://staging.example/") == "https://staging.example"
    assert resolve_api_key(None) == "seq_env"
    assert resolve_api_key("seq_arg") == "seq_arg"
    monkeypatch.delenv("SEQUENCES_BASE_URL")
    monkeypatch.delenv("SEQUENCES_API_KEY")
    assert resolve_base_url(None) == DEFAULT_BASE_URL
    assert resolve_api_key(None) is None


def test_retry_after_accepts_seconds_and_http_dates():
    now = datetime(2026, 11, 29, 12, 0, 0, tzinfo=timezone.utc)
    later = format_datetime(now + timedelta(seconds=90), usegmt=True)
    assert parse_retry_after("118") == 118.0
    assert parse_retry_after(" 2.5 ") == 2.5
    assert parse_retry_after(later, now=now.timestamp()) == pytest.approx(90.0)
    past = format_datetime(now - timedelta(seconds=5), usegmt=True)
    assert parse_retry_after(past, now=now.timestamp()) == 0.0
    assert parse_retry_after("soon") is None
    assert parse_retry_after("") is None
    assert parse_retry_after(None) is None


def test_a_non_finite_body_is_refused_before_sending(shared_gateway, transport):
    before = shared_gateway.counters()["requests"]["act"]
    body = act_body()
    body["observation"]["proprioception"]["joint_positions"][0] = float("nan")
    with pytest.raises(ValueError, match="NaN or infinity"):
        transport.post("/v1/act", body)
    assert shared_gateway.counters()["requests"]["act"] == before


def test_properties_describe_the_connection_without_the_key(shared_gateway, transport):
    assert transport.base_url == shared_gateway.url
    assert transport.has_key and transport.timeout_s == 30.0
    assert shared_gateway.api_key not in repr(transport) and "api_key=set" in repr(transport)
