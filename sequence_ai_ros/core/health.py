"""What the node reports, as plain values: the health record its threads write and the
1 Hz /diagnostics timer reads (bringup/diagnostics.py turns it into messages)."""

from __future__ import annotations

import math
import threading
from collections import deque
from dataclasses import dataclass, replace
from typing import Any

from sequence_ai import RunProgress


def percentile(samples: list[float], fraction: float) -> float | None:
    """Nearest-rank percentile; None without samples."""
    if not samples:
        return None
    ordered = sorted(samples)
    rank = max(1, math.ceil(fraction * len(ordered)))
    return ordered[rank - 1]


@dataclass(frozen=True)
class Health:
    """One consistent view of what the node reports."""

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
    # The running (or last) goal's run so far: cost, speed, continuity.
    continuity: RunProgress | None = None
    # Body bytes of the last request that brought a chunk, and each view's share of them.
    request_bytes: int | None = None
    view_bytes: dict[str, int] | None = None
    # Episode recording (episodes/recorder.py): off, the file being written, or the error.
    recording: str = "off"
    recording_dropped: int = 0
    # "enabled", or why motion is blocked (motion_enable.py).
    motion: str = "enabled"
    # The running (or last) goal is a dry run: nothing reached the arm.
    dry_run: bool = False
    # An ee model's end-effector pose source: "tf2" or "topic" (pose_source.py); "" none.
    pose_source: str = ""
    # Where an ee model's commands get their frame (command_frame.py); "" none.
    command_frame_source: str = ""


class HealthRecord:
    """What the node reports, written by lifecycle callbacks, the goal thread and the readiness
    thread, read by the 1 Hz diagnostics timer. `_lock` guards `_health` and `_latencies_s`."""

    def __init__(self) -> None:
        # Lock order: a leaf (nothing is taken under it).
        self._lock = threading.Lock()
        self._health = Health()
        self._latencies_s: deque[float] = deque(maxlen=200)

    def snapshot(self) -> Health:
        with self._lock:
            return self._health

    def update(self, **changes: Any) -> None:
        """Replace the named fields of `Health` at once."""
        with self._lock:
            self._health = replace(self._health, **changes)

    def end_goal(self, outcome: str, *, ran: bool) -> None:
        """A goal ended; one that ran counts in goals_run (one update, so a reader never sees
        its outcome without its count)."""
        with self._lock:
            health = replace(self._health, last_outcome=outcome)
            if ran:
                health = replace(health, goal="idle", goals_run=health.goals_run + 1)
            self._health = health

    def add_underrun(self) -> None:
        with self._lock:
            self._health = replace(self._health, underruns=self._health.underruns + 1)

    def add_latency(self, seconds: float) -> None:
        with self._lock:
            self._latencies_s.append(seconds)

    def latencies(self) -> list[float]:
        with self._lock:
            return list(self._latencies_s)
