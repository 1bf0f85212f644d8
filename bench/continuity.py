"""Section 2: share of time with a fresh command, prefetch off vs on, two chunk geometries."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from bench.common import (
    COSMOS3,
    PI05,
    Context,
    RequestClock,
    TrackingArm,
    accept,
    fresh_share,
    log,
    perf,
)
from bench.report import Section, Table
from bench.stats import Summary, fmt, ratio, times

# (model, label, run seconds in the full run): cosmos3 runs longer, its chunks last 2.13 s.
GEOMETRIES = (
    (PI05, "pi05-droid: 15 Hz, 8 of 15 steps (0.53 s)", 8.0),
    (COSMOS3, "cosmos3: 15 Hz, 32 steps (2.13 s)", 12.0),
)
TIMELINE_LATENCY_S = 0.4


@dataclass
class RunRecord:
    model: str
    latency_s: float
    prefetch: bool
    acts: list[float]
    installs: list[float]
    requests: list[tuple[float, float]]
    start: float
    end: float
    outcome: Any
    period: float

    @property
    def staleness(self) -> list[float]:
        """Per chunk: its request's start (the observation) to its first step played."""
        return [done - begun for done, (begun, _) in zip(self.installs, self.requests)]

    @property
    def fresh(self) -> float:
        return fresh_share(self.acts, self.period, self.end)


def _one_run(
    ctx: Context, model: str, latency_s: float, prefetch: bool, seconds: float
) -> RunRecord:
    ctx.latency(latency_s * 1000.0)
    arm = TrackingArm(ctx.models[model])
    installs: list[float] = []
    with ctx.connect(model) as policy:
        requests = RequestClock(policy)
        start = perf()
        outcome = policy.run(
            arm.observe,
            arm.act,
            max_actions=1_000_000,
            max_seconds=seconds,
            validate=accept,
            prefetch=prefetch,
            controller="joint_position",
            on_chunk=lambda _prediction: installs.append(perf()),
            progress=False,
        )
        end = perf()
    period = 1.0 / (ctx.models[model].control_hz or 15.0)
    return RunRecord(model, latency_s, prefetch, arm.times, installs, requests.spans,
                     start, end, outcome, period)


def _plot(ctx: Context, records: list[RunRecord], path: str) -> None:
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(len(records), 1, figsize=(11, 1.6 * len(records) + 0.8),
                             sharex=True)
    for ax, rec in zip(axes, records):
        t0 = rec.start
        for i, (a, b) in enumerate(rec.requests):
            ax.plot([a - t0, b - t0], [1.0, 1.0], color="tab:blue", lw=5, solid_capstyle="butt",
                    label="request in flight" if i == 0 else None)
            ax.plot([b - t0], [1.0], marker="v", color="tab:blue", ms=6)
        xs = [t - t0 for t in rec.acts]
        ax.vlines(xs, 0.1, 0.6, color="tab:green", lw=0.8, label="step played")
        first_gap = True
        for a, b in zip(rec.acts, rec.acts[1:]):
            if b - a > 1.5 * rec.period:
                ax.axvspan(a - t0 + rec.period, b - t0, color="tab:red", alpha=0.25,
                           label="no fresh command" if first_gap else None)
                first_gap = False
        ax.set_yticks([])
        ax.set_ylim(-0.1, 1.4)
        name = "pi05-droid" if rec.model == PI05 else "cosmos3"
        ax.set_title(f"{name}, latency median {rec.latency_s:g} s, prefetch={rec.prefetch}: "
                     f"fresh {rec.fresh * 100:.0f}% of the time", fontsize=9, loc="left")
        ax.legend(loc="upper right", fontsize=7, ncol=3)
    axes[-1].set_xlabel("seconds since the run started")
    axes[-1].set_xlim(0, min(8.0, max(r.end - r.start for r in records)))
    fig.tight_layout()
    fig.savefig(ctx.out_dir / path, dpi=110)
    plt.close(fig)


def run(ctx: Context) -> Section:
    latencies = ctx.pick((0.2, 0.4, 0.8), (TIMELINE_LATENCY_S,))
    durations = ", ".join(f"{ctx.pick(s, 2.5):g} s ({label.split(':')[0]})"
                          for _, label, s in GEOMETRIES)
    section = Section(
        "continuity",
        "Continuity: prefetch off vs on",
        intro=(
            "`Policy.run()` against the gateway with a lognormal inference time (median as "
            f"listed, sigma 0.3), each run bounded by max_seconds = {durations}, from a fresh "
            "Policy. *Fresh*: share of the run's wall "
            "time during which the last command handed to `act` was at most one control period "
            "old. *Underruns*: times the buffer ran dry and the loop had to wait for a chunk "
            "(from `RunOutcome`). The prefetch-on rows give the ratio to the prefetch-off row "
            "of the same geometry and latency. *Observation age at chunk start*: from the "
            "request that produced a chunk (its observation) to the chunk's first step "
            "played: prefetching buys continuity with older observations. The loop drives an arm "
            "that reaches each commanded joint target at once (observations carry the last "
            "target) with `controller='joint_position'`; *max seam jump* is the largest "
            "change of a joint target across a chunk boundary (`RunOutcome.max_seam_jump`, "
            "no smoothing): a chunk planned from the joints at request time starts where "
            "the arm was then, not where the previous chunk has taken it since."
        ),
    )
    records: list[RunRecord] = []
    rows = []
    for model, label, full_seconds in GEOMETRIES:
        seconds = ctx.pick(full_seconds, 2.5)
        for latency_s in latencies:
            pair = {}
            for prefetch in (False, True):
                log(f"continuity {model} latency {latency_s} s prefetch={prefetch}")
                rec = _one_run(ctx, model, latency_s, prefetch, seconds)
                records.append(rec)
                pair[prefetch] = rec
            off, on = pair[False], pair[True]
            for rec in (off, on):
                out = rec.outcome
                measured = Summary.of([b - a for a, b in rec.requests])
                per_min = out.underrun_s / max(rec.end - rec.start, 1e-9) * 60.0
                compare = ["", ""]
                if rec is on:
                    compare = [times(ratio(on.fresh, off.fresh)),
                               times(ratio(on.outcome.underrun_s, off.outcome.underrun_s))]
                rows.append([
                    label, fmt(latency_s, 1), fmt(measured.median, 3),
                    "on" if rec.prefetch else "off",
                    str(out.chunks), f"{rec.fresh * 100:.1f}%",
                    fmt(ratio(out.underruns, out.chunks), 2), fmt(out.underrun_s, 2),
                    fmt(per_min, 1), fmt(Summary.of(rec.staleness).median, 2),
                    fmt(out.max_seam_jump, 2), *compare,
                ])
    section.tables.append(Table(
        "Fresh-command share and underruns",
        ["geometry", "latency median s", "measured request s (median)", "prefetch", "chunks",
         "fresh", "underruns / chunk", "underrun s", "underrun s / min",
         "observation age at chunk start s (median)", "max seam jump rad", "fresh vs off",
         "underrun s vs off"],
        rows,
        ctx.command("continuity"),
    ))
    chosen = [r for r in records if r.latency_s == TIMELINE_LATENCY_S]
    if chosen:
        _plot(ctx, chosen, "bench_continuity_timeline.png")
        section.figures.append((
            "bench_continuity_timeline.png",
            f"One run of each geometry at latency median {TIMELINE_LATENCY_S:g} s, prefetch off "
            "and on: requests in flight (blue, ▼ = chunk arrived), steps played (green), time "
            "without a fresh command (red).",
        ))
    return section
