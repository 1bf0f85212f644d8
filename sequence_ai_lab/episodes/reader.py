"""Reading an episode file back: its records, and every message as its ROS message class —
also a file cut short by a killed node (its messages up to the last flushed chunk). Where
rclpy or the workspace's interfaces are missing (the LeRobot export's environment, a shell
without `install/setup.bash`) `rosbags` decodes the messages instead, from the schemas in the
file."""

from __future__ import annotations

import importlib
import json
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from mcap.records import Channel, Metadata, Schema
from mcap.records import Message as McapMessage

from sequence_ai_ros.episodes.files import (
    EPISODE_RECORD,
    REPAIRED_RECORD,
    SUMMARY_RECORD,
    VERDICT_RECORD,
    EpisodeError,
    layout,
    open_regular,
    records,
)


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
    # No end recorded (the node was killed mid-goal).
    cut: bool = False
    # The MCAP writer finished the file (its summary section is there): false for a file cut
    # short until `episodes repair` gives it one.
    finished: bool = False
    repaired: dict[str, str] = field(default_factory=dict)

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
    """The records and (unless `messages` is False) the messages of one episode file; any file
    that is not a readable episode is an EpisodeError naming it and what is wrong."""
    episode = EpisodeFile(path=path)
    found: list[tuple[str, int, str, bytes]] = []
    with open_regular(path) as stream:
        shape = layout(path, stream)
        episode.finished = shape.finished
        schemas: dict[int, str] = {}
        channels: dict[int, tuple[str, str]] = {}
        # Every chunk is read (and its CRC checked) even for the records alone: damage shows.
        for record in records(path, stream, shape):
            if isinstance(record, Metadata):
                _take_metadata(episode, record.name, dict(record.metadata))
            elif isinstance(record, Schema):
                schemas[record.id] = record.name
            elif isinstance(record, Channel):
                channels[record.id] = (record.topic, schemas.get(record.schema_id, ""))
            elif isinstance(record, McapMessage) and messages:
                topic, type_name = channels.get(record.channel_id, ("", ""))
                if type_name:
                    found.append((topic, record.log_time, type_name, record.data))
    if not episode.episode:
        raise EpisodeError(path, f"is an MCAP file without a {EPISODE_RECORD} record: not an "
                                 "episode (or one cut short before its goal was written)")
    _check_fields(episode)
    # No end was recorded: the node was killed mid-goal (the file may have been repaired since).
    episode.cut = not episode.summary
    if messages:
        episode.messages = _messages(path, episode, found)
    return episode


# Past this a start is no date (year 9999): the tools could not print it.
LATEST_START_NS = 253_402_300_799 * 1_000_000_000


def _check_fields(episode: EpisodeFile) -> None:
    """The records' fields the tools compute with hold what the recorder writes: anything else
    is an EpisodeError naming the field, its value and what was expected."""
    def refuse(field_name: str, value: str, expected: str) -> EpisodeError:
        return EpisodeError(episode.path, f"its {field_name} is {value[:60]!r}, expected "
                                          f"{expected}: not an episode the recorder wrote")

    started = episode.episode.get("started_ns", "0")
    if not started.isdigit() or int(started) > LATEST_START_NS:
        raise refuse("started_ns", started, "nanoseconds since 1970 (digits)")
    elapsed = episode.summary.get("elapsed_s")
    if elapsed is not None:
        try:
            valid = math.isfinite(float(elapsed)) and float(elapsed) >= 0
        except ValueError:
            valid = False
        if not valid:
            raise refuse("elapsed_s", elapsed, "seconds (a finite number >= 0)")
    for name, kind, expected in (("state_names", list, "a JSON list"),
                                 ("parameters", dict, "a JSON object")):
        text = episode.episode.get(name)
        if text is None:
            continue
        try:
            valid = isinstance(json.loads(text), kind)
        except (ValueError, RecursionError):  # not JSON, or nested past the parser's depth
            valid = False
        if not valid:
            raise refuse(name, text, expected)


def _take_metadata(episode: EpisodeFile, name: str, values: dict[str, str]) -> None:
    if name == EPISODE_RECORD:
        episode.episode = values
    elif name == SUMMARY_RECORD:
        episode.summary = values
    elif name == REPAIRED_RECORD:
        episode.repaired = values
    elif name == VERDICT_RECORD:
        episode.verdict = values
    elif name == "rosbag2":
        try:
            episode.bag_info = json.loads(values.get("serialized_metadata", "{}"))
        except ValueError:
            episode.bag_info = {}  # rosbag2's description only: the episode reads without it


def _messages(path: Path, episode: EpisodeFile, found: list[tuple[str, int, str, bytes]]
              ) -> list[Message]:
    prefix = episode.episode.get("topics", "").rstrip("/") + "/"
    try:
        from rclpy.serialization import deserialize_message

        # The node's own messages come from the built workspace (install/setup.bash).
        importlib.import_module("sequence_ai_interfaces.action")
    except ImportError:
        return _rosbags_messages(path, episode, prefix)
    classes: dict[str, type] = {}
    decoded = []
    for topic, log_time, type_name, data in found:
        cls = classes.get(type_name)
        if cls is None:
            try:
                cls = classes[type_name] = message_class(type_name)
            except (ImportError, AttributeError, ValueError) as exc:
                raise EpisodeError(path, f"holds {type_name} messages and that type cannot be "
                                         f"imported ({exc}); source the workspace that "
                                         "defines it") from None
        try:
            message = deserialize_message(data, cls)
        except Exception as exc:  # rclpy's RMWError and its kin: the bytes are not a message
            raise EpisodeError(path, f"is damaged: a {type_name} message on {topic} at "
                                     f"{log_time} ns does not deserialise "
                                     f"({type(exc).__name__}: {exc})") from None
        decoded.append(Message(_relative(topic, prefix), log_time, type_name, message))
    return decoded


def _rosbags_messages(path: Path, episode: EpisodeFile, prefix: str) -> list[Message]:
    """Without rclpy, `rosbags` decodes; it reads only finished files (`episodes repair`)."""
    from rosbags.highlevel import AnyReader

    if not episode.finished:
        raise EpisodeError(path, "was cut short and has no MCAP summary, which rosbags needs: "
                                 "run python -m sequence_ai_lab.episodes repair on it")
    try:
        with AnyReader([path]) as bag:
            return [Message(_relative(connection.topic, prefix), log_time, connection.msgtype,
                            bag.deserialize(raw, connection.msgtype))
                    for connection, log_time, raw in bag.messages()]
    except Exception as exc:  # rosbags' own error classes, per storage and type system
        raise EpisodeError(path, f"rosbags cannot read it ({type(exc).__name__}: {exc})"
                           ) from None


def _relative(topic: str, prefix: str) -> str:
    return topic[len(prefix):] if topic.startswith(prefix) else topic


def episode_files(folder: Path) -> list[Path]:
    """The `*.mcap` entries of a folder, oldest first (an episode's name starts with its UTC
    start); `read` tells which are not readable episodes."""
    return sorted(folder.glob("*.mcap"))
