"""The run as a stream of typed events, and the observers that read it.

A ``RunLoop`` publishes what happens — an observation taken and sent, a request started, an
answer arriving, a chunk installed, discarded or refused, a row played, an underrun, a speed
change, an instruction swap, the hold, the ending — as frozen events stamped with
``time.monotonic()``. The outcome, the ``on_status`` / progress line and ``Policy.progress`` are
observers of that stream; so are the node's feedback and ``/diagnostics``. docs/architecture.md
("event stream") has the picture.

An observer is a callable taking one event, or an object with an ``on_event(event)`` method.
Pass observers as ``run(..., observers=[...])`` (or ``act``): they are called on one thread of
their own (``sequence_ai-events``), in publication order, never on the driving thread, so a
slow observer delays no command. ``run()`` returns once every observer has seen ``RunEnded``.
An observer that raises is warned about once and receives nothing further; the run goes on.
"""

from __future__ import annotations

import queue
import threading
import warnings
from dataclasses import dataclass
from enum import Enum
from typing import Callable, Optional, Protocol, Sequence, Union

from .outcome import Ending
from .types import Prediction

__all__ = [
    "AnswerArrived",
    "ChunkDiscarded",
    "ChunkInstalled",
    "ChunkRefused",
    "DiscardReason",
    "EventStream",
    "HoldCommanded",
    "InstructionHandedOver",
    "InstructionSwapped",
    "ObservationSent",
    "ObservationTaken",
    "Observer",
    "RequestStarted",
    "RowPlayed",
    "RunEnded",
    "RunEvent",
    "RunStarted",
    "SpeedChanged",
    "UnderrunBegan",
    "UnderrunEnded",
    "as_sink",
]


@dataclass(frozen=True)
class RunEvent:
    """Base of every event: ``time`` is ``time.monotonic()`` when it happened."""

    time: float


@dataclass(frozen=True)
class RunStarted(RunEvent):
    """The run begins: its playback period and in-flight limit."""

    period_s: float
    max_in_flight: int


@dataclass(frozen=True)
class ObservationTaken(RunEvent):
    """``observe()`` returned (or raised) on a fetch thread; ``sequence`` orders observations."""

    sequence: int
    observe_s: float


@dataclass(frozen=True)
class InstructionSwapped(RunEvent):
    """A new instruction reached a request; ``lag_s`` since it was latched."""

    lag_s: float


@dataclass(frozen=True)
class ObservationSent(RunEvent):
    """An observation passed its checks and goes to the service as one request."""

    sequence: int


@dataclass(frozen=True)
class RequestStarted(RunEvent):
    """The driving thread started a request; ``in_flight`` counts it."""

    in_flight: int


@dataclass(frozen=True)
class AnswerArrived(RunEvent):
    """A request finished with a chunk; ``in_flight`` is what is still out."""

    sequence: int
    request_bytes: int
    in_flight: int


@dataclass(frozen=True)
class ChunkInstalled(RunEvent):
    """A chunk replaced what was playing, from its due row.

    ``seam_jump`` is the largest joint jump from the last command to its first (None for the
    first chunk or where it cannot be measured); ``commands`` is how many it will play;
    ``prediction`` is the answer itself (its chunk, its observation's byte counts, its perf).
    """

    prediction: Prediction
    number: int
    sequence: int
    speed: float
    action_space: Optional[str]
    seam_jump: Optional[float]
    commands: int


class DiscardReason(str, Enum):
    """Why an arrived answer is not played."""

    # Observed before the chunk playing, or a newer answer arrived with it.
    OVERTAKEN = "overtaken"

    def __str__(self) -> str:
        return self.value


@dataclass(frozen=True)
class ChunkDiscarded(RunEvent):
    """An answer older than what is (or will be) playing; never played."""

    sequence: int
    reason: DiscardReason = DiscardReason.OVERTAKEN


