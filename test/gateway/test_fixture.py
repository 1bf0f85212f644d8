"""The fixture contract of CONTRACTS.md, in-process and as a subprocess."""

from __future__ import annotations

import sys

import httpx
import pytest

pytest.importorskip("fastapi")

from support.gateway_fixture import GatewayHandle, run_gateway  # noqa: E402
from support.gateway_support import act_body, client  # noqa: E402


def test_gateway_fixture_gives_a_ready_handle(gateway):
    assert isinstance(gateway, GatewayHandle)
    assert gateway.url.startswith("http://127.0.0.1:")
    assert gateway.ca_bundle is None
    assert gateway.api_key and gateway.broke_key and gateway.api_key != gateway.broke_key
    with client(gateway) as c:
        assert c.post("/v1/act", json=act_body()).status_code == 200


@pytest.mark.slow
@pytest.mark.parametrize("in_subprocess", [False, True])
def test_handle_api_in_process_and_subprocess(in_subprocess, monkeypatch):
    monkeypatch.setenv("SEQUENCE_AI_GATEWAY_PYTHON", sys.executable)
    with run_gateway(subprocess=in_subprocess, tls=True, api_keys=["k1"],
                     broke_keys=["k2"]) as handle:
        assert (handle.api_key, handle.broke_key) == ("k1", "k2")
        assert handle.url.startswith("https://") and handle.ca_bundle
        import ssl
        verify = ssl.create_default_context(cafile=handle.ca_bundle)
        with client(handle, verify=verify) as c:
            handle.inject("status", status=504, model="pi05-droid")
            assert c.post("/v1/act", json=act_body()).status_code == 504
            handle.inject("status", status=500, count=3)
            handle.clear_faults()
            assert c.post("/v1/act", json=act_body()).status_code == 200
            with client(handle, key="broke", verify=verify) as broke:
                assert broke.post("/v1/act", json=act_body()).status_code == 402
        counters = handle.counters()
        assert counters["requests"]["act"] == 3 and counters["connections"] >= 2
        assert set(counters["queue_depth"]) == set(counters["max_queue_depth"])
        handle.set_latency(latency_ms=1.0, jitter_ms=0.0, scale=0.0)
        with pytest.raises(ValueError):
            handle.inject("nonsense")
        handle.force_cold("pi05-droid")
        url = handle.url
        handle.kill()
        with pytest.raises(httpx.TransportError):
            httpx.get(url + "/v1/health", verify=verify, trust_env=False)
        handle.restart()
        assert handle.url == url
        with client(handle, verify=verify) as c:
            assert c.post("/v1/act", json=act_body()).status_code == 200


def test_factory_starts_independent_gateways(gateway_factory):
    a = gateway_factory()
    b = gateway_factory(cold_start_s=60)
    assert a.url != b.url
    with client(a) as c:
        assert c.get("/v1/act/ready", params={"model": "pi05-droid"}).json()["ready"] is True
    with client(b) as c:
        assert c.get("/v1/act/ready", params={"model": "pi05-droid"}).json()["ready"] is False
