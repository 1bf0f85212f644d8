"""Node health on /diagnostics: readiness, outcomes, underruns, latency, input ages, rates."""

from __future__ import annotations

import math
import threading
from collections import deque
from dataclasses import dataclass, field

from diagnostic_msgs.msg import DiagnosticArray, DiagnosticStatus, KeyValue


def percentile(samples: list[float], fraction: float) -> float | None:
    """Nearest-rank percentile; None without samples."""
    if not samples:
        return None
    ordered = sorted(samples)
    rank = max(1, math.ceil(fraction * len(ordered)))
    return ordered[rank - 1]


@dataclass
class HealthRecord:
    """What the node reports; written by the goal and readiness threads, read at 1 Hz."""

    lifecycle: str = "unconfigured"
    model: str = ""
    problem: str = ""
    ready: bool | None = None
    readiness_error: str = ""
    warming_eta_s: float | None = None
    goal: str = "idle"
    last_outcome: str = "none"
    goals_run: int = 0
    underruns: int = 0
    _latencies_s: deque[float] = field(default_factory=lambda: deque(maxlen=200))
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def add_latency(self, seconds: float) -> None:
        with self._lock:
            self._latencies_s.append(seconds)

    def latencies(self) -> list[float]:
        with self._lock:
            return list(self._latencies_s)


def _fmt(value: float | None, unit_scale: float = 1.0, digits: int = 3) -> str:
    if value is None or not math.isfinite(value):
        return "n/a"
    return f"{value * unit_scale:.{digits}f}"


def build_array(
    record: HealthRecord,
    *,
    node_name: str,
    ages: dict[str, float | None],
    stamp_skew_s: float | None,
    command_rate_hz: float,
    stamp: object,
) -> DiagnosticArray:
    """One DiagnosticStatus describing the node."""
    latencies = record.latencies()
    values = {
        "lifecycle": record.lifecycle,
        "model": record.model or "n/a",
        "ready": "n/a" if record.ready is None else str(record.ready).lower(),
        "warming_eta_s": _fmt(record.warming_eta_s, digits=1),
        "goal": record.goal,
        "last_outcome": record.last_outcome,
        "goals_run": str(record.goals_run),
        "underruns": str(record.underruns),
        "request_latency_p50_ms": _fmt(percentile(latencies, 0.5), 1000.0, 1),
        "request_latency_p95_ms": _fmt(percentile(latencies, 0.95), 1000.0, 1),
        "command_rate_hz": f"{command_rate_hz:.1f}",
    }
    for source, age in ages.items():
        key = "joint_state_age_s" if source == "joint_states" else f"camera_{source}_age_s"
        values[key] = _fmt(age) if age is not None else "never received"
    # How far apart the inputs of one observation were captured, by their header stamps.
    values["input_stamp_skew_s"] = _fmt(stamp_skew_s)

    if record.problem:
        level, message = DiagnosticStatus.ERROR, record.problem
    elif record.lifecycle == "active" and record.readiness_error:
        level, message = DiagnosticStatus.WARN, f"readiness check failing: {record.readiness_error}"
    elif record.lifecycle == "active" and record.ready is False:
        level, message = DiagnosticStatus.WARN, "model warming up"
    elif record.lifecycle != "active":
        level, message = DiagnosticStatus.OK, f"{record.lifecycle}; goals are rejected"
    else:
        level, message = DiagnosticStatus.OK, f"active; goal {record.goal}"
    status = DiagnosticStatus(
        level=level,
        name=f"{node_name}: sequence_ai policy",
        message=message,
        hardware_id=record.model or node_name,
        values=[KeyValue(key=k, value=v) for k, v in values.items()],
    )
    array = DiagnosticArray(status=[status])
    array.header.stamp = stamp
    return array
