"""The latency model: network base + body kB x per-kB cost before the queue, then inference on
one of the model's workers. Checked on the model's own computed medians and on the timing fields
the gateway reports, never on wall time."""

from __future__ import annotations

import json
import random
import statistics
import threading
from typing import Any, Dict, List

import pytest

pytest.importorskip("fastapi")

from support.gateway_support import DEADLINE_S, PI05, act_body, client, frame  # noqa: E402
from support.waiting import wait_for  # noqa: E402

from sequence_ai_gateway.models.catalogue import simulated_row  # noqa: E402
from sequence_ai_gateway.policies import simulated_inference_ms  # noqa: E402
from sequence_ai_gateway.service.serving import (  # noqa: E402
    LatencySettings,
    sample_latency_s,
    sample_transport_s,
)

PI05_INFERENCE_MS = simulated_inference_ms(simulated_row("pi05-droid"))
# The reference client's README, "How big your frames are is how fast you go": pi05-droid
# through the service, one warm worker, p50 of end-to-end /v1/act.
MEASURED_P50_MS = {14_600: 586.0, 3_400: 384.0}
PERF_FIELDS = {"inference_ms", "queue_ms", "ttfa_ms", "transport_ms", "worker_ms", "gateway_ms"}


def _body_bytes(body: Dict[str, Any]) -> bytes:
    return json.dumps(body).encode()


def _post(handle: Any, content: bytes) -> Dict[str, Any]:
    with client(handle) as c:
        response = c.post("/v1/act", content=content)
    assert response.status_code == 200, response.text
    return response.json()["perf"]


def test_pi05_inference_is_the_measured_one():
    assert PI05_INFERENCE_MS == pytest.approx(115.0, abs=5.0)


@pytest.mark.parametrize(("body_bytes", "measured_ms"), sorted(MEASURED_P50_MS.items()))
def test_defaults_reproduce_the_measured_medians(body_bytes, measured_ms):
    expected = LatencySettings().expected_ms(body_bytes, PI05_INFERENCE_MS)
    assert expected == pytest.approx(measured_ms, rel=0.03)


def test_latency_grows_16_ms_per_kb_sent():
    settings = LatencySettings()
    small, large = (settings.expected_ms(n, PI05_INFERENCE_MS) for n in (3_400, 14_600))
    assert (large - small) / 11.2 == pytest.approx(16.0)


@pytest.mark.parametrize("body_bytes", sorted(MEASURED_P50_MS))
def test_sampled_requests_have_the_expected_median(body_bytes):
    settings = LatencySettings()  # default spread: the network base is lognormal
    rng = random.Random(11)
    totals = [
        1000.0 * (sample_transport_s(settings, body_bytes, rng)
                  + sample_latency_s(PI05_INFERENCE_MS, settings.jitter_ms, 1.0, rng))
        for _ in range(4000)
    ]
    expected = settings.expected_ms(body_bytes, PI05_INFERENCE_MS)
    assert statistics.median(totals) == pytest.approx(expected, rel=0.02)
    assert statistics.mean(totals) > expected  # a lognormal's long tail


def test_flat_override_has_no_transport_and_ignores_size():
    settings = LatencySettings(latency_ms=400.0)
    assert settings.expected_ms(3_400, PI05_INFERENCE_MS) == 400.0
    assert settings.expected_ms(14_600, PI05_INFERENCE_MS) == 400.0
    assert sample_transport_s(settings, 14_600, random.Random(1)) == 0.0


def test_reported_transport_is_the_model_at_the_body_size(gateway_factory):
    scale = 0.02
    handle = gateway_factory(scale=scale, spread=0.0)
    settings = LatencySettings(scale=scale, spread=0.0)
    for body in (act_body(), act_body(image=frame(1280, 720))):  # two sizes, same aspect
        content = _body_bytes(body)
        perf = _post(handle, content)
        assert set(perf) >= PERF_FIELDS
        assert perf["transport_ms"] == pytest.approx(settings.transport_median_ms(len(content)),
                                                     abs=0.001)
        assert perf["inference_ms"] >= scale * PI05_INFERENCE_MS
        assert perf["worker_ms"] >= perf["inference_ms"]
        parts = perf["transport_ms"] + perf["queue_ms"] + perf["worker_ms"] + perf["gateway_ms"]
        assert perf["ttfa_ms"] == pytest.approx(parts, abs=0.01)


