"""`EpisodeRecorder`: one MCAP file per `act` goal when `record` is `goals` — an observer of the
run's event stream (chunks installed, discarded or refused, underruns, the hold, the ending),
told besides by the goal driver (start, observations as sent, refusals, the node's hold), the
goal results (end) and the gate's output stage (every command published)."""

from __future__ import annotations

import dataclasses
import json
import platform
import re
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from datetime import datetime, timezone
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from typing import TYPE_CHECKING
from urllib.parse import urlsplit, urlunsplit

import sequence_ai
from sequence_ai.events import (
    ChunkDiscarded,
    ChunkInstalled,
    ChunkRefused,
    HoldCommanded,
    RunEnded,
    RunEvent,
    UnderrunEnded,
)
from sequence_ai_interfaces.action import Act
from sequence_ai_ros.core.health import HealthRecord
from sequence_ai_ros.core.node_config import NodeConfig
from sequence_ai_ros.episodes.cameras import CameraSampler
from sequence_ai_ros.episodes.episode import Disposition, Episode
from sequence_ai_ros.episodes.files import EPISODE_RECORD, RECORDER
from sequence_ai_ros.episodes.folder import SUFFIX, folder_id, prune, repair_unfinished

if TYPE_CHECKING:
    from sequence_ai_ros.episodes.writer import WriterStats

RECORD_OFF = "off"
RECORD_GOALS = "goals"
RECORD_MODES = (RECORD_OFF, RECORD_GOALS)
REPAIR_THREAD = "sequence_ai-episode-repair"
_SLUG_CHARS = re.compile(r"[^a-z0-9]+")


def episode_name(started: datetime, model: str, instruction: str) -> str:
    """`<UTC start>_<model>_<instruction slug>.mcap`: sorts by start, reads at a glance."""
    slug = _SLUG_CHARS.sub("-", instruction.lower()).strip("-")[:48].rstrip("-") or "goal"
    model_part = _SLUG_CHARS.sub("-", model.lower()).strip("-") or "model"
    return f"{started:%Y%m%dT%H%M%S_%f}Z_{model_part}_{slug}{SUFFIX}"


def recorded_parameters(config: NodeConfig) -> dict[str, object]:
    """The parameters as recorded: everything, with any credentials in `base_url` removed
    (the API key itself is never a parameter)."""
    values = dataclasses.asdict(config)
    url = urlsplit(config.base_url)
    if url.username or url.password:
        values["base_url"] = urlunsplit(url._replace(netloc=url.hostname or ""))
    return values


def wall_ns(monotonic_s: float) -> int:
    """The wall-clock time of an event stamped with `time.monotonic()` (events reach the
    recorder later, on the events thread)."""
    return time.time_ns() - round((time.monotonic() - monotonic_s) * 1e9)


def versions() -> dict[str, str]:
    found = {"sequence_ai": sequence_ai.__version__, "python": platform.python_version()}
    for package in ("sequence_ai_ros", "mcap"):
        try:
            found[package] = version(package)
        except PackageNotFoundError:
            found[package] = "not installed"
    return found


