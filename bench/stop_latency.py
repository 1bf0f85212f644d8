"""Section 1: interrupt() → hold() returned, during playback and while a fetch is stalled."""

from __future__ import annotations

import threading
import time
from typing import Any

from bench.common import PI05, ActClock, Context, accept, fixed_observation, in_thread, log, perf
from bench.plots import cdf
from bench.report import Section, Table
from bench.stats import Summary, fmt

HZ = 15.0
PERIOD_S = 1.0 / HZ


def _trial(ctx: Context, policy: Any, observation: Any, *, stalled: bool) -> float:
    """One run interrupted at a random moment; seconds from interrupt() to hold() returned."""
    cue = threading.Event()
    held: list[float] = []
    chunks = [0]

    def hold() -> None:
        held.append(perf())

    def on_status(state: str) -> None:
        if state == ("waiting" if stalled else "running"):
            cue.set()

    def on_chunk(_prediction: Any) -> None:
        chunks[0] += 1
        if stalled and chunks[0] == 1:
            # The next fetch (prefetch or refill) stalls: playback drains, then the loop waits.
            ctx.gateway.inject("stall", seconds=ctx.pick(5.0, 3.0))

    def drive() -> Any:
        return policy.run(
            lambda: observation,
            ActClock(),
            max_actions=100_000,
            validate=accept,
            hold=hold,
            on_status=on_status,
            on_chunk=on_chunk,
            progress=False,
            # Two steps per chunk in the stalled case. A late chunk's rows beyond that are
            # still played, with the rest ramp (about 1.3 s at 15 Hz): the stall outlasts them.
            open_loop_horizon=2 if stalled else None,
        )

    with in_thread(drive) as box:
        if not cue.wait(30.0):
            policy.interrupt()
            raise RuntimeError("the run never reached the state the trial waits for")
        # Land anywhere in playback (crossing chunk seams and prefetches) or in the wait.
        time.sleep(ctx.rng.uniform(0.0, 0.3 if stalled else 0.8))
        start = perf()
        policy.interrupt()
    if box.get("error") is not None:
        raise box["error"]
    if stalled:
        ctx.gateway.clear_faults()
    if len(held) != 1:
        raise RuntimeError(f"hold() was called {len(held)} times; expected once")
    return held[0] - start


def run(ctx: Context) -> Section:
    section = Section(
        "stop_latency",
        "Stop latency",
        intro=(
            "Time from `Policy.interrupt()` (called on another thread) to the `hold()` callback "
            f"having returned, at {HZ:g} Hz control (pi05-droid chunks). *Playback*: the "
            "interrupt lands at a random moment of normal playback with prefetching (gateway "
            "latency 50 ms). *Stalled fetch*: the next chunk's request is held by the gateway "
            f"(`inject('stall', seconds={ctx.pick(5, 3)})`), the buffer has run dry and the loop "
            "waits; the interrupt lands at a random moment of that wait. hold() itself is a "
            "no-op here, so the figure is the loop's own reaction time."
        ),
    )
    trials = ctx.pick(100, 12)
    ctx.latency(50.0, 0.0)
    model = ctx.models[PI05]
    observation = fixed_observation(model)
    rows = []
    series: dict[str, list[float]] = {}
    with ctx.connect(PI05, control_hz=HZ) as policy:
        for label, stalled in (("during playback", False), ("while a fetch is stalled", True)):
            log(f"stop latency {label}: {trials} trials")
            samples = [_trial(ctx, policy, observation, stalled=stalled) for _ in range(trials)]
            series[label] = [x * 1000.0 for x in samples]
            ms = Summary.of(samples).scaled(1000.0)
            frac = Summary.of(samples).scaled(1.0 / PERIOD_S)
            rows.append([
                label, str(ms.n), fmt(ms.median, 3), fmt(ms.p99, 3), fmt(ms.max, 3),
                f"{frac.median * 100:.2f}%", f"{frac.p99 * 100:.2f}%", f"{frac.max * 100:.2f}%",
            ])
    section.tables.append(Table(
        f"Stop latency at {HZ:g} Hz (period {PERIOD_S * 1000:.1f} ms)",
        ["case", "trials", "median ms", "p99 ms", "max ms",
         "median / period", "p99 / period", "max / period"],
        rows,
        ctx.command("stop_latency"),
    ))
    cdf(ctx.out_dir / "bench_stop_latency.png", series, xlabel="interrupt() → hold() returned (ms)",
        title=f"Stop latency at {HZ:g} Hz", marks={"1 ms": 1.0, "5 ms": 5.0}, log_x=True)
    section.figures.append(("bench_stop_latency.png", "Distribution of the stop latency (CDF)."))
    return section
