"""What a worker keeps of each episode (the observations handed over, in order) and the labels
the control plane keeps per episode."""

from __future__ import annotations

import asyncio
import threading
from dataclasses import dataclass, field
from typing import Any, Dict, Optional, Set, Tuple

# Observations a worker keeps ahead of a gap before it refuses more of the episode.
MAX_AHEAD = 256


@dataclass
class Episode:
    through: int = -1  # every observation up to this number has arrived (or was skipped)
    latest: Any = None  # the newest observation's inputs, what the act function reads
    ahead: Dict[int, Any] = field(default_factory=dict)
    skipped: Set[int] = field(default_factory=set)
    arrived: asyncio.Event = field(default_factory=asyncio.Event)


class EpisodeBook:
    """A worker's episodes; used from its own event loop only."""

    def __init__(self) -> None:
        self._episodes: Dict[str, Episode] = {}

    def get(self, episode_id: str) -> Episode:
        return self._episodes.setdefault(episode_id, Episode())

    def observe(self, episode_id: str, frames: Dict[int, Any], skipped: Set[int]) -> int:
        """Take a post's frames; the number every one up to has arrived."""
        episode = self.get(episode_id)
        for seq, inputs in frames.items():
            if seq > episode.through:
                episode.ahead[seq] = inputs
        episode.skipped |= {s for s in skipped if s > episode.through}
        while True:
            following = episode.through + 1
            if following in episode.ahead:
                episode.latest = episode.ahead.pop(following)
            elif following in episode.skipped:
                episode.skipped.discard(following)
            else:
                break
            episode.through = following
        if len(episode.ahead) > MAX_AHEAD:
            episode.ahead.clear()
        episode.arrived.set()
        episode.arrived = asyncio.Event()
        return episode.through

    def end(self, episode_id: str) -> bool:
        return self._episodes.pop(episode_id, None) is not None


@dataclass(frozen=True)
class Label:
    success: bool
    notes: str


class Labels:
    """How each episode went, per deployment; safe from any thread."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._labels: Dict[Tuple[str, str], Label] = {}

    def put(self, deployment: str, episode_id: str, label: Label) -> None:
        with self._lock:
            self._labels[(deployment, episode_id)] = label

    def get(self, deployment: str, episode_id: str) -> Optional[Label]:
        with self._lock:
            return self._labels.get((deployment, episode_id))

    def all(self) -> Dict[str, Dict[str, Any]]:
        with self._lock:
            return {f"{d}/{e}": {"success": label.success, "notes": label.notes}
                    for (d, e), label in self._labels.items()}