@pytest.mark.slow  # over half a second of wall time
def test_reported_transport_has_the_models_median_under_spread(gateway_factory):
    scale = 0.01
    handle = gateway_factory(scale=scale)  # default spread
    content = _body_bytes(act_body())
    with client(handle) as c:
        reported = [c.post("/v1/act", content=content).json()["perf"]["transport_ms"]
                    for _ in range(150)]
    median = LatencySettings(scale=scale).transport_median_ms(len(content))
    assert statistics.median(reported) == pytest.approx(median, rel=0.1)
    assert len(set(reported)) > 100  # spread, not one value


def test_counters_report_requests_bytes_and_worker_time(gateway_factory):
    handle = gateway_factory(scale=0.01)
    sizes: List[int] = []
    worker_ms = 0.0
    for instruction in ("wave", "point at the cup", "open the drawer"):
        content = _body_bytes(act_body(instruction=instruction))
        sizes.append(len(content))
        worker_ms += _post(handle, content)["worker_ms"]
    counters = handle.counters()
    model = counters["models"]["pi05-droid"]
    assert model["requests"] == 3 and model["bytes_received"] == sum(sizes)
    assert counters["bytes_received"] == sum(sizes)
    assert model["workers"] == 1 and model["in_transport"] == 0
    assert model["busy_s"] * 1000.0 == pytest.approx(worker_ms, abs=3.0)
    assert 0.0 < model["utilisation"] <= 1.0
    assert counters["models"]["cosmos3-edge-policy-droid"]["requests"] == 0


@pytest.mark.slow  # over half a second of wall time
def test_transport_overlaps_for_concurrent_requests(gateway_factory):
    # A long network phase: three requests are in it at once, none waits for another.
    handle = gateway_factory(scale=1.0, network_ms=1000.0, per_kb_ms=0.0, spread=0.0)
    statuses: List[int] = []

    def post() -> None:
        with client(handle) as c:
            statuses.append(c.post("/v1/act", json=act_body()).status_code)

    threads = [threading.Thread(target=post) for _ in range(3)]
    for t in threads:
        t.start()
    wait_for(lambda: handle.counters()["models"]["pi05-droid"]["in_transport"] == 3,
             "three requests in transport at once")
    for t in threads:
        t.join(DEADLINE_S)
    assert statuses == [200, 200, 200]


@pytest.mark.parametrize(("workers", "second_served_while_held"), [(1, False), (2, True)])
def test_workers_serve_side_by_side(gateway_factory, workers, second_served_while_held):
    handle = gateway_factory(workers=workers)
    handle.inject("hold", model=PI05)  # occupies one worker until cleared
    outcome: Dict[str, int] = {}

    def post(name: str) -> None:
        with client(handle) as c:
            outcome[name] = c.post("/v1/act", json=act_body()).status_code

    held = threading.Thread(target=post, args=("held",))
    held.start()
    wait_for(lambda: handle.counters()["queue_depth"]["pi05-droid"] == 1, "the hold to start")
    second = threading.Thread(target=post, args=("second",))
    second.start()
    if second_served_while_held:
        second.join(DEADLINE_S)
        assert outcome == {"second": 200}
    else:
        wait_for(lambda: handle.counters()["queue_depth"]["pi05-droid"] == 2, "one queued")
        assert outcome == {}
    handle.clear_faults()
    for t in (held, second):
        t.join(DEADLINE_S)
    assert outcome == {"held": 200, "second": 200}
    assert handle.counters()["models"]["pi05-droid"]["workers"] == workers


def test_flat_override_and_reset_back_to_the_model(gateway):
    content = _body_bytes(act_body())
    gateway.set_latency(latency_ms=20.0, scale=1.0)
    flat = _post(gateway, content)
    assert flat["transport_ms"] == 0.0 and flat["inference_ms"] >= 20.0
    gateway.reset()
    gateway.set_latency(scale=0.01, spread=0.0)
    modelled = _post(gateway, content)
    expected = LatencySettings(scale=0.01, spread=0.0).transport_median_ms(len(content))
    assert modelled["transport_ms"] == pytest.approx(expected, abs=0.001)


@pytest.mark.parametrize(("settings", "named"), [
    ({"spread": -0.1}, "spread=-0.1"),
    ({"network_ms": float("inf")}, "network_ms=inf"),
    ({"per_kb_ms": "16"}, "per_kb_ms='16'"),
])
def test_bad_settings_are_refused_naming_the_field(gateway, settings, named):
    with pytest.raises(ValueError, match=named):
        gateway.set_latency(**settings)


def test_workers_must_be_at_least_one(gateway_factory):
    with pytest.raises(ValueError, match="workers=0"):
        gateway_factory(workers=0)
