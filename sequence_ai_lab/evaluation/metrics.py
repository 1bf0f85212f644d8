"""Real-time measurements of one trial, from the episode files the node recorded for its goals
(one, or one per step of a planned task: their chunks and commands pooled).

Definitions (written on every report as well):
- latency: per installed chunk, from its observation's capture to the chunk's arrival at the
  control loop (the episode's chunk/info latency_s); p50/p95/p99 by nearest rank.
- stale-action ratio: the share of the arm commands the node published whose observation was
  older than one chunk's duration when the command went out. A command is attributed to the
  latest chunk installed before it; its age is the command's time minus that chunk's
  observation capture; the chunk's duration is its rows times the control period. A stale
  command was planned from a world more than a whole chunk ago: a moved cup is not in it.
- effective control rate: (commands - 1) / (last command time - first command time), in Hz,
  against the model's nominal rate (the chunks' control_frequency_hz): holds and underruns
  while the arm waits for a chunk pull it below nominal.
"""

from __future__ import annotations

import bisect
import math
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from sequence_ai_lab.evaluation.statistics import percentile


@dataclass(frozen=True)
class InstalledChunk:
    """A chunk that was played from: when it arrived, when its observation was captured (both
    ns, the same clock), and how long its rows last (s)."""

    arrived_ns: int
    captured_ns: int
    duration_s: float


@dataclass(frozen=True)
class EpisodeMetrics:
    """The real-time measurements of one goal (NaN where the goal gave none)."""

    latency_p50_s: float = math.nan
    latency_p95_s: float = math.nan
    latency_p99_s: float = math.nan
    stale_action_ratio: float = math.nan
    effective_control_hz: float = math.nan
    nominal_control_hz: float = math.nan


def stale_action_ratio(chunks: Sequence[InstalledChunk], command_ns: Sequence[int]) -> float:
    """The share of commands whose chunk's observation was older than the chunk's duration;
    NaN without commands. A command before any chunk (none should be) counts as stale."""
    if not command_ns:
        return math.nan
    ordered = sorted(chunks, key=lambda c: c.arrived_ns)
    arrivals = [c.arrived_ns for c in ordered]
    stale = 0
    for t in command_ns:
        k = bisect.bisect_right(arrivals, t) - 1
        if k < 0:
            stale += 1
            continue
        chunk = ordered[k]
        stale += (t - chunk.captured_ns) / 1e9 > chunk.duration_s
    return stale / len(command_ns)


def effective_control_hz(command_ns: Sequence[int]) -> float:
    """Commands per second between the first and the last; NaN for fewer than two."""
    if len(command_ns) < 2:
        return math.nan
    span_s = (max(command_ns) - min(command_ns)) / 1e9
    return (len(command_ns) - 1) / span_s if span_s > 0 else math.nan


def _values(message: object) -> dict[str, str]:
    return {kv.key: kv.value for kv in getattr(message, "values", [])}


def _float(text: str | None) -> float:
    try:
        return float(text) if text is not None else math.nan
    except ValueError:
        return math.nan


def _duration_s(trajectory: object, rate_hz: float) -> float:
    points = list(getattr(trajectory, "points", []))
    if len(points) >= 2:
        step = points[1].time_from_start
        period_s = step.sec + step.nanosec / 1e9
    else:
        period_s = 1.0 / rate_hz if rate_hz > 0 else math.nan
    return len(points) * period_s


def episode_metrics(paths: Sequence[Path]) -> EpisodeMetrics:
    """The measurements of a trial's episode files (the node's `record: goals`), in order."""
    from sequence_ai_lab.episodes.reader import read

    latencies: list[float] = []
    rates: list[float] = []
    chunks: list[InstalledChunk] = []
    commands: list[int] = []
    for path in paths:
        episode = read(path)
        infos = [_values(m.message) for m in episode.on("chunk/info")
                 if getattr(m.message, "message", "") == "installed"]
        latencies += [_float(v.get("latency_s")) for v in infos]
        rates += [r for v in infos if math.isfinite(r := _float(v.get("control_frequency_hz")))]
        nominal = rates[-1] if rates else math.nan
        for m in episode.on("chunk"):
            stamp = m.message.header.stamp
            captured = stamp.sec * 1_000_000_000 + stamp.nanosec
            chunks.append(
                InstalledChunk(m.log_time_ns, captured, _duration_s(m.message, nominal)))
        commands += [m.log_time_ns for m in episode.on("command")]
    nominal = rates[-1] if rates else math.nan
    return EpisodeMetrics(
        percentile(latencies, 0.5), percentile(latencies, 0.95), percentile(latencies, 0.99),
        stale_action_ratio(chunks, commands), effective_control_hz(commands), nominal,
    )
