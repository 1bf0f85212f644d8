"""report.md and report.png from results.json: success per arm with its Wilson interval, each
pair's difference with its interval and exact test, the real-time metrics, the definitions, and
what produced them. Pure Python but for the picture (matplotlib, headless)."""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from sequence_ai_lab.evaluation.results import Results, TrialResult
from sequence_ai_lab.evaluation.statistics import (
    Comparison,
    Interval,
    compare_paired,
    compare_unpaired,
    percentile,
    wilson,
)

REPORT_FILE = "report.md"
PICTURE_FILE = "report.png"

DEFINITIONS = """\
- **Success**: the judge's verdict on the trial — the world's task predicate (`~/task_state`
  success, latched once it held for its required time), an operator's verdict (`~/verdict`), or
  a VLM judge. A trial that faulted (a service error, a refused reset, a goal ended by
  stale_input, validate or an exception) is a failure whose reason starts with `fault:`; it is
  never dropped.
- **k/N and interval**: successes of trials, with the Wilson score 95 % interval.
- **Difference A − B**: success rate of A minus that of B. Paired on the seeds both ran
  (Newcombe's score interval for paired proportions, exact McNemar test on the seeds where only
  one succeeded); beside it the unpaired view (Newcombe's hybrid score interval, Fisher's exact
  test) for trials that did not share seeds.
- **Time to success**: world seconds from the trial's start (its reset) to the first success;
  median over the successful trials. In frozen time the world advances one control period per
  command, so this counts the arm's motion, not the model's thinking.
- **Latency**: per installed chunk, from its observation's capture to the chunk's arrival at the
  control loop; p50/p95/p99 by nearest rank over every chunk of the arm's trials.
- **Stale-action ratio**: of the arm commands the node published, the share whose observation was
  older than one chunk's duration when the command went out (age = command time − capture of the
  latest chunk installed before it; duration = that chunk's rows × control period). Such a
  command comes from a world more than a whole chunk old: a moved cup is not in it.
- **Effective control rate**: (commands − 1) / (last command − first command) of each trial, in
  Hz, against the model's nominal rate; underruns and holds pull it below nominal.
- **Underruns**: times the next chunk was not ready when the one playing ran out (act result).
"""


@dataclass(frozen=True)
class ArmSummary:
    """What one arm's trials add up to."""

    arm: str
    trials: int
    successes: int
    faults: int
    rate: Interval
    time_to_success_s: float
    latency_p50_s: float
    latency_p95_s: float
    latency_p99_s: float
    stale_action_ratio: float
    effective_control_hz: float
    nominal_control_hz: float
    underruns: float  # mean per trial


def _mean(values: Sequence[float]) -> float:
    finite = [v for v in values if math.isfinite(v)]
    return sum(finite) / len(finite) if finite else math.nan


def summarise(arm: str, trials: Sequence[TrialResult]) -> ArmSummary:
    successes = sum(t.success for t in trials)
    # Per-trial percentiles are pooled by their median: each trial's own p95 counts once.
    return ArmSummary(
        arm, len(trials), successes, sum(t.faulted for t in trials),
        wilson(successes, len(trials)),
        percentile([t.time_to_success_s for t in trials if t.success], 0.5),
        percentile([t.latency_p50_s for t in trials], 0.5),
        percentile([t.latency_p95_s for t in trials], 0.5),
        percentile([t.latency_p99_s for t in trials], 0.5),
        _mean([t.stale_action_ratio for t in trials]),
        _mean([t.effective_control_hz for t in trials]),
        _mean([t.nominal_control_hz for t in trials]),
        _mean([float(t.underruns) for t in trials]),
    )


@dataclass(frozen=True)
class PairSummary:
    """Arm A against arm B: paired on their shared seeds, and unpaired."""

    a: str
    b: str
    paired: Comparison
    unpaired: Comparison


def compare(a: str, b: str, results: Results) -> PairSummary:
    by_seed_a = {t.seed: t.success for t in results.of_arm(a)}
    by_seed_b = {t.seed: t.success for t in results.of_arm(b)}
    shared = sorted(set(by_seed_a) & set(by_seed_b))
    paired = compare_paired([(by_seed_a[s], by_seed_b[s]) for s in shared])
    unpaired = compare_unpaired(sum(by_seed_a.values()), len(by_seed_a),
                                sum(by_seed_b.values()), len(by_seed_b))
    return PairSummary(a, b, paired, unpaired)


