"""Section 4: achieved vs requested control rate, and period jitter, for costly observe()."""

from __future__ import annotations

from bench.common import PI05, ActClock, Context, accept, busy, fixed_observation, log
from bench.plots import cdf
from bench.report import Section, Table
from bench.stats import Summary, fmt

RATES_HZ = (15.0, 50.0, 100.0)
OBSERVE_MS = (0.0, 5.0, 20.0)
LATENCY_MS = 30.0


def run(ctx: Context) -> Section:
    seconds = ctx.pick(5.0, 0.8)
    section = Section(
        "pacing",
        "Pacing",
        intro=(
            "`Policy.run()` with `control_hz` overriding the chunk's 15 Hz, pi05-droid chunks "
            f"(8 steps played), prefetch on, gateway latency {LATENCY_MS:g} ms (fixed), "
            f"{seconds:g} s per row. `observe()` burns the listed CPU time on the driving thread "
            "(a stand-in for frame conversion and JPEG encoding). *Achieved*: steps per second "
            "between the first and the last step. *Jitter*: |interval between consecutive steps "
            "− period|."
        ),
    )
    ctx.latency(LATENCY_MS, 0.0)
    observation = fixed_observation(ctx.models[PI05])
    rows = []
    series: dict[str, list[float]] = {}
    for hz in RATES_HZ:
        for cost_ms in OBSERVE_MS:
            log(f"pacing {hz:g} Hz, observe {cost_ms:g} ms")

            def observe(cost_s: float = cost_ms / 1000.0) -> object:
                busy(cost_s)
                return observation

            acts = ActClock()
            with ctx.connect(PI05, control_hz=hz) as policy:
                outcome = policy.run(
                    observe, acts, max_actions=1_000_000, max_seconds=seconds,
                    validate=accept, progress=False,
                )
            times = acts.times
            period = 1.0 / hz
            intervals = [b - a for a, b in zip(times, times[1:])]
            achieved = (len(times) - 1) / (times[-1] - times[0]) if len(times) > 1 else 0.0
            jitter = Summary.of([abs(i - period) for i in intervals]).scaled(1000.0)
            if cost_ms in (0.0, max(OBSERVE_MS)):
                series[f"{hz:g} Hz, observe {cost_ms:g} ms"] = [
                    abs(i - period) * 1000.0 for i in intervals]
            rows.append([
                fmt(hz, 0), fmt(cost_ms, 0), fmt(achieved, 2), f"{achieved / hz * 100:.1f}%",
                fmt(jitter.median, 3), fmt(jitter.p99, 3), fmt(jitter.max, 2),
                str(outcome.underruns), fmt(outcome.underrun_s, 3),
            ])
    section.tables.append(Table(
        "Achieved rate and period jitter",
        ["requested Hz", "observe() ms", "achieved Hz", "achieved / requested",
         "jitter p50 ms", "jitter p99 ms", "jitter max ms", "underruns", "underrun s"],
        rows,
        ctx.command("pacing"),
    ))
    cdf(ctx.out_dir / "bench_pacing.png", series, xlabel="|step interval − period| (ms)",
        title="Period jitter", marks={"1 ms": 1.0, "10 ms": 10.0}, log_x=True)
    section.figures.append(("bench_pacing.png",
                            "Period jitter (CDF) with a free and with a 20 ms observe()."))
    return section
