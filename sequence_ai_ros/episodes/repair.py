"""`episodes repair`: a file cut short (its writer killed, no summary section) rewritten whole —
its records up to the last whole one, then the repair's record, rosbag2's description and the
MCAP summary — so that `mcap`'s reader and `rosbags` open it. The rewrite goes to a hidden file
beside it that replaces it at once; no rclpy is needed (the messages are copied as bytes)."""

from __future__ import annotations

import contextlib
import fcntl
import os
import stat
import time
from dataclasses import dataclass
from pathlib import Path

from mcap.records import Channel, Header, Metadata, Schema
from mcap.records import Message as McapMessage
from mcap.writer import CompressionType, Writer

from sequence_ai_ros.episodes.files import (
    REPAIRED_RECORD,
    EpisodeError,
    FileBusy,
    bag_info,
    layout,
    open_regular,
    records,
)

# As the recorder writes them (writer.py): compression works per chunk.
CHUNK_BYTES = 4 * 1024 * 1024


@dataclass(frozen=True)
class Repaired:
    """What a repair kept: the messages, and the bytes of the unfinished tail left out."""

    path: Path
    messages: int
    dropped_bytes: int


def repair(path: Path, *, follow: bool = True) -> Repaired | None:
    """Give an unfinished MCAP file its summary, in place and atomically; None when its writer
    had finished it. A file being written (locked by its recorder), damaged inside or not an
    MCAP file is an EpisodeError."""
    with open_regular(path, follow=follow) as stream:
        try:
            # The recorder holds this lock while it writes; two repairs never race either.
            fcntl.flock(stream.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise FileBusy(
                path, "is being written (its recorder holds it locked); not repaired"
            ) from None
        if not _same_file(path, stream.fileno()):
            return None  # replaced since it was opened (repaired by another process)
        shape = layout(path, stream)
        if shape.finished:
            return None
        header: Header | None = None
        kept: list[Metadata | Schema | Channel | McapMessage] = []
        for record in records(path, stream, shape):
            if isinstance(record, Header):
                header = header or record
            elif isinstance(record, (Metadata, Schema, Channel, McapMessage)):
                kept.append(record)
        mode = stat.S_IMODE(os.fstat(stream.fileno()).st_mode)
        messages = _rewrite(path, header or Header(profile="", library=""), kept, shape.size, mode)
        return Repaired(path=path, messages=messages, dropped_bytes=shape.size - shape.end)


def _same_file(path: Path, fd: int) -> bool:
    try:
        now = os.stat(path)
    except OSError:
        return False
    opened = os.fstat(fd)
    return (now.st_dev, now.st_ino) == (opened.st_dev, opened.st_ino)


def _rewrite(
    path: Path,
    header: Header,
    kept: list[Metadata | Schema | Channel | McapMessage],
    size: int,
    mode: int,
) -> int:
    """Write the records to a hidden file beside `path`, then put it in its place."""
    temporary = path.with_name(f".{path.name}.repair-{os.getpid()}")
    try:
        with open(temporary, "xb") as out:
            writer = Writer(out, chunk_size=CHUNK_BYTES, compression=CompressionType.ZSTD)
            writer.start(profile=header.profile, library=header.library)
            messages = _copy(writer, kept, path.name, size)
            writer.finish()
            out.flush()
            os.fsync(out.fileno())
        os.chmod(temporary, mode)
        os.replace(temporary, path)
    except OSError as exc:
        with contextlib.suppress(OSError):
            temporary.unlink()
        raise EpisodeError(path, f"cannot be repaired: {exc}") from None
    _sync_folder(path.parent)
    return messages


def _copy(
    writer: Writer, kept: list[Metadata | Schema | Channel | McapMessage], name: str, size: int
) -> int:
    """The records in their order (ids renumbered by the writer), the repair's record and
    rosbag2's description; the messages copied."""
    schemas: dict[int, int] = {0: 0}
    schema_names: dict[int, str] = {}
    channels: dict[int, int] = {}
    topics: dict[int, str] = {}
    types: dict[str, str] = {}
    counts: dict[str, int] = {}
    first = last = 0
    for record in kept:
        if isinstance(record, Metadata):
            writer.add_metadata(record.name, dict(record.metadata))
        elif isinstance(record, Schema) and record.id not in schemas:
            schemas[record.id] = writer.register_schema(record.name, record.encoding, record.data)
            schema_names[record.id] = record.name
        elif isinstance(record, Channel) and record.id not in channels:
            channels[record.id] = writer.register_channel(
                topic=record.topic,
                message_encoding=record.message_encoding,
                schema_id=schemas.get(record.schema_id, 0),
                metadata=dict(record.metadata),
            )
            topics[record.id] = record.topic
            types[record.topic] = schema_names.get(record.schema_id, "")
        elif isinstance(record, McapMessage) and record.channel_id in channels:
            writer.add_message(
                channels[record.channel_id],
                log_time=record.log_time,
                data=record.data,
                publish_time=record.publish_time,
                sequence=record.sequence,
            )
            topic = topics[record.channel_id]
            counts[topic] = counts.get(topic, 0) + 1
            first = min(first, record.log_time) if first else record.log_time
            last = max(last, record.log_time)
    total = sum(counts.values())
    writer.add_metadata(
        REPAIRED_RECORD,
        {
            "repaired_ns": str(time.time_ns()),
            "messages": str(total),
            "original_bytes": str(size),
            "note": "cut short (no end recorded); its unfinished tail was left out",
        },
    )
    writer.add_metadata(
        "rosbag2", {"serialized_metadata": bag_info(name, types, counts, first, last)}
    )
    return total


def _sync_folder(folder: Path) -> None:
    """The rename reaches the disk with the folder's entry."""
    try:
        fd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass  # some file systems do not sync folders; the rename itself is atomic
    finally:
        os.close(fd)
