"""Injected faults: checked, queued, thread-safe, consumed one per matching ``POST /v1/act``."""

from __future__ import annotations

import copy
import json
import math
import threading
from dataclasses import dataclass, replace
from enum import Enum
from typing import Any, Collection, Dict, List, Mapping, Optional

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
    # A lying service: fields of the answer's action_chunk overwritten.
    CHUNK_FIELDS = "chunk_fields"
    # A chunk of ``rows`` rows (the model's rows, the last one repeated).
    ROWS = "rows"
    # A valid body sent one byte every ``seconds``.
    TRICKLE = "trickle"


FAULT_KINDS = tuple(k.value for k in FaultKind)
INJECTABLE_STATUSES = (401, 402, 429, 500, 503, 504)
# What ``chunk_fields`` may overwrite: every action_chunk field but the steps themselves (the
# rows, nan, inf, wrong_dim and empty faults alter those).
CHUNK_FIELDS = (
    "robot", "action_space", "action_dim", "control_frequency_hz", "covers_seconds",
    "open_loop_horizon", "sustains_seconds",
)
# A 200 000-row chunk is ~40 MB of JSON; the cap keeps a typo from exhausting memory.
MAX_FAULT_ROWS = 1_000_000
# Retry-After of a 429 fault injected without ``seconds``.
DEFAULT_RETRY_AFTER_S = 1.0


@dataclass(frozen=True)
class Fault:
    kind: FaultKind
    count: int = 1
    model: Optional[str] = None  # full id, or None for every model
    seconds: Optional[float] = None
    status: Optional[int] = None
    fields: Optional[Dict[str, Any]] = None  # chunk_fields only
    rows: Optional[int] = None  # rows only

    @property
    def retry_after(self) -> str:
        """A 429's Retry-After: ``seconds`` rounded up to HTTP's whole delay-seconds."""
        seconds = DEFAULT_RETRY_AFTER_S if self.seconds is None else self.seconds
        return str(int(math.ceil(seconds)))


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _check_fields(fields: Any) -> Dict[str, Any]:
    if not isinstance(fields, Mapping) or not fields:
        raise ValueError(
            f"fault chunk_fields: fields={fields!r}, expected a non-empty mapping of "
            f"action_chunk fields ({', '.join(CHUNK_FIELDS)}) to values"
        )
    for name, value in fields.items():
        if name not in CHUNK_FIELDS:
            raise ValueError(
                f"fault chunk_fields: fields[{name!r}]: not an overwritable action_chunk field, "
                f"expected one of {CHUNK_FIELDS}"
            )
        try:
            json.dumps(value, allow_nan=False)
        except (TypeError, ValueError):
            raise ValueError(
                f"fault chunk_fields: fields[{name!r}]={value!r}, expected a JSON value "
                "(finite numbers, strings, null, lists, objects)"
            ) from None
    return copy.deepcopy(dict(fields))


def _check_kind_arguments(
    kind: FaultKind,
    seconds: Optional[float],
    status: Optional[int],
    fields: Any,
    rows: Any,
) -> None:
    """Arguments that belong to one kind only, and what each kind requires."""
    if kind is FaultKind.STATUS:
        if status not in INJECTABLE_STATUSES:
            raise ValueError(
                f"fault status: status={status!r}, expected one of {INJECTABLE_STATUSES}"
            )
    elif status is not None:
        raise ValueError(
            f"fault {kind.value}: status={status!r} applies only to the 'status' fault"
        )
    if kind is not FaultKind.CHUNK_FIELDS and fields is not None:
        raise ValueError(
            f"fault {kind.value}: fields={fields!r} applies only to the 'chunk_fields' fault"
        )
    if kind is FaultKind.ROWS:
        if isinstance(rows, bool) or not isinstance(rows, int) or not 1 <= rows <= MAX_FAULT_ROWS:
            raise ValueError(
                f"fault rows: rows={rows!r}, expected an integer in 1..{MAX_FAULT_ROWS}"
            )
    elif rows is not None:
        raise ValueError(f"fault {kind.value}: rows={rows!r} applies only to the 'rows' fault")
    if kind is FaultKind.TRICKLE and not (seconds is not None and seconds > 0):
        raise ValueError(
            f"fault trickle: seconds={seconds!r}, expected a number > 0 (the pause between bytes)"
        )


def make_fault(
    kind: str,
    *,
    count: int = 1,
    model: Optional[str] = None,
    seconds: Optional[float] = None,
    status: Optional[int] = None,
    fields: Optional[Mapping[str, Any]] = None,
    rows: Optional[int] = None,
) -> Fault:
    """A checked fault; bad arguments raise ValueError naming the field, the value and what
    was expected."""
    if kind not in FAULT_KINDS:
        raise ValueError(f"fault: {kind!r} is not a fault kind, expected one of {FAULT_KINDS}")
    checked = FaultKind(kind)
    if isinstance(count, bool) or not isinstance(count, int) or count < 1:
        raise ValueError(f"fault {kind}: count={count!r}, expected an integer >= 1")
    if seconds is not None and (not _is_number(seconds) or not seconds >= 0):
        raise ValueError(f"fault {kind}: seconds={seconds!r}, expected a number >= 0 or None")
    _check_kind_arguments(checked, seconds, status, fields, rows)
    if model is not None and (not isinstance(model, str) or not model):
        raise ValueError(f"fault {kind}: model={model!r}, expected a model id or None")
    return Fault(
        kind=checked,
        count=count,
        model=full_model_id(model) if model else None,
        seconds=None if seconds is None else float(seconds),
        status=status,
        fields=_check_fields(fields) if checked is FaultKind.CHUNK_FIELDS else None,
        rows=rows,
    )


class FaultBook:
    """Pending faults in injection order. ``_pending`` is guarded by ``_lock``: routes take
    faults on the event loop, the control API adds and clears them from any thread."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._pending: List[Fault] = []

    def add(self, fault: Fault) -> None:
        with self._lock:
            self._pending.append(fault)

    def clear(self) -> None:
        with self._lock:
            self._pending.clear()

    def pending(self) -> List[Fault]:
        with self._lock:
            return list(self._pending)

    def take(
        self,
        model_id: str,
        kinds: Optional[Collection[FaultKind]] = None,
        *,
        named_only: bool = False,
    ) -> Optional[Fault]:
        """Consume one use of the first fault that applies to ``model_id``. Another endpoint
        than act takes only the ``kinds`` it can apply, and only faults naming its model
        (``named_only``): a fault for every model stays a fault of act calls."""
        wanted = (model_id,) if named_only else (None, model_id)
        with self._lock:
            for i, fault in enumerate(self._pending):
                if fault.model in wanted and (kinds is None or fault.kind in kinds):
                    if fault.count <= 1:
                        del self._pending[i]
                    else:
                        self._pending[i] = replace(fault, count=fault.count - 1)
                    return replace(fault, count=1)
        return None
