"""Injected faults: checked, queued, thread-safe, consumed one per matching ``POST /v1/act``."""

from __future__ import annotations

import copy
import json
import math
import threading
from dataclasses import dataclass, replace
from enum import Enum
from typing import Any, Collection, Dict, List, Mapping, Optional

from sequence_ai_gateway.models.catalogue import full_model_id


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
    # Raw socket faults (the server layer writes them): a status line and a header that never
    # ends, one byte every ``seconds``; ``102 Processing`` interim responses every ``seconds``.
    ENDLESS_HEADERS = "endless_headers"
    INTERIM = "interim"
    # A body of zeros under stacked gzip codings (``fields``: layers, decoded_bytes).
    STACKED_ENCODING = "stacked_encoding"
    # The answer names another model than the one asked.
    WRONG_MODEL = "wrong_model"
    # A step value of 10**400: valid JSON, beyond any float.
    HUGE_INT = "huge_int"
    # Valid JSON nested ``depth`` levels deep (default NESTED_DEPTH: past the recursion limit
    # of Python's parser).
    NESTED = "nested"
    # Faults of the other endpoints: catalogue rows' fields overwritten (``GET /v1/models``);
    # a readiness check that answers after ``seconds`` or, with None, never (``/v1/act/ready``).
    CATALOGUE_FIELDS = "catalogue_fields"
    READY_STALL = "ready_stall"
    # A catalogue listing that answers after ``seconds`` or, with None, only once cleared.
    CATALOGUE_STALL = "catalogue_stall"


FAULT_KINDS = tuple(k.value for k in FaultKind)
# The endpoint whose requests take each kind; every other kind is taken by ``POST /v1/act``.
ENDPOINT_OF_KIND = {
    FaultKind.CATALOGUE_FIELDS: "models",
    FaultKind.CATALOGUE_STALL: "models",
    FaultKind.READY_STALL: "ready",
}
# What ``catalogue_fields`` may overwrite: the served numbers a client plans with.
CATALOGUE_FIELDS = ("control_hz", "action_horizon", "action_dim")
# ``stacked_encoding`` defaults: the probe's three gzip layers over 1 GiB of zeros (about 300
# bytes on the wire); decoded_bytes is capped so a typo cannot take the gateway's memory.
STACKED_LAYERS = 3
STACKED_DECODED_BYTES = 1 << 30
MAX_STACKED_DECODED_BYTES = 4 << 30
MAX_STACKED_LAYERS = 8
# The ``nested`` fault's default and largest depth: a few thousand levels already stop Python's
# recursive parser.
NESTED_DEPTH = 100_000
# Pause between the raw faults' writes when ``seconds`` is not given.
DEFAULT_RAW_PAUSE_S = 0.05
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
    # chunk_fields, catalogue_fields and stacked_encoding only
    fields: Optional[Dict[str, Any]] = None
    rows: Optional[int] = None  # rows only

    @property
    def retry_after(self) -> str:
        """A 429's Retry-After: ``seconds`` rounded up to HTTP's whole delay-seconds."""
        seconds = DEFAULT_RETRY_AFTER_S if self.seconds is None else self.seconds
        return str(int(math.ceil(seconds)))

    @property
    def pause_s(self) -> float:
        """The raw faults' pause between writes."""
        return DEFAULT_RAW_PAUSE_S if self.seconds is None else self.seconds


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _check_fields(kind: FaultKind, fields: Any) -> Dict[str, Any]:
    allowed = CATALOGUE_FIELDS if kind is FaultKind.CATALOGUE_FIELDS else CHUNK_FIELDS
    what = "catalogue row" if kind is FaultKind.CATALOGUE_FIELDS else "action_chunk"
    if not isinstance(fields, Mapping) or not fields:
        raise ValueError(
            f"fault {kind.value}: fields={fields!r}, expected a non-empty mapping of "
            f"{what} fields ({', '.join(allowed)}) to values"
        )
    for name, value in fields.items():
        if name not in allowed:
            raise ValueError(
                f"fault {kind.value}: fields[{name!r}]: not an overwritable {what} field, "
                f"expected one of {allowed}"
            )
        try:
            json.dumps(value, allow_nan=False)
        except (TypeError, ValueError):
            raise ValueError(
                f"fault {kind.value}: fields[{name!r}]={value!r}, expected a JSON value "
                "(finite numbers, strings, null, lists, objects)"
            ) from None
    return copy.deepcopy(dict(fields))


