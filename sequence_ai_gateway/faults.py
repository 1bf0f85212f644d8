"""Injected faults: queued, thread-safe, consumed one per matching ``POST /v1/act`` call."""

from __future__ import annotations

import threading
from dataclasses import dataclass, replace
from enum import Enum
from typing import List, Optional

from sequence_ai_gateway.catalogue import full_model_id


class FaultKind(str, Enum):
    # Waits before its model's queue: only this request is delayed.
    STALL = "stall"
    # Waits inside its model's worker: later requests to that model queue behind it.
    HOLD = "hold"
    STATUS = "status"
    RESET = "reset"
    MALFORMED = "malformed"
    NAN = "nan"
    INF = "inf"
    WRONG_DIM = "wrong_dim"
    EMPTY = "empty"
    WARMING = "warming"


FAULT_KINDS = tuple(k.value for k in FaultKind)
INJECTABLE_STATUSES = (401, 402, 500, 503, 504)


@dataclass(frozen=True)
class Fault:
    kind: FaultKind
    count: int = 1
    model: Optional[str] = None  # full id, or None for every model
    seconds: Optional[float] = None
    status: Optional[int] = None


def make_fault(
    kind: str,
    *,
    count: int = 1,
    model: Optional[str] = None,
    seconds: Optional[float] = None,
    status: Optional[int] = None,
) -> Fault:
    """A checked fault; bad arguments raise ValueError naming the field and what was expected."""
    if kind not in FAULT_KINDS:
        raise ValueError(f"fault: {kind!r} is not a fault kind, expected one of {FAULT_KINDS}")
    if isinstance(count, bool) or not isinstance(count, int) or count < 1:
        raise ValueError(f"fault {kind}: count={count!r}, expected an integer >= 1")
    if seconds is not None and (
        isinstance(seconds, bool) or not isinstance(seconds, (int, float)) or not seconds >= 0
    ):
        raise ValueError(f"fault {kind}: seconds={seconds!r}, expected a number >= 0 or None")
    if kind == FaultKind.STATUS:
        if status not in INJECTABLE_STATUSES:
            raise ValueError(
                f"fault status: status={status!r}, expected one of {INJECTABLE_STATUSES}"
            )
    elif status is not None:
        raise ValueError(f"fault {kind}: status={status!r} applies only to the 'status' fault")
    if model is not None and (not isinstance(model, str) or not model):
        raise ValueError(f"fault {kind}: model={model!r}, expected a model id or None")
    return Fault(
        kind=FaultKind(kind),
        count=count,
        model=full_model_id(model) if model else None,
        seconds=None if seconds is None else float(seconds),
        status=status,
    )


class FaultBook:
    """Pending faults in injection order; ``generation`` changes whenever they are cleared.

    ``_pending`` and ``generation`` are written under ``_lock`` (routes on the event loop, the
    control API from any thread); ``generation`` is read without it, a single int.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._pending: List[Fault] = []
        self.generation = 0

    def add(self, fault: Fault) -> None:
        with self._lock:
            self._pending.append(fault)

    def clear(self) -> None:
        with self._lock:
            self._pending.clear()
            self.generation += 1

    def pending(self) -> List[Fault]:
        with self._lock:
            return list(self._pending)

    def take(self, model_id: str) -> Optional[Fault]:
        """Consume one use of the first fault that applies to ``model_id``."""
        with self._lock:
            for i, fault in enumerate(self._pending):
                if fault.model in (None, model_id):
                    if fault.count <= 1:
                        del self._pending[i]
                    else:
                        self._pending[i] = replace(fault, count=fault.count - 1)
                    return replace(fault, count=1)
        return None
