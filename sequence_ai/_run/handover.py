"""Hand-over: the running ``act()`` takes a new instruction and a new time bound without
stopping (``Policy.hand_over``). Its next request carries the instruction (the latch); its
first chunk replaces the old rows still queued (``InstructionHandedOver``, playhead.py)."""

from __future__ import annotations

import math
import time
from typing import TYPE_CHECKING, Optional

from .._requests.session import Session
from ..options import positive_seconds

if TYPE_CHECKING:
    from .control_loop import RunLoop

__all__ = ["actions_for", "check_instruction", "hand_over"]


def check_instruction(text: object) -> None:
    if not isinstance(text, str):
        raise TypeError(f"instruction is {type(text).__name__}; expected a str")


def actions_for(max_seconds: float) -> int:
    """The action cap of a run bounded by time: above any rate a chunk could declare."""
    return int(math.ceil(max_seconds * 1000)) + 1000


def hand_over(
    session: Session, loop: Optional[RunLoop], instruction: str, max_seconds: float
) -> bool:
    """Latch ``instruction`` and bound ``loop`` by ``max_seconds`` from now; False (nothing
    changed) without a loop."""
    check_instruction(instruction)
    positive_seconds("max_seconds", max_seconds, allow_none=False)
    if loop is None:
        return False
    session.set_instruction(instruction)
    # Plain attribute writes the driving thread reads at its next check (within a period).
    loop.deadline = time.monotonic() + max_seconds
    loop.max_actions = loop.actions + actions_for(max_seconds)
    # A run resting for its old deadline waits on the call: it must see the new one now.
    loop.call.notify()
    return True
