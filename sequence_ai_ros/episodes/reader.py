"""Reading an episode file back: its records, and every message as its ROS message class —
also a file cut short by a killed node (its messages up to the last flushed chunk). Where
rclpy is missing (the LeRobot export's environment) `rosbags` decodes the messages instead,
from the schemas in the file."""

from __future__ import annotations

import importlib
import json
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from mcap.exceptions import McapError
from mcap.reader import NonSeekingReader, make_reader

# Metadata records of an episode file (besides rosbag2's own).
EPISODE_RECORD = "sequence_ai.episode"
SUMMARY_RECORD = "sequence_ai.summary"
# An evaluation's verdict on the trial the episode recorded (sequence_ai_ros.evaluation.labels).
VERDICT_RECORD = "sequence_ai.verdict"


def message_class(name: str) -> type:
    """The generated class of `pkg/msg/Type` (or `pkg/action/Act_Feedback`)."""
    package, kind, leaf = name.split("/")
    module = importlib.import_module(f"{package}.{kind}")
    if kind == "action":
        action, part = leaf.rsplit("_", 1)
        return getattr(getattr(module, action), part)
    return getattr(module, leaf)


@dataclass(frozen=True)
class Message:
    """One recorded message: its topic relative to the episode's, its log time, its type
    (`pkg/msg/Type`) and the message."""

    topic: str
    log_time_ns: int
    type_name: str
    message: Any


@dataclass
class EpisodeFile:
    """What one file holds. `summary` is empty for a file cut short (no end was written)."""

    path: Path
    episode: dict[str, str] = field(default_factory=dict)
    summary: dict[str, str] = field(default_factory=dict)
    verdict: dict[str, str] = field(default_factory=dict)  # empty: not judged
    bag_info: dict[str, object] = field(default_factory=dict)
    messages: list[Message] = field(default_factory=list)
    cut: bool = False

    @property
    def instruction(self) -> str:
        return self.episode.get("instruction", "")

    @property
    def model(self) -> str:
        return self.episode.get("model", "")

    def parameters(self) -> dict[str, object]:
        return json.loads(self.episode.get("parameters", "{}"))

    def state_names(self) -> list[str]:
        return list(json.loads(self.episode.get("state_names", "[]")))

    def on(self, topic: str) -> list[Message]:
        """The messages of one topic (relative: "chunk", "observation/exterior_1", ...)."""
        return [m for m in self.messages if m.topic == topic]

    def topics(self) -> list[str]:
        return sorted({m.topic for m in self.messages})


def read(path: Path, *, messages: bool = True) -> EpisodeFile:
    """The records and (unless `messages` is False) the messages of one episode file."""
    episode = EpisodeFile(path=path)
    with open(path, "rb") as stream:
        try:
            records = list(make_reader(stream).iter_metadata())
        except (McapError, EOFError, ValueError):
            records = []
    if not records:
        # No summary section (a killed node): the records are read straight through.
        episode.cut = True
        with open(path, "rb") as stream:
            try:
                for record in NonSeekingReader(stream).iter_metadata():
                    records.append(record)
            except (McapError, EOFError, ValueError):
                pass
    for record in records:
        _take_metadata(episode, record.name, dict(record.metadata))
    if not episode.summary:
        episode.cut = True
    if messages:
        episode.messages = list(_messages(path, episode))
    return episode


def _take_metadata(episode: EpisodeFile, name: str, values: dict[str, str]) -> None:
    if name == EPISODE_RECORD:
        episode.episode = values
    elif name == SUMMARY_RECORD:
        episode.summary = values
    elif name == VERDICT_RECORD:
        episode.verdict = values
    elif name == "rosbag2":
        episode.bag_info = json.loads(values.get("serialized_metadata", "{}"))


def _messages(path: Path, episode: EpisodeFile) -> Iterator[Message]:
    try:
        from rclpy.serialization import deserialize_message
    except ImportError:
        yield from _rosbags_messages(path, episode)
        return
    prefix = episode.episode.get("topics", "").rstrip("/") + "/"
    classes: dict[str, type] = {}
    with open(path, "rb") as stream:
        # A file without its summary (killed mid-goal) is read straight through.
        reader = make_reader(stream) if not episode.cut else NonSeekingReader(stream)
        try:
            for schema, channel, message in reader.iter_messages(log_time_order=False):
                if schema is None:
                    continue
                cls = classes.get(schema.name)
                if cls is None:
                    cls = classes[schema.name] = message_class(schema.name)
                yield Message(_relative(channel.topic, prefix), message.log_time, schema.name,
                              deserialize_message(message.data, cls))
        except (McapError, EOFError, ValueError):
            # The end of what a killed node flushed.
            episode.cut = True


def _rosbags_messages(path: Path, episode: EpisodeFile) -> Iterator[Message]:
    from rosbags.highlevel import AnyReader

    prefix = episode.episode.get("topics", "").rstrip("/") + "/"
    with AnyReader([path]) as bag:
        for connection, log_time, raw in bag.messages():
            yield Message(_relative(connection.topic, prefix), log_time, connection.msgtype,
                          bag.deserialize(raw, connection.msgtype))


def _relative(topic: str, prefix: str) -> str:
    return topic[len(prefix):] if topic.startswith(prefix) else topic


def episode_files(folder: Path) -> list[Path]:
    """The episode files of a folder, oldest first (their names start with the UTC start)."""
    return sorted(folder.glob("*.mcap"))
