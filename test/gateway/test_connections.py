"""The connection counter, request counters, kill/restart, TLS."""

from __future__ import annotations

import ssl

import httpx
import pytest

pytest.importorskip("fastapi")

from gateway_support import (  # noqa: E402
    DEADLINE_S,
    PI05,
    act_body,
    client,
    pending_faults,
    start_stalled_act,
    wait_for,
)


def test_keep_alive_reuses_one_connection(gateway):
    before = gateway.counters()["connections"]
    with client(gateway) as c:
        for _ in range(5):
            assert c.post("/v1/act", json=act_body()).status_code == 200
    assert gateway.counters()["connections"] == before + 1


def test_separate_clients_open_separate_connections(gateway):
    before = gateway.counters()["connections"]
    for _ in range(3):
        with client(gateway, key=None) as c:
            c.get("/v1/health")
    assert gateway.counters()["connections"] == before + 3


def test_requests_are_counted_per_endpoint(gateway):
    with client(gateway) as c:
        c.get("/v1/health")
        c.get("/v1/models")
        c.get("/v1/models", params={"endpoint": "act"})
        c.get("/v1/act/ready", params={"model": PI05})
        c.post("/v1/act", json=act_body())
        c.post("/v1/act", json={"bad": "body"})
        c.post("/v1/chat", json={"bad": "body"})
    assert gateway.counters()["requests"] == {"health": 1, "models": 2, "ready": 1, "act": 2,
                                              "chat": 1}


def test_kill_drops_connections_and_restart_serves_on_the_same_port(gateway):
    url = gateway.url
    gateway.inject("stall")
    worker, outcome = start_stalled_act(gateway)
    wait_for(lambda: not pending_faults(gateway), "the stall to be taken")
    gateway.kill()
    worker.join(DEADLINE_S)
    assert isinstance(outcome.get("error"), httpx.TransportError)
    with pytest.raises(httpx.ConnectError):
        httpx.get(url + "/v1/health", trust_env=False)
    gateway.restart()
    assert gateway.url == url
    with client(gateway) as c:
        assert c.post("/v1/act", json=act_body()).status_code == 200


def test_tls_serves_https_trusted_by_the_ca_bundle(gateway_factory):
    handle = gateway_factory(tls=True)
    assert handle.url.startswith("https://127.0.0.1:")
    context = ssl.create_default_context(cafile=handle.ca_bundle)
    with client(handle, verify=context) as c:
        assert c.post("/v1/act", json=act_body()).status_code == 200
    with pytest.raises(httpx.ConnectError):
        httpx.get(handle.url + "/v1/health", trust_env=False)  # system trust store: refused
