"""``RunOutcome``: what a ``run()``/``act()`` did, returned (or attached to the raised error)."""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum
from typing import Optional

__all__ = ["Ending", "RunOutcome"]


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
        return self.ending.value

    @property
    def stopped_early(self) -> bool:
        return self.ending is not Ending.COMPLETED

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
