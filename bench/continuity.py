"""Section 2: continuity under the realistic latency model — requests in flight, playback speed.

pi05-droid against the gateway's latency model (network base lognormal + 16 ms/kB of request
body + queue + 115 ms inference on one worker), for observation sizes that put the p50 at the
listed latencies, at two network spreads. Each configuration drives an arm that reaches every
commanded joint target at once (``controller="joint_position"``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from bench.common import (
    PI05,
    Context,
    RequestClock,
    TrackingArm,
    accept,
    log,
    perf,
    request_bytes,
    sized_observation,
)
from bench.report import Section, Table
from bench.stats import Summary, fmt, percentile
from sequence_ai_gateway.models.catalogue import simulated_row
from sequence_ai_gateway.policies import simulated_inference_ms
from sequence_ai_gateway.service.serving import BYTES_PER_KB, NETWORK_MS, PER_KB_MS

# DROID's max_step (config/droid.yaml): the largest joint target change per catalogue period.
STEP_LIMIT_RAD = 0.25
LATENCIES_MS = (400, 533, 650, 800)
AUTO_EXTRA_MS = 1000  # speed auto is also run here (its target covers 650/800/1000 ms)
SPREADS = (0.1, 0.3)
# (label, max_in_flight, playback_speed)
CONFIGS = (("N=1", 1, 1.0), ("N=2", 2, 1.0), ("N=4", 4, 1.0), ("N=1 auto", 1, "auto"))
TARGET_SUM_S = 0.9
TARGET_UNDERRUNS = 0.02
TARGET_GAP_PERIODS = 1.5
TIMELINE = (650, 0.3)


@dataclass
class Record:
    label: str
    p50_ms: int
    spread: float
    body_bytes: int
    outcome: Any
    latencies: list[float]
    utilisation: float
    start: float
    acts: list[float]
    rows: list[list[float]]
    requests: list[tuple[float, float]]
    period: float
    in_flight: int = 1
    hold_steps: list[float] = field(default_factory=list)

    @property
    def p99_s(self) -> float:
        return percentile(self.latencies, 0.99)

    @property
    def measured_p50_s(self) -> float:
        return percentile(self.latencies, 0.5)

    @property
    def target_applies(self) -> bool:
        return self.p99_s + self.measured_p50_s / self.in_flight <= TARGET_SUM_S


def _hold_steps(times: list[float], rows: list[list[float]], period: float) -> list[float]:
    """The joint step (rad, largest joint) of every command that was followed by a hold: a gap
    of more than 1.5 periods, or the end of the run."""
    steps = []
    for k in range(1, len(rows)):
        following = times[k + 1] - times[k] if k + 1 < len(times) else None
        if following is None or following > TARGET_GAP_PERIODS * period:
            steps.append(max(abs(a - b) for a, b in zip(rows[k][:7], rows[k - 1][:7])))
    return steps


def _one_run(ctx: Context, config: tuple[str, int, Any], p50_ms: int, spread: float,
             seconds: float) -> Record:
    label, in_flight, speed = config
    model = ctx.models[PI05]
    gateway = ctx.gateway
    inference_ms = simulated_inference_ms(simulated_row(PI05))
    target_bytes = int((p50_ms - NETWORK_MS - inference_ms) / PER_KB_MS * BYTES_PER_KB)
    first = sized_observation(model, target_bytes)
    body = request_bytes(model, first)
    gateway.reset()
    gateway.set_latency(scale=1.0, spread=spread)
    arm = TrackingArm(model, first=first)
    with ctx.connect(PI05, max_in_flight=in_flight, playback_speed=speed) as policy:
        clock = RequestClock(policy)
        start = perf()
        outcome = policy.run(
            arm.observe, arm.act, max_actions=1_000_000, max_seconds=seconds, validate=accept,
            controller="joint_position", progress=False,
        )
    counters = gateway.counters()["models"][PI05]
    period = 1.0 / (model.control_hz or 15.0)
    return Record(
        label, p50_ms, spread, body, outcome, [b - a for a, b in clock.spans],
        float(counters["utilisation"]), start, arm.times, arm.rows, clock.spans, period,
        in_flight=in_flight, hold_steps=_hold_steps(arm.times, arm.rows, period),
    )


def _row(rec: Record) -> list[str]:
    out = rec.outcome
    per_chunk = out.underruns / out.chunks if out.chunks else float("nan")
    share = out.no_fresh_command_s / out.motion_s if out.motion_s else float("nan")
    applies = rec.target_applies
    met = "n/a"
    if applies:
        met = "met" if per_chunk <= TARGET_UNDERRUNS else "MISSED"
    if rec.label.endswith("auto") and rec.p50_ms >= 650:
        gap_ok = out.max_gap_s is not None and out.max_gap_s <= TARGET_GAP_PERIODS * rec.period
        met = "gap met" if gap_ok else "gap MISSED"
    speed = (
        f"{fmt(out.speed_min, 2)} / {fmt(out.speed_mean, 2)}" if out.speed_min is not None
        else "n/a"
    )
    return [
        f"{rec.p50_ms}", fmt(rec.spread, 1), rec.label, fmt(rec.body_bytes / 1000, 1),
        fmt(rec.measured_p50_s * 1000, 0), fmt(rec.p99_s * 1000, 0), str(out.chunks),
        fmt(per_chunk, 3), f"{share * 100:.1f}%",
        fmt(None if out.max_gap_s is None else out.max_gap_s / rec.period, 1),
        str(out.rows_beyond_horizon),
        f"{fmt(out.observation_age_s, 2)} / {fmt(out.observation_age_p95_s, 2)}",
        fmt(out.requests_per_s, 2), str(out.discarded), str(out.connections),
        f"{rec.utilisation * 100:.0f}%", speed,
        fmt(max(rec.hold_steps) if rec.hold_steps else None, 3), met,
    ]


def _plot(ctx: Context, records: list[Record], path: str) -> None:
    import matplotlib.pyplot as plt

    spreads = sorted({r.spread for r in records})
    fig, axes = plt.subplots(4, len(spreads), figsize=(11, 11), sharex=True, squeeze=False)
    metrics = (
        ("underruns per chunk", lambda r: r.outcome.underruns / max(1, r.outcome.chunks)),
        ("time without a fresh command", lambda r: r.outcome.no_fresh_command_s
         / max(r.outcome.motion_s, 1e-9)),
        ("observation age of the row\nplayed, median (s)",
         lambda r: r.outcome.observation_age_s or 0.0),
        ("requests per second of motion", lambda r: r.outcome.requests_per_s or 0.0),
    )
    for col, spread in enumerate(spreads):
        for row, (name, value) in enumerate(metrics):
            ax = axes[row][col]
            for label, *_ in CONFIGS:
                chosen = sorted((r for r in records if r.spread == spread and r.label == label),
                                key=lambda r: r.p50_ms)
                if chosen:
                    ax.plot([r.p50_ms for r in chosen], [value(r) for r in chosen], marker="o",
                            label=label)
            if row == 0:
                ax.axhline(TARGET_UNDERRUNS, color="grey", ls="--", lw=1)
                ax.set_title(f"network spread σ {spread:g}", fontsize=10, loc="left")
            if row == 1:
                ax.yaxis.set_major_formatter(plt.FuncFormatter(lambda v, _: f"{v * 100:.0f}%"))
            ax.set_ylabel(name, fontsize=8)
            ax.grid(alpha=0.3)
        axes[-1][col].set_xlabel("latency p50 (ms) set by the observation's size")
    axes[0][0].legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(ctx.out_dir / path, dpi=110)
    plt.close(fig)


def _plot_timeline(ctx: Context, records: list[Record], path: str) -> None:
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(len(records), 1, figsize=(11, 1.7 * len(records) + 0.8),
                             sharex=True)
    for ax, rec in zip(axes, records):
        t0 = rec.start
        lanes: list[float] = []
        for i, (a, b) in enumerate(rec.requests):
            lane = next((k for k, end in enumerate(lanes) if end <= a), len(lanes))
            if lane == len(lanes):
                lanes.append(b)
            lanes[lane] = b
            y = 1.0 + 0.25 * lane
            ax.plot([a - t0, b - t0], [y, y], color="tab:blue", lw=4, solid_capstyle="butt",
                    label="request in flight" if i == 0 else None)
            ax.plot([b - t0], [y], marker="v", color="tab:blue", ms=5)
        xs = [t - t0 for t in rec.acts]
        ax.vlines(xs, 0.1, 0.6, color="tab:green", lw=0.8, label="command")
        first_gap = True
        for a, b in zip(rec.acts, rec.acts[1:]):
            if b - a > TARGET_GAP_PERIODS * rec.period:
                ax.axvspan(a - t0 + rec.period, b - t0, color="tab:red", alpha=0.25,
                           label="no fresh command" if first_gap else None)
                first_gap = False
        out = rec.outcome
        ax.set_yticks([])
        ax.set_ylim(-0.1, 2.3)
        ax.set_title(
            f"{rec.label}, latency p50 {rec.p50_ms} ms, σ {rec.spread:g}: {out.underruns} "
            f"underruns in {out.chunks} chunks, {fmt(out.requests_per_s, 1)} requests/s, "
            f"speed {fmt(out.speed_mean, 2)}", fontsize=9, loc="left")
        ax.legend(loc="upper right", fontsize=7, ncol=3)
    axes[-1].set_xlabel("seconds since the run started")
    axes[-1].set_xlim(0, min(8.0, max(r.acts[-1] - r.start for r in records if r.acts)))
    fig.tight_layout()
    fig.savefig(ctx.out_dir / path, dpi=110)
    plt.close(fig)


def run(ctx: Context) -> Section:
    seconds = ctx.pick(12.0, 3.0)
    spreads = ctx.pick(SPREADS, (0.3,))
    latencies = ctx.pick(LATENCIES_MS, (650,))
    configs = ctx.pick(CONFIGS, CONFIGS[:2])
    section = Section(
        "continuity",
        "Continuity at the service's latency: requests in flight, playback speed",
        intro=(
            "`Policy.run()` of pi05-droid (15 rows at 15 Hz = 1.0 s per chunk, open-loop "
            "horizon 8) against the gateway's realistic latency model, one worker: network base "
            "lognormal (median 226 ms, spread σ as listed) + 16 ms per kB of request body + queue "
            "+ 115 ms inference. The observation (two views of the simulated scene with sensor "
            "noise, JPEG q95, width searched) is sized so the model's p50 is the listed latency; "
            f"each run is bounded by max_seconds = {seconds:g} s from a fresh Policy, with "
            "`controller='joint_position'` driving an arm that reaches each target at once. "
            "*N*: `max_in_flight`; *auto*: `playback_speed='auto'`. Measured latency is the "
            "client's round trip of every request. *Underruns*: the plan ran out and the arm "
            "held until a chunk arrived. *Without fresh command*: time in gaps between "
            "commands longer than 1.5 periods, over the time in motion; *max gap* in periods. "
            "*Beyond horizon*: commands of rows planned past the open-loop horizon from their "
            "due row. *Observation age*: from the capture of the observation behind each "
            "command to that command (median / p95). *Utilisation*: the worker's busy share "
            "(gateway counters). *Speed*: min / mean over commands (time-weighted). *Step "
            "into hold*: the largest joint step of a command followed by a hold (a gap or the "
            f"end), against DROID's step limit of {STEP_LIMIT_RAD} rad per period. *Target*: "
            f"where measured p99 + p50/N ≤ {TARGET_SUM_S} s, underruns ≤ {TARGET_UNDERRUNS} "
            "per chunk; speed auto at p50 ≥ 650 ms: no gap longer than 1.5 periods."
        ),
    )
    records: list[Record] = []
    rows = []
    for spread in spreads:
        for p50_ms in latencies + (() if ctx.quick else (AUTO_EXTRA_MS,)):
            for config in configs:
                if p50_ms == AUTO_EXTRA_MS and config[2] != "auto":
                    continue
                log(f"continuity p50 {p50_ms} ms σ {spread} {config[0]}")
                rec = _one_run(ctx, config, p50_ms, spread, seconds)
                records.append(rec)
                rows.append(_row(rec))
    ctx.gateway.reset()
    section.tables.append(Table(
        "Continuity, cost and speed under the realistic latency model",
        ["p50 set ms", "σ", "config", "body kB", "p50 ms", "p99 ms", "chunks",
         "underruns / chunk", "without fresh command", "max gap (periods)",
         "beyond horizon", "observation age s (median / p95)", "requests / s", "discarded",
         "new connections", "worker busy", "speed min / mean", "step into hold rad", "target"],
        rows,
        ctx.command("continuity"),
    ))
    applying = [r for r in records if r.target_applies]
    missed = [r for r in applying if r.outcome.underruns / max(1, r.outcome.chunks)
              > TARGET_UNDERRUNS]
    steps = [s for r in records for s in r.hold_steps]
    section.notes.append(
        f"Underrun target: applies to {len(applying)} of {len(records)} runs (measured p99 + "
        f"p50/N ≤ {TARGET_SUM_S} s), met in {len(applying) - len(missed)}"
        + (f"; missed: {', '.join(f'{r.label} at {r.p50_ms} ms σ {r.spread:g}' for r in missed)}"
           if missed else "") + "."
    )
    if steps:
        section.notes.append(
            f"Step into a hold: at most {max(steps):.3f} rad over {len(steps)} holds (runs' ends "
            f"included), against the step limit of {STEP_LIMIT_RAD} rad "
            f"({'met' if max(steps) <= STEP_LIMIT_RAD else 'MISSED'}); the regular step of this "
            f"policy is up to {Summary.of(_cruise_steps(records)).max:.3f} rad."
        )
    _plot(ctx, records, "bench_continuity.png")
    section.figures.append((
        "bench_continuity.png",
        "Underruns per chunk (dashed: the 0.02 target), time without a fresh command, age of "
        "the observation behind the row played and requests per second against the latency "
        "p50, per configuration and network spread.",
    ))
    chosen = [r for r in records if (r.p50_ms, r.spread) == TIMELINE]
    if chosen:
        _plot_timeline(ctx, chosen, "bench_continuity_timeline.png")
        section.figures.append((
            "bench_continuity_timeline.png",
            f"One run per configuration at latency p50 {TIMELINE[0]} ms, σ {TIMELINE[1]:g}: "
            "requests in flight (blue lanes, ▼ = answer), commands (green), time without a "
            "fresh command (red).",
        ))
    return section


def _cruise_steps(records: list[Record]) -> list[float]:
    return [
        max(abs(a - b) for a, b in zip(r1[:7], r0[:7]))
        for rec in records for r0, r1 in zip(rec.rows, rec.rows[1:])
    ]