def arms_in_order(results: Results) -> list[str]:
    """The arms as the settings list them (those without trials yet included)."""
    listed = [str(a) for a in results.settings.get("arms", [])]  # type: ignore[union-attr]
    return listed + sorted({t.arm for t in results.trials} - set(listed))


def _pct(value: float) -> str:
    return "n/a" if not math.isfinite(value) else f"{100 * value:.0f} %"


def _num(value: float, unit: str = "", digits: int = 2) -> str:
    return "n/a" if not math.isfinite(value) else f"{value:.{digits}f}{unit}"


def _ms(value: float) -> str:
    return "n/a" if not math.isfinite(value) else f"{1000 * value:.0f}"


def _interval(i: Interval, signed: bool = False) -> str:
    if not math.isfinite(i.estimate):
        return "n/a"
    sign = "+" if signed else ""
    return (f"{100 * i.estimate:{sign}.0f} % [{100 * i.low:{sign}.0f}, "
            f"{100 * i.high:{sign}.0f}]")


def degradation_pairs(arms: Sequence[str]) -> list[tuple[str, str]]:
    """(NAME@realtime, NAME@frozen) for each condition run in both time modes."""
    return [(a, a.replace("@realtime", "@frozen")) for a in arms
            if a.endswith("@realtime") and a.replace("@realtime", "@frozen") in arms]


