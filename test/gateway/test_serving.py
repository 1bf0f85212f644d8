"""Cold start, readiness, keep-warm, and the per-model FIFO queue."""

from __future__ import annotations

import asyncio
import random
import threading
import time

import pytest

pytest.importorskip("fastapi")

from support.gateway_support import COSMOS3, DEADLINE_S, PI05, act_body, client  # noqa: E402
from support.waiting import wait_for  # noqa: E402

from sequence_ai_gateway.models.catalogue import simulated_row  # noqa: E402
from sequence_ai_gateway.policies import PolicyObservation  # noqa: E402
from sequence_ai_gateway.service.serving import (  # noqa: E402
    LatencySettings,
    ModelServer,
    WarmthSettings,
    sample_latency_s,
)


@pytest.mark.slow  # over half a second of wall time
def test_cold_model_warms_on_first_poll_then_serves(gateway_factory):
    handle = gateway_factory(cold_start_s=0.5)
    with client(handle) as c:
        first = c.get("/v1/act/ready", params={"model": PI05}).json()
        second = c.get("/v1/act/ready", params={"model": PI05}).json()
        assert first == {"ready": False, "eta_s": 0.5}
        assert second["eta_s"] == first["eta_s"]  # the load's duration, not a countdown
        wait_for(lambda: c.get("/v1/act/ready", params={"model": PI05}).json()["ready"],
                 "the model to finish loading")
        assert c.post("/v1/act", json=act_body()).status_code == 200


def test_act_on_a_cold_model_answers_warming_up_with_retry_after(gateway_factory):
    handle = gateway_factory(cold_start_s=120)
    with client(handle) as c:
        response = c.post("/v1/act", json=act_body())
        again = c.post("/v1/act", json=act_body())
    assert response.status_code == 503
    detail = response.json()["detail"]
    assert set(detail) == {"status", "retry_after_s", "warming_job_id", "message"}
    assert detail["status"] == "warming_up"
    assert isinstance(detail["retry_after_s"], int) and 1 <= detail["retry_after_s"] <= 120
    assert detail["warming_job_id"].startswith("job-")
    assert response.headers["retry-after"] == str(detail["retry_after_s"])
    assert again.json()["detail"]["warming_job_id"] == detail["warming_job_id"]


def test_warming_then_ready_then_act_succeeds(gateway_factory):
    handle = gateway_factory(cold_start_s=0.3)
    with client(handle) as c:
        assert c.post("/v1/act", json=act_body()).status_code == 503
        wait_for(lambda: c.post("/v1/act", json=act_body()).status_code == 200, "warm model")
        assert c.get("/v1/act/ready", params={"model": PI05}).json()["ready"] is True


def test_force_cold_makes_the_next_poll_start_warming(gateway_factory):
    handle = gateway_factory(cold_start_s=60)
    with client(handle) as c:
        handle.force_cold("pi05-droid")
        assert c.get("/v1/act/ready", params={"model": PI05}).json()["ready"] is False


def test_models_are_warm_from_the_start_without_cold_start(gateway):
    with client(gateway) as c:
        assert c.get("/v1/act/ready", params={"model": COSMOS3}).json()["ready"] is True


def _server(cold_start_s: float, keep_warm_s: float) -> ModelServer:
    return ModelServer(simulated_row("pi05-droid"), _EchoPolicy(), LatencySettings(scale=0.0),
                       WarmthSettings(cold_start_s, keep_warm_s), random.Random(0))


class _EchoPolicy:
    row = simulated_row("pi05-droid")
    inference_ms = 0.0

    def steps(self, observation: PolicyObservation):
        return [[float(observation.seed or 0)] * 8]


def test_idle_beyond_keep_warm_goes_cold():
    server = _server(cold_start_s=30.0, keep_warm_s=0.05)
    server.force_warming(0.0)
    assert server.use() is None
    time.sleep(0.1)  # longer than keep_warm_s: the model must have gone cold
    remaining = server.use()
    assert remaining is not None and remaining > 0


def test_use_within_keep_warm_keeps_the_model_warm():
    server = _server(cold_start_s=30.0, keep_warm_s=600.0)
    server.force_warming(0.0)
    assert [server.use() for _ in range(5)] == [None] * 5


def test_worker_serves_in_arrival_order_and_never_drops():
    server = _server(cold_start_s=0.0, keep_warm_s=600.0)

    async def scenario():
        release = asyncio.Event()

        async def hold() -> None:
            await release.wait()

        def obs(i: int) -> PolicyObservation:
            return PolicyObservation("task", [0.0] * 7, [0.0], seed=i)

        order = []

        async def request(i: int, held: bool) -> None:
            result = await server.infer(obs(i), hold if held else None)
            order.append(int(result.rows[0][0]))

        tasks = [asyncio.ensure_future(request(0, True))]
        for i in range(1, 5):
            await asyncio.sleep(0)
            tasks.append(asyncio.ensure_future(request(i, False)))
        while server.queue_depth < 5:
            await asyncio.sleep(0.001)
        release.set()
        await asyncio.gather(*tasks)
        return order

    assert asyncio.run(scenario()) == [0, 1, 2, 3, 4]
    assert server.max_queue_depth == 5 and server.queue_depth == 0


def test_concurrent_requests_queue_behind_a_held_one(gateway):
    gateway.inject("hold", model=PI05)
    statuses = []

    def post() -> None:
        with client(gateway) as c:
            statuses.append(c.post("/v1/act", json=act_body(PI05)).status_code)

    threads = [threading.Thread(target=post) for _ in range(3)]
    for t in threads:
        t.start()
    wait_for(lambda: gateway.counters()["queue_depth"]["pi05-droid"] == 3, "three queued")
    with client(gateway) as c:  # another model has its own worker
        assert c.post("/v1/act", json=act_body(COSMOS3)).status_code == 200
    assert statuses == []
    gateway.clear_faults()
    for t in threads:
        t.join(DEADLINE_S)
    assert statuses == [200, 200, 200]
    counters = gateway.counters()
    assert counters["max_queue_depth"]["pi05-droid"] == 3
    assert counters["queue_depth"]["pi05-droid"] == 0


def test_latency_sampling():
    rng = random.Random(1)
    assert sample_latency_s(650.0, 0.0, 0.0, rng) == 0.0
    assert sample_latency_s(650.0, 0.0, 1.0, rng) == pytest.approx(0.65)
    assert sample_latency_s(650.0, 0.0, 0.1, rng) == pytest.approx(0.065)
    jittered = [sample_latency_s(650.0, 100.0, 1.0, rng) for _ in range(200)]
    assert min(jittered) > 0 and len(set(jittered)) > 100
    assert sorted(jittered)[100] == pytest.approx(0.65, rel=0.1)


def test_set_latency_reports_simulated_inference_time(gateway):
    gateway.set_latency(latency_ms=50, scale=1.0)
    with client(gateway) as c:
        perf = c.post("/v1/act", json=act_body()).json()["perf"]
    assert perf["inference_ms"] >= 50
    assert perf["ttfa_ms"] >= perf["inference_ms"]
