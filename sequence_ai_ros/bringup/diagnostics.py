"""Node health on /diagnostics: readiness, outcomes, underruns, latency, input ages, rates."""

from __future__ import annotations

import math

from diagnostic_msgs.msg import DiagnosticArray, DiagnosticStatus, KeyValue

from sequence_ai_ros.core.health import Health, HealthRecord, percentile
from sequence_ai_ros.inputs.image_conversion import CONVERTER


def _fmt(value: float | None, unit_scale: float = 1.0, digits: int = 3) -> str:
    if value is None or not math.isfinite(value):
        return "n/a"
    return f"{value * unit_scale:.{digits}f}"


def _continuity_values(health: Health) -> dict[str, str]:
    """Cost and continuity of the running (or last) goal, and the observation's bytes."""
    run = health.continuity
    values = {
        "requests": "n/a" if run is None else str(run.requests),
        "requests_in_flight": "n/a" if run is None else str(run.in_flight),
        "requests_per_s": _fmt(None if run is None else run.requests_per_s, digits=2),
        "playback_speed": _fmt(None if run is None else run.speed, digits=2),
        "rows_beyond_horizon": "n/a" if run is None else str(run.rows_beyond_horizon),
        "no_fresh_command_s": _fmt(None if run is None else run.no_fresh_command_s, digits=2),
        "request_bytes": "n/a" if health.request_bytes is None else str(health.request_bytes),
    }
    for view, size in (health.view_bytes or {}).items():
        values[f"view_{view}_bytes"] = str(size)
    return values


def build_array(
    record: HealthRecord,
    *,
    node_name: str,
    ages: dict[str, float | None],
    missing: list[str],
    stamp_skew_s: float | None,
    command_rate_hz: float,
    stamp: object,
) -> DiagnosticArray:
    """One DiagnosticStatus describing the node."""
    latencies = record.latencies()
    health = record.snapshot()
    values = {
        "lifecycle": health.lifecycle,
        "motion": health.motion,
        "model": health.model or "n/a",
        "ready": "n/a" if health.ready is None else str(health.ready).lower(),
        "warming_eta_s": _fmt(health.warming_eta_s, digits=1),
        "goal": health.goal,
        "dry_run": str(health.dry_run).lower(),
        "last_outcome": health.last_outcome,
        "goals_run": str(health.goals_run),
        "underruns": str(health.underruns),
        "request_latency_p50_ms": _fmt(percentile(latencies, 0.5), 1000.0, 1),
        "request_latency_p95_ms": _fmt(percentile(latencies, 0.95), 1000.0, 1),
        "command_rate_hz": f"{command_rate_hz:.1f}",
        **_continuity_values(health),
        "image_conversion": CONVERTER,
        "recording": health.recording,
        "recording_dropped": str(health.recording_dropped),
    }
    if health.pose_source:
        values["pose_source"] = health.pose_source
    if health.command_frame_source:
        values["command_frame_source"] = health.command_frame_source
    for source, age in ages.items():
        key = "joint_state_age_s" if source == "joint_states" else f"camera_{source}_age_s"
        key = "ee_pose_age_s" if source == "ee_pose" else key
        values[key] = _fmt(age) if age is not None else "never received"
    # How far apart the inputs of one observation were captured, by their header stamps.
    values["input_stamp_skew_s"] = _fmt(stamp_skew_s)
    # Inputs that have never delivered a message; a goal waits input_wait_s for them.
    values["inputs_not_arrived"] = ", ".join(missing) or "none"

    if health.problem:
        level, message = DiagnosticStatus.ERROR, health.problem
    elif health.lifecycle == "active" and health.motion != "enabled":
        level, message = DiagnosticStatus.WARN, f"goals are rejected: {health.motion}"
    elif health.recording.startswith("error:"):
        level, message = DiagnosticStatus.WARN, f"recording {health.recording}"
    elif health.lifecycle == "active" and health.readiness_error:
        level, message = DiagnosticStatus.WARN, f"readiness check failing: {health.readiness_error}"
    elif health.lifecycle == "active" and missing:
        level, message = DiagnosticStatus.WARN, f"no message yet from: {', '.join(missing)}"
    elif health.lifecycle == "active" and health.ready is False:
        level, message = DiagnosticStatus.WARN, "model warming up"
    elif health.lifecycle != "active":
        level, message = DiagnosticStatus.OK, f"{health.lifecycle}; goals are rejected"
    else:
        dry = " (dry run: nothing reaches the arm)" if health.dry_run else ""
        level, message = DiagnosticStatus.OK, f"active; goal {health.goal}{dry}"
    status = DiagnosticStatus(
        level=level,
        name=f"{node_name}: sequence_ai policy",
        message=message,
        hardware_id=health.model or node_name,
        values=[KeyValue(key=k, value=v) for k, v in values.items()],
    )
    array = DiagnosticArray(status=[status])
    array.header.stamp = stamp
    return array
