"""What a planner sees of the rows playing, from one goal's share of the run's events: the
instruction its rows were computed with, the rows of a previous instruction still to play, the
time since the last chunk, the age of the observation behind the last step, and the goal's
instruction lag (acceptance to the first step of its own instruction)."""

from __future__ import annotations

import math
import threading
from typing import TYPE_CHECKING

from sequence_ai.events import ChunkInstalled, RowPlayed, RunEvent

if TYPE_CHECKING:
    from sequence_ai_interfaces.action import Act

__all__ = ["InstructionProgress"]


class InstructionProgress:
    """One goal's progress through the rows playing; any thread. `_lock` is a leaf."""

    def __init__(self, instruction: str, accepted_s: float) -> None:
        self._instruction = instruction
        self._accepted_s = accepted_s
        # Lock order: a leaf (nothing is taken under it).
        self._lock = threading.Lock()
        # Under _lock: the chunk playing (its instruction, number, commands left, when it was
        # installed), the first chunk of this goal's instruction, the last step's observation
        # age, and the instruction lag once measured.
        self._playing: str | None = None
        self._chunk = 0
        self._left = 0
        self._installed_s = math.nan
        self._own_chunk: int | None = None
        self._age_s = math.nan
        self._lag_s = math.nan

    def on_event(self, event: RunEvent) -> None:
        with self._lock:
            if isinstance(event, ChunkInstalled):
                observation = event.prediction.observation
                self._playing = None if observation is None else observation.instruction
                self._chunk, self._left = event.number, event.commands
                self._installed_s = event.time
                if self._own_chunk is None and self._playing == self._instruction:
                    self._own_chunk = event.number
            elif isinstance(event, RowPlayed):
                if event.chunk == self._chunk:
                    self._left = max(0, self._left - 1)
                self._age_s = event.observation_age_s
                own = self._own_chunk
                if math.isnan(self._lag_s) and own is not None and event.chunk >= own:
                    self._lag_s = event.time - self._accepted_s

    def seed(self, chunk: ChunkInstalled, played: int) -> None:
        """Start from a chunk already playing (a hand-over), `played` of its rows played,
        without counting it as this goal's."""
        observation = chunk.prediction.observation
        with self._lock:
            self._playing = None if observation is None else observation.instruction
            self._chunk, self._left = chunk.number, max(0, chunk.commands - played)
            self._installed_s = chunk.time

    def fill(self, feedback: Act.Feedback, now: float) -> None:
        """Its fields of `feedback`."""
        with self._lock:
            feedback.instruction = self._playing or ""
            old = self._playing is not None and self._playing != self._instruction
            feedback.previous_rows = self._left if old else 0
            feedback.since_chunk_s = now - self._installed_s
            feedback.observation_age_s = self._age_s

    def instruction_lag_s(self) -> float:
        """Acceptance to the first step of this goal's own instruction (NaN: none played)."""
        with self._lock:
            return self._lag_s