def _bounded_int(kind: str, name: str, value: Any, low: int, high: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
        raise ValueError(
            f"fault {kind}: fields[{name!r}]={value!r}, expected an integer in {low}..{high}"
        )
    return value


def _check_stacked(fields: Any) -> Dict[str, Any]:
    """``stacked_encoding``'s fields: ``layers`` of gzip over ``decoded_bytes`` zeros."""
    given = {} if fields is None else fields
    if not isinstance(given, Mapping) or set(given) - {"layers", "decoded_bytes"}:
        raise ValueError(
            f"fault stacked_encoding: fields={fields!r}, expected None or a mapping with "
            "'layers' and/or 'decoded_bytes'"
        )
    return {
        "layers": _bounded_int("stacked_encoding", "layers",
                               given.get("layers", STACKED_LAYERS), 1, MAX_STACKED_LAYERS),
        "decoded_bytes": _bounded_int(
            "stacked_encoding", "decoded_bytes",
            given.get("decoded_bytes", STACKED_DECODED_BYTES), 1, MAX_STACKED_DECODED_BYTES),
    }


def _checked_fields(kind: FaultKind, fields: Any) -> Optional[Dict[str, Any]]:
    if kind in (FaultKind.CHUNK_FIELDS, FaultKind.CATALOGUE_FIELDS):
        return _check_fields(kind, fields)
    if kind is FaultKind.STACKED_ENCODING:
        return _check_stacked(fields)
    if kind is FaultKind.NESTED:
        given = {} if fields is None else fields
        if not isinstance(given, Mapping) or set(given) - {"depth"}:
            raise ValueError(
                f"fault nested: fields={fields!r}, expected None or a mapping with 'depth'"
            )
        return {"depth": _bounded_int("nested", "depth", given.get("depth", NESTED_DEPTH), 1,
                                      NESTED_DEPTH)}
    if fields is not None:
        raise ValueError(
            f"fault {kind.value}: fields={fields!r} applies only to the 'chunk_fields', "
            "'catalogue_fields', 'stacked_encoding' and 'nested' faults"
        )
    return None


def _check_kind_arguments(
    kind: FaultKind,
    seconds: Optional[float],
    status: Optional[int],
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
    if kind is FaultKind.ROWS:
        if isinstance(rows, bool) or not isinstance(rows, int) or not 1 <= rows <= MAX_FAULT_ROWS:
            raise ValueError(
                f"fault rows: rows={rows!r}, expected an integer in 1..{MAX_FAULT_ROWS}"
            )
    elif rows is not None:
        raise ValueError(f"fault {kind.value}: rows={rows!r} applies only to the 'rows' fault")
    if kind in (FaultKind.ENDLESS_HEADERS, FaultKind.INTERIM) and seconds == 0:
        raise ValueError(
            f"fault {kind.value}: seconds=0, expected a number > 0 (the pause between writes) "
            "or None"
        )
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
    _check_kind_arguments(checked, seconds, status, rows)
    if model is not None and (not isinstance(model, str) or not model):
        raise ValueError(f"fault {kind}: model={model!r}, expected a model id or None")
    return Fault(
        kind=checked,
        count=count,
        model=full_model_id(model) if model else None,
        seconds=None if seconds is None else float(seconds),
        status=status,
        fields=_checked_fields(checked, fields),
        rows=rows,
    )


class RawLinks:
    """The socket transport of each open connection, by peer address. The server's protocol
    adds and removes them on its event loop; routes read them there."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._links: Dict[Any, Any] = {}

    def opened(self, peer: Any, transport: Any) -> None:
        with self._lock:
            self._links[peer] = transport

    def closed(self, peer: Any) -> None:
        with self._lock:
            self._links.pop(peer, None)

    def find(self, peer: Any) -> Optional[Any]:
        with self._lock:
            return self._links.get(peer)


class FaultBook:
    """Pending faults in injection order, and the connections the raw faults write to.
    ``_pending`` is guarded by ``_lock``: routes take faults on the event loop, the control
    API adds and clears them from any thread."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._pending: List[Fault] = []
        self.links = RawLinks()

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
        endpoint: str = "act",
        named_only: bool = False,
    ) -> Optional[Fault]:
        """Consume one use of the first fault of ``endpoint`` that applies to ``model_id``.
        Chat takes only the act ``kinds`` it can apply, and only faults naming its model
        (``named_only``): a fault for every model stays a fault of act calls."""
        wanted = (model_id,) if named_only else (None, model_id)
        with self._lock:
            for i, fault in enumerate(self._pending):
                if (fault.model in wanted
                        and ENDPOINT_OF_KIND.get(fault.kind, "act") == endpoint
                        and (kinds is None or fault.kind in kinds)):
                    if fault.count <= 1:
                        del self._pending[i]
                    else:
                        self._pending[i] = replace(fault, count=fault.count - 1)
                    return replace(fault, count=1)
        return None
