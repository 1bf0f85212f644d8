"""Every injectable fault, through the Python API and the loopback control endpoint."""

from __future__ import annotations

import json
import re
import sys

import httpx
import pytest

pytest.importorskip("fastapi")

from support.gateway_fixture import run_gateway  # noqa: E402
from support.gateway_support import (  # noqa: E402
    COSMOS3,
    DEADLINE_S,
    PI05,
    act_body,
    client,
    pending_faults,
    start_stalled_act,
    steps_of,
    waiting_requests,
)
from support.waiting import wait_for


@pytest.mark.parametrize("status", [500, 503, 504, 401, 402])
def test_status_fault_answers_once_with_a_plain_detail(gateway, status):
    gateway.inject("status", status=status)
    with client(gateway) as c:
        faulted = c.post("/v1/act", json=act_body())
        after = c.post("/v1/act", json=act_body())
    assert faulted.status_code == status
    assert isinstance(faulted.json()["detail"], str)  # plain: not a warming_up object
    assert "retry-after" not in faulted.headers
    assert after.status_code == 200


def test_count_and_model_select_which_calls_fail(gateway):
    gateway.inject("status", status=500, count=2, model="cosmos3-edge-policy-droid")
    with client(gateway) as c:
        assert c.post("/v1/act", json=act_body(PI05)).status_code == 200
        assert [c.post("/v1/act", json=act_body(COSMOS3)).status_code for _ in range(3)] == \
            [500, 500, 200]


def test_faults_apply_only_to_requests_that_would_be_served(gateway):
    gateway.inject("status", status=500)
    with client(gateway) as c:
        assert c.post("/v1/act", json=act_body(views=["exterior_1"])).status_code == 400
        assert c.post("/v1/act", json=act_body()).status_code == 500


def test_clear_faults_drops_pending_ones(gateway):
    gateway.inject("status", status=500, count=5)
    gateway.clear_faults()
    with client(gateway) as c:
        assert c.post("/v1/act", json=act_body()).status_code == 200


def test_reset_closes_the_connection_mid_response(gateway):
    gateway.inject("reset")
    with client(gateway) as c:
        with pytest.raises(httpx.RemoteProtocolError):
            c.post("/v1/act", json=act_body())
        assert c.post("/v1/act", json=act_body()).status_code == 200


def test_malformed_is_a_200_with_invalid_json(gateway):
    gateway.inject("malformed")
    with client(gateway) as c:
        response = c.post("/v1/act", json=act_body())
    assert response.status_code == 200
    assert response.headers["content-type"].startswith("application/json")
    with pytest.raises(json.JSONDecodeError):
        json.loads(response.text)


@pytest.mark.parametrize(("fault", "check"), [("nan", lambda v: v != v),
                                              ("inf", lambda v: v == float("inf"))])
def test_non_finite_value_in_the_steps(gateway, fault, check):
    gateway.inject(fault)
    with client(gateway) as c:
        response = c.post("/v1/act", json=act_body())
    assert response.status_code == 200
    values = [v for row in steps_of(response) for v in row]
    assert sum(1 for v in values if check(v)) == 1


def test_wrong_dim_makes_every_step_one_wider(gateway):
    gateway.inject("wrong_dim")
    with client(gateway) as c:
        body = c.post("/v1/act", json=act_body()).json()
    chunk = body["action_chunk"]
    assert chunk["action_dim"] == 8
    assert {len(s["values"]) for s in chunk["steps"]} == {9}


def test_empty_returns_zero_steps(gateway):
    gateway.inject("empty")
    with client(gateway) as c:
        chunk = c.post("/v1/act", json=act_body()).json()["action_chunk"]
    assert chunk["steps"] == []


