"""``RunStats``: the observer of a run's events that counts what ``RunOutcome`` and
``RunProgress`` report. Every measurement is derived here from the event stream, nowhere else.
"""

from __future__ import annotations

import math
import threading
import time
from dataclasses import dataclass, field
from typing import Callable, Optional

from ..events import (
    AnswerArrived,
    ChunkDiscarded,
    ChunkInstalled,
    ChunkRefused,
    InstructionSwapped,
    ObservationSent,
    ObservationTaken,
    RequestStarted,
    RowPlayed,
    RunEvent,
    RunStarted,
    UnderrunEnded,
)
from ..outcome import Ending, RunOutcome, RunProgress

__all__ = ["GAP_PERIODS", "RunStats"]

# A gap between two commands longer than this many periods is time without a fresh command;
# shorter ones are pacing jitter, caught up on the next step.
GAP_PERIODS = 1.5


def _quantile(values: list[float], q: float) -> Optional[float]:
    if not values:
        return None
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(math.ceil(q * len(ordered))) - 1)]


def _max(current: Optional[float], value: Optional[float]) -> Optional[float]:
    if value is None:
        return current
    return value if current is None or value > current else current


@dataclass
class _Motion:
    """The rows played: how many, when, how fast, how old their observations were."""

    period_s: float = 0.0
    actions: int = 0
    first: Optional[float] = None
    last: float = 0.0
    rows_beyond_horizon: int = 0
    no_fresh_command_s: float = 0.0
    max_gap_s: Optional[float] = None
    speeds: list[float] = field(default_factory=list)
    ages: list[float] = field(default_factory=list)

    def played(self, event: RowPlayed) -> None:
        if self.first is None:
            self.first = event.time
        else:
            gap = event.time - self.last
            if gap > GAP_PERIODS * self.period_s:
                self.no_fresh_command_s += gap - self.period_s
            self.max_gap_s = _max(self.max_gap_s, gap)
        self.last = event.time
        self.actions += 1
        self.rows_beyond_horizon += int(event.beyond_horizon)
        self.speeds.append(event.speed)
        self.ages.append(event.observation_age_s)

    @property
    def motion_s(self) -> float:
        return 0.0 if self.first is None else self.last - self.first + self.period_s


@dataclass
class _Traffic:
    """Requests and answers: observations, bytes, swaps, answers not played."""

    requests: int = 0
    in_flight: int = 0
    observe_s: float = 0.0
    request_bytes: int = 0
    discarded: int = 0
    instruction_swaps: int = 0
    max_instruction_lag_s: Optional[float] = None


@dataclass
class _Chunks:
    """Installed chunks, the seams between them, the underruns while waiting for one."""

    chunks: int = 0
    max_seam_jump: Optional[float] = None
    action_space: Optional[str] = None
    speed: float = 1.0
    underruns: int = 0
    underrun_s: float = 0.0


class RunStats:
    """Counts one run from its events; any thread may publish to it or read it."""

    def __init__(self, connections: Callable[[], int]) -> None:
        # Connections are the transport's, counted from the run's start.
        self._connections = connections
        self._connections_at_start = connections()
        # Lock order: a leaf (nothing is taken under it).
        self._lock = threading.Lock()
        # Under _lock: everything below.
        self._started = time.monotonic()
        self._max_in_flight = 1
        self._motion = _Motion()
        self._traffic = _Traffic()
        self._chunks = _Chunks()

    def on_event(self, event: RunEvent) -> None:
        with self._lock:
            self._count(event)

    def _count(self, event: RunEvent) -> None:
        traffic, chunks = self._traffic, self._chunks
        if isinstance(event, RowPlayed):
            self._motion.played(event)
        elif isinstance(event, RunStarted):
            self._started = event.time
            self._max_in_flight = event.max_in_flight
            self._motion.period_s = event.period_s
        elif isinstance(event, ObservationTaken):
            traffic.observe_s += event.observe_s
        elif isinstance(event, ObservationSent):
            traffic.requests += 1
        elif isinstance(event, InstructionSwapped):
            traffic.instruction_swaps += 1
            traffic.max_instruction_lag_s = _max(traffic.max_instruction_lag_s, event.lag_s)
        elif isinstance(event, RequestStarted):
            traffic.in_flight = event.in_flight
        elif isinstance(event, AnswerArrived):
            traffic.in_flight = event.in_flight
            traffic.request_bytes += event.request_bytes
        elif isinstance(event, (ChunkDiscarded, ChunkRefused)):
            traffic.discarded += 1
        elif isinstance(event, ChunkInstalled):
            chunks.chunks += 1
            chunks.speed = event.speed
            chunks.action_space = event.action_space
            chunks.max_seam_jump = _max(chunks.max_seam_jump, event.seam_jump)
        elif isinstance(event, UnderrunEnded):
            chunks.underruns += 1
            chunks.underrun_s += event.waited_s

    def progress(self) -> RunProgress:
        """The run so far."""
        with self._lock:
            motion, traffic, chunks = self._motion, self._traffic, self._chunks
            return RunProgress(
                actions=motion.actions, chunks=chunks.chunks, underruns=chunks.underruns,
                requests=traffic.requests, in_flight=traffic.in_flight,
                discarded=traffic.discarded, motion_s=motion.motion_s,
                rows_beyond_horizon=motion.rows_beyond_horizon,
                no_fresh_command_s=motion.no_fresh_command_s, speed=chunks.speed,
            )

    def outcome(self, ending: Ending, error: Optional[BaseException]) -> RunOutcome:
        """The run's ``RunOutcome`` once it ended."""
        connections = self._connections() - self._connections_at_start
        with self._lock:
            motion, traffic, chunks = self._motion, self._traffic, self._chunks
            speeds = motion.speeds
            return RunOutcome(
                actions=motion.actions,
                chunks=chunks.chunks,
                elapsed_s=time.monotonic() - self._started,
                underruns=chunks.underruns,
                underrun_s=chunks.underrun_s,
                ending=ending,
                error=None if error is None else type(error).__name__,
                max_seam_jump=chunks.max_seam_jump,
                action_space=chunks.action_space,
                instruction_swaps=traffic.instruction_swaps,
                max_instruction_lag_s=traffic.max_instruction_lag_s,
                observe_s=traffic.observe_s,
                requests=traffic.requests,
                discarded=traffic.discarded,
                connections=connections,
                request_bytes=traffic.request_bytes,
                max_in_flight=self._max_in_flight,
                motion_s=motion.motion_s,
                rows_beyond_horizon=motion.rows_beyond_horizon,
                no_fresh_command_s=motion.no_fresh_command_s,
                max_gap_s=motion.max_gap_s,
                speed_min=min(speeds) if speeds else None,
                speed_mean=sum(speeds) / len(speeds) if speeds else None,
                observation_age_s=_quantile(motion.ages, 0.5),
                observation_age_p95_s=_quantile(motion.ages, 0.95),
            )