@dataclass(frozen=True)
class InstructionHandedOver(RunEvent):
    """The first chunk of a new instruction was installed: the ``dropped_rows`` commands of
    the previous instruction still queued were dropped (a hand-over: ``Policy.hand_over``)."""

    instruction: Optional[str]
    previous: Optional[str]
    dropped_rows: int


@dataclass(frozen=True)
class ChunkRefused(RunEvent):
    """A chunk that cannot be played and brought to rest by ``max_seconds``: not installed."""

    sequence: int


@dataclass(frozen=True)
class SpeedChanged(RunEvent):
    """The playback speed changed with an installed chunk."""

    speed: float
    previous: float


@dataclass(frozen=True)
class RowPlayed(RunEvent):
    """A command went to ``act``: the ``action``-th of the run (1-based)."""

    action: int
    row: tuple[float, ...]
    chunk: int
    speed: float
    beyond_horizon: bool
    observation_age_s: float


@dataclass(frozen=True)
class UnderrunBegan(RunEvent):
    """Nothing is left to play after the first action: the run waits for a newer chunk."""


@dataclass(frozen=True)
class UnderrunEnded(RunEvent):
    """The wait of an underrun is over (a chunk, an interrupt, a timeout or an error)."""

    waited_s: float


@dataclass(frozen=True)
class HoldCommanded(RunEvent):
    """``hold()`` was called on an early ending; ``error`` names what it raised, if anything."""

    error: Optional[str]


@dataclass(frozen=True)
class RunEnded(RunEvent):
    """The last event of a run; ``error`` is the exception class name when it raised."""

    ending: Ending
    error: Optional[str]


class _OnEvent(Protocol):
    def on_event(self, event: RunEvent) -> object: ...


Observer = Union[Callable[[RunEvent], object], _OnEvent]
Sink = Callable[[RunEvent], object]

_CLOSE = object()


def as_sink(observer: Observer) -> Sink:
    """The callable that delivers to ``observer`` (its ``on_event``, or itself)."""
    on_event: object = getattr(observer, "on_event", None)
    if callable(on_event):
        return on_event
    if callable(observer):
        return observer
    raise TypeError(
        f"observer is {observer!r}; expected a callable taking one event or an object with "
        "an on_event(event) method"
    )


class EventStream:
    """Publishes a run's events: to the run's own sinks at once, on the publishing thread (they
    are short and thread-safe), and to the caller's observers through a queue and a thread of
    their own. ``publish`` never blocks and may be called from any thread."""

    def __init__(self, sinks: Sequence[Sink], observers: Sequence[Observer] = ()) -> None:
        self._sinks = tuple(sinks)
        self._observers = [as_sink(observer) for observer in observers]
        # Unbounded and lock-free for the publisher: put never waits.
        self._queue: queue.SimpleQueue[object] = queue.SimpleQueue()
        self._thread: Optional[threading.Thread] = None

    def start(self) -> None:
        """Start delivering to the observers (events published before wait in the queue)."""
        if self._observers and self._thread is None:
            self._thread = threading.Thread(
                target=self._deliver, name="sequence_ai-events", daemon=True
            )
            self._thread.start()

    def publish(self, event: RunEvent) -> None:
        for sink in self._sinks:
            sink(event)
        if self._observers:
            self._queue.put(event)

    def close(self) -> None:
        """After the last event: wait until every observer has seen it."""
        if self._thread is not None:
            self._queue.put(_CLOSE)
            self._thread.join()
            self._thread = None

    def _deliver(self) -> None:
        live = list(self._observers)
        while True:
            event = self._queue.get()
            if event is _CLOSE:
                return
            assert isinstance(event, RunEvent)
            for sink in list(live):
                try:
                    sink(event)
                except Exception as exc:
                    live.remove(sink)
                    warnings.warn(
                        f"run observer {sink!r} raised {exc!r} on {type(event).__name__}; "
                        "it receives no further events",
                        RuntimeWarning,
                        stacklevel=1,
                    )