def test_warming_fault_makes_the_model_warm_up(gateway):
    gateway.inject("warming", seconds=600)
    with client(gateway) as c:
        warming = c.post("/v1/act", json=act_body())
        ready = c.get("/v1/act/ready", params={"model": PI05}).json()
        other = c.post("/v1/act", json=act_body(COSMOS3))
    assert warming.status_code == 503
    detail = warming.json()["detail"]
    assert detail["status"] == "warming_up"
    assert warming.headers["retry-after"] == str(detail["retry_after_s"])
    assert ready == {"ready": False, "eta_s": 600}
    assert other.status_code == 200


@pytest.mark.slow  # over half a second of wall time
def test_stall_without_seconds_holds_until_cleared(gateway):
    gateway.inject("stall")
    with client(gateway, timeout=0.5) as c:
        with pytest.raises(httpx.ReadTimeout):
            c.post("/v1/act", json=act_body())
    gateway.clear_faults()
    with client(gateway) as c:
        assert c.post("/v1/act", json=act_body()).status_code == 200


def test_stall_with_seconds_then_answers_normally(gateway):
    gateway.inject("stall", seconds=0.2)
    with client(gateway) as c:
        response = c.post("/v1/act", json=act_body())
    assert response.status_code == 200 and len(steps_of(response)) == 15


def test_stall_delays_only_its_own_request(gateway):
    gateway.inject("stall", model=PI05)
    worker, outcome = start_stalled_act(gateway, PI05)
    wait_for(lambda: not pending_faults(gateway), "the stall to be taken")
    with client(gateway) as c:
        assert c.post("/v1/act", json=act_body(PI05)).status_code == 200
    assert "status" not in outcome
    gateway.clear_faults()
    worker.join(DEADLINE_S)
    assert outcome["status"] == 200


def test_stall_is_released_when_the_gateway_stops(gateway_factory):
    handle = gateway_factory()
    handle.inject("stall")
    worker, outcome = start_stalled_act(handle)
    wait_for(lambda: not pending_faults(handle), "the stall to be taken")
    handle.stop()
    worker.join(DEADLINE_S)
    assert not worker.is_alive()
    assert outcome


@pytest.mark.parametrize(("kwargs", "field"), [
    ({"fault": "explode"}, "explode"),
    ({"fault": "status", "status": 418}, "418"),
    ({"fault": "stall", "count": 0}, "count"),
    ({"fault": "stall", "model": "nope"}, "nope"),
    ({"fault": "stall", "seconds": -1}, "seconds"),
])
def test_bad_fault_is_refused_naming_the_field(gateway, kwargs, field):
    fault = kwargs.pop("fault")
    with pytest.raises(ValueError, match=field):
        gateway.inject(fault, **kwargs)


def test_control_endpoints_over_http(gateway):
    with client(gateway, key=None) as c:
        added = c.post("/_control/faults", json={"fault": "status", "status": 504, "count": 2})
        assert added.status_code == 200 and len(added.json()["pending"]) == 1
        assert c.post("/_control/faults", json={"fault": "bogus"}).status_code == 422
        with client(gateway) as authed:
            assert authed.post("/v1/act", json=act_body()).status_code == 504
        assert c.delete("/_control/faults").status_code == 200
        with client(gateway) as authed:
            assert authed.post("/v1/act", json=act_body()).status_code == 200
        counters = c.get("/_control/counters").json()
        assert counters["requests"]["act"] == 2
        assert c.post("/_control/latency", json={"latency_ms": 5, "scale": 0}).status_code == 200
        assert c.post("/_control/latency", json={"scale": -1}).status_code == 422
        assert c.post("/_control/cold", json={"model": "pi05-droid"}).status_code == 200
        assert c.post("/_control/cold", json={"model": "nope"}).status_code == 404


def test_reset_endpoint_returns_the_gateway_to_its_start_state(gateway):
    gateway.inject("status", status=500, count=3)
    gateway.set_latency(latency_ms=10_000, scale=1.0)
    gateway.force_cold("pi05-droid")
    with client(gateway) as c:
        c.get("/v1/models")
    with client(gateway, key=None) as control:
        after = control.post("/_control/reset").json()
    assert after["requests"] == {"health": 0, "models": 0, "ready": 0, "act": 0, "chat": 0}
    assert after["connections"] == 0
    with client(gateway) as c:
        assert c.post("/v1/act", json=act_body()).status_code == 200  # no fault, no latency


