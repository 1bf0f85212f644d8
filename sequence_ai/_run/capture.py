"""``Captures``: a run's observations as its fetch threads take them — where the playback was,
the caller's ``observe()``, the instruction latch, the checks before a request is sent."""

from __future__ import annotations

import threading
import time
from typing import Callable, Optional

from .._requests.session import Session
from ..events import InstructionSwapped, ObservationSent, ObservationTaken, RunEvent
from ..types import Observation
from .scheduling import Capture

__all__ = ["Captures"]


class Captures:
    """Where the playback is, as the fetch threads see it when they observe.

    Lock order: ``_lock`` is taken before the Session's lock (``_latch``) and never held while
    an event is published or a callback runs (docs/architecture.md, "lock order").
    """

    def __init__(
        self, session: Session, observe: Callable[[], Observation],
        publish: Callable[[RunEvent], None],
    ) -> None:
        self._session = session
        self._observe = observe
        self._publish = publish
        # Lock order 8: the Session's lock (9) is taken under it (the instruction latch).
        self._lock = threading.Lock()
        # Under _lock: the playback position of the next command, in rows since the run's
        # first observation; the next observation's number; observations taken.
        self._position = 0.0
        self._next_sequence = 0
        self._observations = 0

    @property
    def lock(self) -> threading.Lock:
        """Guards every ``Capture`` of the run while its request is in flight."""
        return self._lock

    def position(self) -> float:
        with self._lock:
            return self._position

    def advance(self, position: float) -> None:
        """The driving thread played a command: the position of the next one."""
        with self._lock:
            self._position = position

    def observe(self, capture: Capture) -> Observation:
        """Runs on the request's fetch thread: capture, the caller's observe, the latch."""
        with self._lock:
            capture.sequence = self._next_sequence
            self._next_sequence += 1
            capture.position = self._position
            capture.time = time.monotonic()
            # Taken with the sequence number: a later observation never carries an older
            # instruction, so an answer overtaken by a newer instruction's is discarded as
            # overtaken (a hand-over never brings the old plan back).
            text, lag = self._latch()
        try:
            observation = self._observe()
        finally:
            now = time.monotonic()
            self._publish(ObservationTaken(
                time=now, sequence=capture.sequence, observe_s=now - capture.time
            ))
        if not isinstance(observation, Observation):
            raise TypeError(
                f"observe() returned {type(observation).__name__}; expected a "
                "sequence_ai.Observation (build one with sequence_ai.observation(...))"
            )
        if lag is not None:
            self._publish(InstructionSwapped(time=time.monotonic(), lag_s=lag))
        if text is not None and observation.instruction != text:
            observation = observation.with_instruction(text)
        with self._lock:
            capture.instruction = observation.instruction
        # Checked where it was taken, so a strict failure names the observation that failed.
        self._session.check_observation(observation)
        self._publish(ObservationSent(time=time.monotonic(), sequence=capture.sequence))
        return observation

    def _latch(self) -> tuple[Optional[str], Optional[float]]:
        """Under ``_lock``: the instruction for this observation, and the lag of a swap (None:
        no swap)."""
        text, pending_since = self._session.take_instruction()
        # The instruction a run starts with (act()'s own, or one latched before) is not a
        # swap: only a change after the run's first request is.
        swapped = pending_since is not None and self._observations > 0
        self._observations += 1
        lag = time.monotonic() - pending_since if swapped and pending_since is not None else None
        return text, lag
