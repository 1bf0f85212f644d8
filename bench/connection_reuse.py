"""Section 3: a new TLS connection per call vs one Policy's kept-alive connection."""

from __future__ import annotations

import json

from support.gateway_fixture import run_gateway

import sequence_ai
from bench.common import PI05, Context, fixed_observation, log, perf
from bench.report import Section, Table
from bench.stats import Summary, fmt, ratio, times


def run(ctx: Context) -> Section:
    calls = ctx.pick(100, 10)
    section = Section(
        "connection_reuse",
        "Connection reuse over TLS",
        intro=(
            "`predict()` of one pi05-droid observation (two 320×180 JPEG views) against a "
            "second local gateway serving HTTPS on loopback with no simulated inference time "
            "(scale 0), so the figures are the client's and the transport's own cost. No "
            "network delay was added (no netem): on a real network every new connection also "
            "pays at least two round trips (TCP + TLS 1.3) before the request is sent. "
            "Handshakes are the TCP connections the gateway accepted during each mode."
        ),
    )
    observation = fixed_observation(ctx.models[PI05])
    body_kb = len(json.dumps(observation.to_wire())) / 1024.0
    with run_gateway(subprocess=True, tls=True, scale=0.0) as gateway:
        def connect() -> sequence_ai.Policy:
            return sequence_ai.connect(PI05, api_key=gateway.api_key, base_url=gateway.url,
                                       verify=gateway.ca_bundle, validate="off")

        log(f"connection reuse: {calls} calls on new connections")
        before = gateway.counters()["connections"]
        fresh_total: list[float] = []
        fresh_predict: list[float] = []
        for _ in range(calls):
            t0 = perf()
            policy = connect()
            t1 = perf()
            policy.predict(observation)
            t2 = perf()
            policy.close()
            fresh_total.append(perf() - t0)
            fresh_predict.append(t2 - t1)
        fresh_handshakes = gateway.counters()["connections"] - before

        log(f"connection reuse: {calls} calls on one kept-alive connection")
        before = gateway.counters()["connections"]
        kept: list[float] = []
        with connect() as policy:
            t0 = perf()
            policy.predict(observation)
            first_call = perf() - t0
            for _ in range(calls):
                t0 = perf()
                policy.predict(observation)
                kept.append(perf() - t0)
        kept_handshakes = gateway.counters()["connections"] - before

    total = Summary.of(fresh_total).scaled(1000.0)
    predict = Summary.of(fresh_predict).scaled(1000.0)
    reuse = Summary.of(kept).scaled(1000.0)
    rows = [
        ["new connection per call: connect() + predict() + close()", str(total.n),
         fmt(total.median), fmt(total.p99), fmt(total.max), str(fresh_handshakes)],
        ["new connection per call: predict() alone", str(predict.n),
         fmt(predict.median), fmt(predict.p99), fmt(predict.max), "(same)"],
        ["one Policy, kept-alive connection: predict()", str(reuse.n),
         fmt(reuse.median), fmt(reuse.p99), fmt(reuse.max),
         f"{kept_handshakes} (incl. 1 warm-up call of {first_call * 1000:.1f} ms)"],
    ]
    section.tables.append(Table(
        f"Per-call latency over TLS on loopback, request body {body_kb:.0f} kB",
        ["mode", "calls", "median ms", "p99 ms", "max ms", "handshakes"],
        rows,
        ctx.command("connection_reuse"),
        note=(
            f"Kept-alive vs new connection per call (median): "
            f"{times(ratio(reuse.median, total.median))} the time with connect(), "
            f"{times(ratio(reuse.median, predict.median))} of predict() alone; "
            f"{calls} calls cost {fresh_handshakes} handshakes the first way and "
            f"{kept_handshakes} the second."
        ),
    ))
    return section
