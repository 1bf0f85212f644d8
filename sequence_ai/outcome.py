"""``RunOutcome``: what a ``run()``/``act()`` did, returned (or attached to the raised error)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

__all__ = ["RunOutcome", "REASONS"]

# Every way a run can end; ``raised:<ExceptionClass>`` is the open-ended last form.
REASONS = ("completed", "until", "timeout", "interrupted", "validate", "raised:<ExceptionClass>")


@dataclass
class RunOutcome:
    """Counts and measurements of one run.

    ``stopped_early`` is true for every ending but ``completed``, and exactly then ``hold``
    was called once. A run that raised attaches this object to the exception as ``outcome``.
    """

    actions: int
    chunks: int
    elapsed_s: float
    underruns: int = 0
    underrun_s: float = 0.0
    stopped_early: bool = False
    reason: str = "completed"
    max_seam_jump: Optional[float] = None
    action_space: Optional[str] = None
    instruction_swaps: int = 0
    max_instruction_lag_s: Optional[float] = None
    observe_s: float = 0.0

    def __repr__(self) -> str:
        parts = [f"{self.actions} actions over {self.chunks} chunks in {self.elapsed_s:.1f}s"]
        if self.underruns:
            parts.append(f"{self.underruns} underruns ({self.underrun_s:.2f}s)")
        if self.instruction_swaps:
            lag = self.max_instruction_lag_s
            lag_text = "n/a" if lag is None else f"{lag:.2f}s"
            parts.append(f"{self.instruction_swaps} instruction swaps (max lag {lag_text})")
        parts.append(self.reason)
        return f"RunOutcome({', '.join(parts)})"
