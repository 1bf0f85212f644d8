"""Section: hand-over versus preemption — a new instruction every 1.0 s for 20 s at the
service's realistic latency (issue 24's Measure)."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

from bench.common import PI05, Context, accept, droid_parameters, fixed_observation, log
from bench.report import Section, Table
from bench.stats import Summary, fmt
from sequence_ai.events import (
    AnswerArrived,
    InstructionHandedOver,
    ObservationSent,
    RowPlayed,
    RunEvent,
)

SWITCH_S = 1.0
TARGET_GAP_PERIODS = 1.5
# The run settings a goal of the shipped node gets (config/droid.yaml).
RUN_SETTINGS = ("prefetch", "smooth_seam", "max_in_flight", "playback_speed")


def _run_settings() -> dict[str, Any]:
    """config/droid.yaml's run settings, as `act()` keyword arguments."""
    params = droid_parameters()
    return {name: params[name] for name in RUN_SETTINGS}


class _Trace:
    """Every command's time and every event of the runs (monotonic clock)."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.commands: list[float] = []
        self.events: list[RunEvent] = []

    def act(self, _row: list[float]) -> None:
        with self.lock:
            self.commands.append(time.monotonic())

    def on_event(self, event: RunEvent) -> None:
        with self.lock:
            self.events.append(event)


def _latencies(events: list[RunEvent]) -> list[float]:
    """Observation sent to answer arrived, per request (run by run: sequences restart)."""
    out, sent = [], {}
    for event in events:
        if isinstance(event, ObservationSent):
            sent[event.sequence] = event.time
        elif isinstance(event, AnswerArrived) and event.sequence in sent:
            out.append(event.time - sent.pop(event.sequence))
    return out


def _gap(commands: list[float], start: float, end: float) -> float:
    """The longest interval between consecutive commands that overlaps [start, end]."""
    gaps = [b - a for a, b in zip(commands, commands[1:]) if b >= start and a <= end]
    return max(gaps, default=float("nan"))


def _handover(ctx: Context, seconds: float) -> tuple[list[float], list[float], list[float]]:
    """One act() handed over every SWITCH_S: gaps (s), lags (s), request latencies (s)."""
    model = ctx.models[PI05]
    observation = fixed_observation(model)
    trace = _Trace()
    switches: list[float] = []
    with ctx.connect(PI05) as policy:
        box: dict[str, Any] = {}

        def drive() -> None:
            box["outcome"] = policy.act(
                "step 0", lambda: observation, trace.act, max_seconds=seconds + 30,
                validate=accept, observers=[trace], progress=False, **_run_settings(),
            )

        driver = threading.Thread(target=drive, name="bench-handover", daemon=True)
        driver.start()
        _wait_for(lambda: len(trace.commands) >= 5)
        for k in range(1, int(seconds / SWITCH_S) + 1):
            time.sleep(SWITCH_S)
            switches.append(time.monotonic())
            policy.hand_over(f"step {k}", max_seconds=seconds + 30)
        time.sleep(SWITCH_S)
        policy.interrupt()
        driver.join(30)
    with trace.lock:
        events, commands = list(trace.events), list(trace.commands)
    gaps, lags = [], []
    for index, switch in enumerate(switches):
        took = next(
            (e for e in events if isinstance(e, InstructionHandedOver)
             and e.instruction == f"step {index + 1}"), None,
        )
        if took is None:
            continue  # overtaken by the next switch before its first chunk
        first_row = next(
            (e.time for e in events if isinstance(e, RowPlayed) and e.time >= took.time), None
        )
        if first_row is None:
            continue
        lags.append(first_row - switch)
        gaps.append(_gap(commands, switch, first_row))
    return gaps, lags, _latencies(events)


def _preemption(ctx: Context, seconds: float) -> tuple[list[float], list[float], list[float]]:
    """A new act() every SWITCH_S, each ending the previous by interrupt() and its hold."""
    model = ctx.models[PI05]
    observation = fixed_observation(model)
    trace = _Trace()
    gaps, lags, latencies = [], [], []
    with ctx.connect(PI05) as policy:
        for k in range(int(seconds / SWITCH_S) + 1):
            started = time.monotonic()
            before = len(trace.commands)
            timer = threading.Timer(SWITCH_S, policy.interrupt)
            timer.start()
            policy.act(
                f"step {k}", lambda: observation, trace.act, max_seconds=seconds + 30,
                validate=accept, hold=lambda: None, progress=False, observers=[trace],
                **_run_settings(),
            )
            timer.cancel()
            with trace.lock:
                latencies += _latencies(trace.events)
                trace.events.clear()
            with trace.lock:
                mine = trace.commands[before:]
                last_before = trace.commands[before - 1] if before else None
            if k and mine and last_before is not None:
                # From the last command of the previous instruction to the first of this one.
                gaps.append(mine[0] - last_before)
                lags.append(mine[0] - started)
    return gaps, lags, latencies


def _wait_for(condition: Callable[[], bool], timeout_s: float = 60.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        if time.monotonic() > deadline:
            raise RuntimeError("the run never started playing")
        time.sleep(0.05)


def run(ctx: Context) -> Section:
    seconds = ctx.pick(20.0, 6.0)
    period = 1.0 / (ctx.models[PI05].control_hz or 15.0)
    settings = ", ".join(f"{k} {v}" for k, v in _run_settings().items())
    section = Section(
        "handover",
        "Hand-over versus preemption",
        intro=(
            f"pi05-droid at the gateway's realistic latency model; a new instruction every "
            f"{SWITCH_S:g} s for {seconds:g} s, with config/droid.yaml's run settings "
            f"({settings}). *Hand-over*: one `act()` given each new "
            "instruction by `Policy.hand_over` (what an `act` goal with `handover: true` does "
            "in the node); the old plan plays until the new instruction's first chunk replaces "
            "it. *Preemption*: each new instruction interrupts the running `act()` (its hold) "
            "and starts a new one (what a goal without `handover` does). Gap: the longest time "
            "without a fresh command from the switch to the new instruction's first command, "
            "in control periods (target: at most 1.5). Instruction lag: switch to the first "
            "command of the new instruction (target: within one request latency of the "
            "service's p99, i.e. at most p99 + p50)."
        ),
    )
    ctx.gateway.reset()
    ctx.gateway.set_latency(scale=1.0)
    rows = []
    for label, trial in (("hand-over", _handover), ("preemption", _preemption)):
        log(f"handover: {label}, {seconds:g} s")
        gaps, lags, latencies = trial(ctx, seconds)
        gap = Summary.of(gaps).scaled(1.0 / period)
        lag = Summary.of(lags).scaled(1000.0)
        request = Summary.of(latencies).scaled(1000.0)
        gap_met = "met" if gap.max <= TARGET_GAP_PERIODS else "MISSED"
        lag_met = "met" if lag.p99 <= request.p99 + request.median else "MISSED"
        rows.append([
            label, str(gap.n), fmt(gap.median, 2), fmt(gap.p99, 2), fmt(gap.max, 2), gap_met,
            fmt(lag.median, 0), fmt(lag.p99, 0), fmt(request.median, 0), fmt(request.p99, 0),
            lag_met,
        ])
    section.tables.append(Table(
        f"A new instruction every {SWITCH_S:g} s (control period {period * 1000:.1f} ms)",
        ["case", "switches", "gap p50 (periods)", "gap p99", "gap max", "gap target",
         "lag p50 ms", "lag p99 ms", "request p50 ms", "request p99 ms", "lag target"],
        rows,
        ctx.command("handover"),
    ))
    return section