class EpisodeRecorder:
    """Turns a goal's events into its episode file.

    Events come from the client's events thread, the driving thread, the request threads and
    the executor; none of them waits on the disk (the writer only queues). `_lock` guards
    `_episodes` (the open file of each goal, by goal id), `_running` (the episode of the goal
    whose run drives the arm: it gets the run's events) and `_cameras` (that goal's raw camera
    sampler, if any).
    """

    def __init__(
        self,
        *,
        node_name: str,
        model: sequence_ai.Model,
        state_names: Sequence[str],
        period_s: float,
        health: HealthRecord,
        live_config: Callable[[], NodeConfig],
        error: Callable[[str], object],
        frames: Callable[[], Mapping[str, object]],
        info: Callable[[str], object] | None = None,
    ) -> None:
        self._prefix = f"{node_name.rstrip('/')}/episode"
        self._model = model
        self._state_names = list(state_names)
        self._period_s = period_s  # the catalogue's control period
        self._health = health
        self._live_config = live_config
        self._error = error
        self._frames = frames
        # Lock order: a leaf (no episode, health or log call under it).
        self._lock = threading.Lock()
        self._episodes: dict[bytes, Episode | None] = {}
        self._running: Episode | None = None
        # Ended episodes whose writer has not closed the file yet.
        self._closing: set[Episode] = set()
        # The goal ended last: a crash while ending it tells its end again (one file each).
        self._ended: bytes | None = None
        # The running goal's raw camera sampler (record_cameras_hz > 0).
        self._cameras: CameraSampler | None = None
        # Each folder's recorder id, read once: the files that carry it are this recorder's.
        self._ids: dict[Path, str] = {}
        # The files a killed node left unfinished get their summary, off the caller's thread.
        self._info = info
        self._repair = threading.Thread(
            target=self._repair_unfinished,
            args=(Path(live_config().record_dir).expanduser(),),
            name=REPAIR_THREAD, daemon=True,
        )
        self._repair.start()

    # ----- a goal -----

    def goal_started(self, goal_id: bytes, goal: Act.Goal, config: NodeConfig) -> None:
        """The goal's run begins: its file opens (with `record: goals`) and takes its events."""
        episode = self._open(goal_id, goal, config)
        cameras = None
        if episode is not None and config.record_cameras_hz > 0:
            cameras = CameraSampler(episode, self._frames, config.record_cameras_hz)
        with self._lock:
            # None too: the goal's end then knows its recording was off or failed.
            self._episodes[goal_id] = episode
            self._running = episode
            self._cameras = cameras

    def goal_ended(
        self,
        goal_id: bytes,
        goal: Act.Goal,
        result: Act.Result,
        outcome: sequence_ai.RunOutcome | None,
        status: str,
    ) -> None:
        """The goal's result, its run's figures and the summary; the file is closed on its
        writer thread (nothing waits for it here). A goal that never ran gets a file too, with
        its goal and result."""
        with self._lock:
            if goal_id == self._ended:
                return
            self._ended = goal_id
            started = goal_id in self._episodes
            episode = self._episodes.pop(goal_id, None)
            cameras = None
            if episode is not None and episode is self._running:
                self._running = None
                cameras, self._cameras = self._cameras, None
        if cameras is not None:
            cameras.stop()
        if not started:
            episode = self._open(goal_id, goal, self._live_config(), started=False)
        if episode is None:
            return  # not recording, or its file could not be opened (reported then)
        with self._lock:
            self._closing.add(episode)
        episode.ended(result, outcome, status, lambda stats: self._closed(episode, stats))

    def close(self, timeout_s: float) -> None:
        """Wait at most `timeout_s` for the files still being closed (at cleanup and exit, so
        that none is cut short by the process ending)."""
        deadline = time.monotonic() + timeout_s
        self._repair.join(timeout_s)
        with self._lock:
            closing = list(self._closing)
        for episode in closing:
            episode.writer.wait_closed(max(0.0, deadline - time.monotonic()))

    # ----- the run's events (no-ops without a running episode) -----

    def on_event(self, event: RunEvent) -> None:
        """An observer of the run (`run(observers=[...])`), on the client's events thread."""
        episode = self._current()
        if episode is None:
            return
        ns = wall_ns(event.time)
        if isinstance(event, ChunkInstalled):
            episode.chunk(event.prediction, event.sequence, ns)
        elif isinstance(event, ChunkDiscarded):
            episode.unplayed(event.sequence, Disposition.DISCARDED, str(event.reason), ns)
        elif isinstance(event, ChunkRefused):
            episode.unplayed(event.sequence, Disposition.REFUSED,
                             "cannot be played and brought to rest by max_seconds", ns)
        elif isinstance(event, UnderrunEnded):
            episode.underrun(event.waited_s, ns)
        elif isinstance(event, HoldCommanded):
            episode.run_event("hold_called", "the run called hold()", {"error": event.error},
                              ns, warn=event.error is not None)
        elif isinstance(event, RunEnded):
            episode.run_event("run_ended", event.ending.value, {"error": event.error}, ns,
                              warn=event.error is not None)

    def observation_sent(self, observation: sequence_ai.Observation, captured_ns: int) -> None:
        episode = self._current()
        if episode is not None:
            episode.observation(observation, captured_ns)

    def refusal(self, reason: str, chunk: int | None = None) -> None:
        episode = self._current()
        if episode is not None:
            episode.refusal(reason, chunk)

    def command_published(self, group: str, message: object) -> None:
        episode = self._current()
        if episode is not None:
            episode.command(group, message)

    def hold(self) -> None:
        """The node commands the arm held at the goal's end (stop_policy decided it does)."""
        episode = self._current()
        if episode is not None:
            episode.hold()

    def feedback(self, feedback: Act.Feedback) -> None:
        episode = self._current()
        if episode is not None:
            episode.feedback(feedback)

    # ----- internals -----

    def _current(self) -> Episode | None:
        with self._lock:
            return self._running

    def _open(
        self, goal_id: bytes, goal: Act.Goal, config: NodeConfig, started: bool = True
    ) -> Episode | None:
        if config.record != RECORD_GOALS:
            self._health.update(recording=RECORD_OFF)
            return None
        now = datetime.now(timezone.utc)
        folder = Path(config.record_dir).expanduser()
        path = folder / episode_name(now, self._model.short_id, goal.instruction)
        try:
            # Imported here: a node that never records needs no mcap package.
            from sequence_ai_ros.episodes.writer import EpisodeWriter
        except ImportError as exc:
            self._failed(f"{exc}; install the episodes extra: pip install 'mcap>=1.6'")
            return None
        try:
            folder.mkdir(parents=True, exist_ok=True)
            recorder = self._folder_id(folder)
            with self._lock:
                closing = {e.writer.path for e in self._closing}
            prune(folder, config.record_max_mb, recorder, keep=closing)
            writer = EpisodeWriter(path, self._failed, on_drop=self._dropped,
                                   identity={"recorder": RECORDER, "recorder_id": recorder})
        except OSError as exc:
            self._failed(f"cannot record to {path}: {exc}")
            return None
        episode = Episode(writer, prefix=self._prefix, state_names=self._state_names,
                          period_s=self._period_s)
        writer.metadata(EPISODE_RECORD, {
            "goal_id": goal_id.hex(),
            "instruction": goal.instruction,
            "model": self._model.short_id,
            "started_ns": str(time.time_ns()),
            "ran": str(started).lower(),
            "topics": self._prefix,
            "state_names": json.dumps(self._state_names),
            "parameters": json.dumps(recorded_parameters(config)),
            "catalogue_row": json.dumps(self._model.raw),
            "versions": json.dumps(versions()),
        })
        episode.goal(goal)
        self._health.update(recording=f"recording {path}", recording_dropped=0)
        return episode

    def _closed(self, episode: Episode, stats: WriterStats) -> None:
        """On the episode's writer thread, its file closed: /diagnostics names it (unless the
        next goal already records), and the folder is pruned, keeping the files open."""
        with self._lock:
            self._closing.discard(episode)
            running = self._running
        if not stats.error and running is None:
            dropped = f", {stats.dropped} dropped" if stats.dropped else ""
            self._health.update(recording=f"last {episode.writer.path}{dropped}",
                                recording_dropped=stats.dropped)
        keep = {episode.writer.path, *(e.writer.path for e in (running,) if e is not None)}
        folder = episode.writer.path.parent
        try:
            prune(folder, self._live_config().record_max_mb, self._folder_id(folder), keep=keep)
        except OSError as exc:
            self._error(f"cannot prune {folder}: {exc}")

    def _folder_id(self, folder: Path) -> str:
        """The folder's recorder id (made on its first recording), read once."""
        with self._lock:
            known = self._ids.get(folder)
        if known is None:
            known = folder_id(folder)
            with self._lock:
                self._ids[folder] = known
        return known

    def _repair_unfinished(self, folder: Path) -> None:
        """On the repair thread: give the folder's unfinished own files their summary."""
        try:
            done = repair_unfinished(folder)
        except OSError as exc:
            self._error(f"cannot repair the unfinished episodes of {folder}: {exc}")
            return
        for failed in done.failed:
            self._error(f"cannot repair an unfinished episode: {failed}")
        if done.repaired and self._info is not None:
            names = ", ".join(r.path.name for r in done.repaired)
            self._info(f"repaired {len(done.repaired)} episode file(s) a killed node left "
                       f"unfinished in {folder}: {names}")

    def _dropped(self, total: int) -> None:
        """The running episode's writer fell behind: /diagnostics shows the count at once."""
        self._health.update(recording_dropped=total)

    def _failed(self, reason: str) -> None:
        """A write error: this episode records no more; one ERROR and the diagnostics flag."""
        self._error(f"recording stopped: {reason}; the goal goes on")
        self._health.update(recording=f"error: {reason}")