def render_markdown(results: Results, picture: str | None = PICTURE_FILE) -> str:
    arms = arms_in_order(results)
    summaries = [summarise(a, results.of_arm(a)) for a in arms]
    settings, provenance = results.settings, results.provenance
    lines = [
        f"# Evaluation: {settings.get('task', '')!r}",
        "",
        f"{len(results.trials)} trials; judge: {settings.get('judge', '')}; seeds "
        f"{_seed_text(settings.get('seeds'))}; trial order seeded with "
        f"{settings.get('order_seed')} (interleaved: each seed runs every arm in a shuffled "
        "order)" + (f"; perturbation {settings['perturb']}" if settings.get("perturb") else "")
        + ".",
        "",
        "## Success per arm",
        "",
        "| arm | success k/N | rate [95 % Wilson] | faults | time to success (median s) | "
        "underruns/trial | latency p50/p95/p99 (ms) | stale-action ratio | "
        "control rate (Hz, nominal) |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for s in summaries:
        lines.append(
            f"| {s.arm} | {s.successes}/{s.trials} | {_interval(s.rate)} | {s.faults} | "
            f"{_num(s.time_to_success_s, digits=1)} | {_num(s.underruns, digits=1)} | "
            f"{_ms(s.latency_p50_s)}/{_ms(s.latency_p95_s)}/{_ms(s.latency_p99_s)} | "
            f"{_pct(s.stale_action_ratio)} | {_num(s.effective_control_hz, digits=1)} "
            f"({_num(s.nominal_control_hz, digits=0)}) |"
        )
    pairs = [compare(a, b, results) for a, b in itertools.combinations(arms, 2)]
    if pairs:
        lines += [
            "",
            "## Differences (A − B)",
            "",
            "| A | B | paired on shared seeds [95 %] | exact McNemar p | unpaired [95 %] | "
            "Fisher exact p |",
            "|---|---|---|---|---|---|",
        ]
        for p in pairs:
            lines.append(
                f"| {p.a} | {p.b} | {_interval(p.paired.difference, True)} (n={p.paired.n_a}) | "
                f"{p.paired.p_value:.3g} | {_interval(p.unpaired.difference, True)} | "
                f"{p.unpaired.p_value:.3g} |"
            )
    degradations = degradation_pairs(arms)
    if degradations:
        lines += ["", "## Real time against frozen time", ""]
        for realtime, frozen in degradations:
            p = compare(realtime, frozen, results)
            lines.append(
                f"- {realtime.removesuffix('@realtime')}: success in real time minus frozen "
                f"time {_interval(p.paired.difference, True)} on {p.paired.n_a} shared seeds "
                f"(exact McNemar p = {p.paired.p_value:.3g}): what the network's latency costs "
                "this configuration."
            )
    if settings.get("vlm_judge"):
        lines += ["", f"## VLM judge ({settings['vlm_judge']}) beside the verdict", "",
                  "| arm | agrees with the verdict | disagrees | no VLM verdict |",
                  "|---|---|---|---|"]
        for arm in arms:
            judged = [t for t in results.of_arm(arm) if not t.faulted]
            opinions = [t for t in judged if t.vlm_success is not None]
            agree = sum(t.vlm_success == t.success for t in opinions)
            lines.append(f"| {arm} | {agree} | {len(opinions) - agree} | "
                         f"{len(judged) - len(opinions)} |")
    failures = [t for t in results.trials if not t.success]
    if failures:
        lines += ["", "## Failures", "", "| trial | arm | seed | reason | episode |",
                  "|---|---|---|---|---|"]
        lines += [f"| {t.index} | {t.arm} | {t.seed} | {t.reason} | {Path(t.episode).name} |"
                  for t in failures]
    if picture:
        lines += ["", f"![success per arm]({picture})"]
    lines += ["", "## Definitions", "", DEFINITIONS.rstrip(), "",
              "## What produced it", ""]
    # Every node parameter is in results.json; the report names the ones compared most.
    lines += [f"- {key}: {_text(value)}" for key, value in provenance.items()
              if key != "node_parameters"]
    lines += [f"- setting {key}: {_text(value)}" for key, value in settings.items()]
    return "\n".join(lines) + "\n"


def _seed_text(seeds: object) -> str:
    if isinstance(seeds, list) and seeds and seeds == list(range(seeds[0], seeds[0] + len(seeds))):
        return f"{seeds[0]}..{seeds[-1]} ({len(seeds)})"
    return str(seeds)


def _text(value: object) -> str:
    if isinstance(value, dict):
        return "; ".join(f"{k} = {_text(v)}" for k, v in value.items()) or "(none)"
    return f"`{value}`" if isinstance(value, str) and value else str(value)


def draw(results: Results, path: Path) -> Path:
    """Success per arm with its Wilson interval, and the stale-action ratio beside it."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    arms = arms_in_order(results)
    summaries = [summarise(a, results.of_arm(a)) for a in arms]
    figure, (left, right) = plt.subplots(1, 2, figsize=(4 + 1.4 * len(arms), 4.2))
    xs = list(range(len(arms)))
    rates = [s.rate.estimate if math.isfinite(s.rate.estimate) else 0.0 for s in summaries]
    below = [r - s.rate.low for r, s in zip(rates, summaries)]
    above = [s.rate.high - r for r, s in zip(rates, summaries)]
    left.bar(xs, rates, color="#4878a8")
    left.errorbar(xs, rates, yerr=[below, above], fmt="none", ecolor="black", capsize=4)
    for x, s in zip(xs, summaries):
        left.text(x, 0.02, f"{s.successes}/{s.trials}", ha="center", color="white")
    left.set_ylim(0, 1.05)
    left.set_ylabel("success rate (95 % Wilson interval)")
    left.set_title(str(results.settings.get("task", "")))
    stale = [s.stale_action_ratio if math.isfinite(s.stale_action_ratio) else 0.0
             for s in summaries]
    right.bar(xs, stale, color="#c07038")
    right.set_ylim(0, max([0.1, *stale]) * 1.15)
    right.set_ylabel("stale-action ratio (mean per trial)")
    right.set_title("commands older than one chunk")
    for axis in (left, right):
        axis.set_xticks(xs)
        axis.set_xticklabels(arms, rotation=20, ha="right")
    figure.tight_layout()
    figure.savefig(path, dpi=110)
    plt.close(figure)
    return path


def write(results: Results, directory: Path) -> list[Path]:
    """report.md and (where matplotlib is installed: the `episodes` extra) report.png."""
    directory.mkdir(parents=True, exist_ok=True)
    try:
        picture: Path | None = draw(results, directory / PICTURE_FILE)
    except ImportError:
        picture = None
    markdown = directory / REPORT_FILE
    markdown.write_text(render_markdown(results, picture.name if picture else None),
                        encoding="utf-8")
    return [markdown] + ([picture] if picture else [])