def test_control_connections_are_not_counted(gateway):
    with client(gateway, key=None) as control:
        control.get("/_control/counters")
        control.post("/_control/faults", json={"fault": "empty"})
        control.delete("/_control/faults")
    with client(gateway) as c:
        c.get("/v1/health")
        c.get("/v1/models")
    assert gateway.counters()["connections"] == 1


# --- faults for the safety work: a lying service, huge chunks, trickling bodies, rate limits ---

LIES = {"control_frequency_hz": 1000, "open_loop_horizon": 600, "action_space": "ee_delta",
        "action_dim": 3, "robot": "ur5e", "covers_seconds": 99.5, "sustains_seconds": None}


def test_chunk_fields_overwrites_the_chunk_but_not_its_steps(gateway):
    with client(gateway) as c:
        honest = c.post("/v1/act", json=act_body()).json()["action_chunk"]
        gateway.inject("chunk_fields", fields=LIES)
        lying = c.post("/v1/act", json=act_body()).json()["action_chunk"]
        after = c.post("/v1/act", json=act_body()).json()["action_chunk"]
    assert {name: lying[name] for name in LIES} == LIES
    assert lying["steps"] == honest["steps"]
    assert after == honest


@pytest.mark.parametrize(("fields", "named"), [
    (None, "fields=None"),
    ({}, "fields={}"),
    ({"steps": []}, "'steps'"),
    ({"control_hz": 1000}, "'control_hz'"),
    ({"control_frequency_hz": float("nan")}, "'control_frequency_hz'"),
    ("control_frequency_hz", "fields='control_frequency_hz'"),
])
def test_bad_chunk_fields_are_refused_naming_the_field(gateway, fields, named):
    with pytest.raises(ValueError, match=re.escape(named)):
        gateway.inject("chunk_fields", fields=fields)


def test_rows_extends_the_chunk_with_its_last_row(gateway):
    with client(gateway) as c:
        honest = steps_of(c.post("/v1/act", json=act_body()))
        gateway.inject("rows", rows=40)
        long = c.post("/v1/act", json=act_body()).json()["action_chunk"]
        gateway.inject("rows", rows=3)
        short = steps_of(c.post("/v1/act", json=act_body()))
    rows = [step["values"] for step in long["steps"]]
    assert len(rows) == 40 and rows[:15] == honest and rows[15:] == [honest[-1]] * 25
    assert [step["index"] for step in long["steps"]] == list(range(40))
    assert long["covers_seconds"] == round(40 / 15.0, 4)
    assert short == honest[:3]


@pytest.mark.slow
def test_rows_can_make_a_chunk_of_200000_rows(gateway):
    gateway.inject("rows", rows=200_000)
    with client(gateway, timeout=120.0) as c:
        response = c.post("/v1/act", json=act_body())
    assert response.status_code == 200
    assert len(response.content) > 20_000_000
    chunk = response.json()["action_chunk"]
    assert len(chunk["steps"]) == 200_000 and chunk["steps"][-1]["index"] == 199_999


@pytest.mark.parametrize("rows", [0, -1, 1.5, True, None, "15", 10_000_000])
def test_bad_rows_are_refused_naming_the_field(gateway, rows):
    with pytest.raises(ValueError, match="rows="):
        gateway.inject("rows", rows=rows)


@pytest.mark.parametrize(("kind", "kwargs", "named"), [
    ("stall", {"rows": 5}, "rows=5"),
    ("empty", {"fields": {"robot": "x"}}, "fields="),
    ("trickle", {}, "seconds=None"),
    ("trickle", {"seconds": 0}, "seconds=0"),
])
def test_arguments_of_another_fault_are_refused(gateway, kind, kwargs, named):
    with pytest.raises(ValueError, match=re.escape(named)):
        gateway.inject(kind, **kwargs)


