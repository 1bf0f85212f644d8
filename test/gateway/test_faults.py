"""Every injectable fault, through the Python API and the loopback control endpoint."""

from __future__ import annotations

import json

import httpx
import pytest

pytest.importorskip("fastapi")

from gateway_support import (  # noqa: E402
    COSMOS3,
    DEADLINE_S,
    PI05,
    act_body,
    client,
    pending_faults,
    start_stalled_act,
    steps_of,
    wait_for,
)


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
    assert after["requests"] == {"health": 0, "models": 0, "ready": 0, "act": 0}
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
