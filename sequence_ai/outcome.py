"""``RunOutcome``: what a ``run()``/``act()`` did, returned (or attached to the raised error)."""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum
from typing import Optional

__all__ = ["Ending", "RunOutcome", "RunProgress"]


class Ending(str, Enum):
    """Every way a run can end. String-valued: the values are what ``reason`` and the ROS
    action result carry."""

    COMPLETED = "completed"
    UNTIL = "until"
    TIMEOUT = "timeout"
    INTERRUPTED = "interrupted"
    VALIDATE = "validate"
    RAISED = "raised"

    def __str__(self) -> str:
        return self.value


@dataclass
class RunOutcome:
    """Counts and measurements of one run.

    ``ending`` says how it ended; ``error`` is the exception class name when it ``raised``.
    ``stopped_early`` is true for every ending but ``completed``, and exactly then ``hold``
    was called once. A run that raised attaches this object to the exception as ``outcome``.
    docs/control-loop.md ("RunOutcome") defines each measurement.
    """

    actions: int
    chunks: int
    elapsed_s: float
    underruns: int = 0
    underrun_s: float = 0.0
    ending: Ending = Ending.COMPLETED
    error: Optional[str] = None
    max_seam_jump: Optional[float] = None
    action_space: Optional[str] = None
    instruction_swaps: int = 0
    max_instruction_lag_s: Optional[float] = None
    observe_s: float = 0.0
    # Cost: requests sent, answers discarded (older than the chunk playing), connections
    # opened (handshakes), request body bytes sent, the in-flight limit the run used.
    requests: int = 0
    discarded: int = 0
    connections: int = 0
    request_bytes: int = 0
    max_in_flight: int = 1
    # Continuity: first action to last action plus one period; commands of a row planned past
    # the open-loop horizon from its due row; time without a fresh command (every gap between
    # commands longer than 1.5 periods, beyond its first period); the longest gap.
    motion_s: float = 0.0
    rows_beyond_horizon: int = 0
    no_fresh_command_s: float = 0.0
    max_gap_s: Optional[float] = None
    # Playback speed over the commands played: lowest, and mean (= time-weighted: one command
    # per period); None before the first action.
    speed_min: Optional[float] = None
    speed_mean: Optional[float] = None
    # Age of the observation behind each command when it was played: median and p95.
    observation_age_s: Optional[float] = None
    observation_age_p95_s: Optional[float] = None

    def __post_init__(self) -> None:
        self.ending = Ending(self.ending)
        if (self.ending is Ending.RAISED) != (self.error is not None):
            raise ValueError(
                f"RunOutcome ending is {self.ending.value!r} with error {self.error!r}; "
                "expected an exception class name exactly when the ending is 'raised'"
            )

    @property
    def reason(self) -> str:
        """The ending as one string: ``completed`` … ``interrupted``, or ``raised:<Class>``."""
        if self.ending is Ending.RAISED:
            return f"raised:{self.error}"
        return str(self.ending)

    @property
    def stopped_early(self) -> bool:
        return self.ending is not Ending.COMPLETED

    @property
    def requests_per_s(self) -> Optional[float]:
        """Requests per second of motion (None before the first action)."""
        return self.requests / self.motion_s if self.motion_s > 0 else None

    def __repr__(self) -> str:
        parts = [f"{self.actions} actions over {self.chunks} chunks in {self.elapsed_s:.1f}s"]
        if self.underruns:
            parts.append(f"{self.underruns} underruns ({self.underrun_s:.2f}s)")
        rate = self.requests_per_s
        if rate is not None and self.max_in_flight > 1:
            parts.append(f"{rate:.1f} requests/s with up to {self.max_in_flight} in flight")
        if self.speed_min is not None and self.speed_mean is not None and self.speed_min < 1.0:
            parts.append(f"speed min {self.speed_min:.2f} mean {self.speed_mean:.2f}")
        if self.instruction_swaps:
            lag = self.max_instruction_lag_s
            lag_text = "n/a" if lag is None else f"{lag:.2f}s"
            parts.append(f"{self.instruction_swaps} instruction swaps (max lag {lag_text})")
        parts.append(self.reason)
        return f"RunOutcome({', '.join(parts)})"


@dataclass(frozen=True)
class RunProgress:
    """A running run so far (``Policy.progress``): what ``RunOutcome`` will count, and the
    state of its playback now. Replaced, never changed, so any thread may read one."""

    actions: int = 0
    chunks: int = 0
    underruns: int = 0
    requests: int = 0
    # Requests sent and not yet answered (or abandoned) now.
    in_flight: int = 0
    discarded: int = 0
    motion_s: float = 0.0
    rows_beyond_horizon: int = 0
    no_fresh_command_s: float = 0.0
    # The playback speed of the chunk playing.
    speed: float = 1.0

    @property
    def requests_per_s(self) -> Optional[float]:
        """Requests per second of motion so far (None before the first action)."""
        return self.requests / self.motion_s if self.motion_s > 0 else None