def test_trickle_sends_one_byte_at_a_time_until_released(gateway):
    gateway.inject("trickle", seconds=0.02)
    with client(gateway) as c:
        with c.stream("POST", "/v1/act", json=act_body()) as response:
            assert response.status_code == 200
            raw = response.iter_raw()
            first = [next(raw) for _ in range(10)]
            assert [len(piece) for piece in first] == [1] * 10
            gateway.clear_faults()  # the rest goes at once
            body = b"".join(first) + b"".join(raw)
        assert int(response.headers["content-length"]) == len(body)
        chunk = json.loads(body)["action_chunk"]
        assert len(chunk["steps"]) == 15
        assert c.post("/v1/act", json=act_body()).status_code == 200


@pytest.mark.slow  # over half a second of wall time
def test_trickle_outlasts_any_per_read_timeout(gateway):
    gateway.inject("trickle", seconds=0.05)
    with client(gateway, timeout=httpx.Timeout(5.0, read=1.0)) as c:
        with c.stream("POST", "/v1/act", json=act_body()) as response:
            pieces = 0
            for _ in response.iter_raw():
                pieces += 1
                if pieces == 40:  # 2 s of body: longer than the read timeout, never exceeded
                    break
    assert pieces == 40
    gateway.clear_faults()


def test_trickle_stops_when_the_client_leaves(gateway):
    gateway.inject("trickle", seconds=600)
    with client(gateway) as c:
        with c.stream("POST", "/v1/act", json=act_body()) as response:
            raw = response.iter_raw()  # kept: a dropped iterator closes the response
            assert len(next(raw)) == 1
            wait_for(lambda: waiting_requests(gateway) == 1, "the trickle to pause")
    wait_for(lambda: waiting_requests(gateway) == 0, "the trickle to see the client gone")


@pytest.mark.parametrize(("seconds", "header"), [(3, "3"), (2.5, "3"), (0, "0"), (None, "1")])
def test_status_429_carries_retry_after(gateway, seconds, header):
    gateway.inject("status", status=429, seconds=seconds)
    with client(gateway) as c:
        limited = c.post("/v1/act", json=act_body())
        after = c.post("/v1/act", json=act_body())
    assert limited.status_code == 429
    assert limited.headers["retry-after"] == header
    detail = limited.json()["detail"]
    assert isinstance(detail, str) and f"retry in {header} s" in detail
    assert after.status_code == 200


@pytest.mark.slow
@pytest.mark.parametrize("in_subprocess", [False, True])
def test_new_faults_through_either_handle(in_subprocess, monkeypatch):
    monkeypatch.setenv("SEQUENCE_AI_GATEWAY_PYTHON", sys.executable)
    with run_gateway(subprocess=in_subprocess) as handle, client(handle) as c:
        handle.inject("chunk_fields", fields={"control_frequency_hz": 1000})
        assert c.post("/v1/act", json=act_body()).json()["action_chunk"][
            "control_frequency_hz"] == 1000
        handle.inject("rows", rows=20)
        assert len(steps_of(c.post("/v1/act", json=act_body()))) == 20
        handle.inject("status", status=429, seconds=4)
        assert c.post("/v1/act", json=act_body()).headers["retry-after"] == "4"
        handle.inject("trickle", seconds=30)
        with c.stream("POST", "/v1/act", json=act_body()) as response:
            raw = response.iter_raw()
            first = next(raw)
            assert len(first) == 1
            handle.clear_faults()
            assert len(json.loads(first + b"".join(raw))["action_chunk"]["steps"]) == 15
        with pytest.raises(ValueError, match="steps"):
            handle.inject("chunk_fields", fields={"steps": []})
        with pytest.raises(ValueError, match="rows"):
            handle.inject("rows", rows=0)
