"""An episode file as MCAP records, without rclpy: opening only regular files, finding where a
file cut short ends, reading its records with every chunk's CRC checked, the recorder's
identity record, and rosbag2's description of a bag."""

from __future__ import annotations

import io
import json
import os
import stat
import struct
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

from mcap.exceptions import EndOfFile, McapError
from mcap.opcode import Opcode
from mcap.records import Chunk, McapRecord, Metadata
from mcap.stream_reader import StreamReader, breakup_chunk

MAGIC = b"\x89MCAP0\r\n"
# An opcode (1 byte) and a length (8) precede every record.
RECORD_PREFIX = struct.Struct("<BQ")
# The first metadata record of every file the recorder writes: whose the file is.
RECORDER_RECORD = "sequence_ai.recorder"
RECORDER = "sequence_ai_ros episodes"
# The other metadata records of an episode file (besides rosbag2's own): the recorder writes
# them, the lab's episode tools read them.
EPISODE_RECORD = "sequence_ai.episode"
SUMMARY_RECORD = "sequence_ai.summary"
# Written by `episodes repair` into a file it gave a summary (repair.py).
REPAIRED_RECORD = "sequence_ai.repaired"
# An evaluation's verdict on the trial the episode recorded (sequence_ai_lab.evaluation.labels).
VERDICT_RECORD = "sequence_ai.verdict"
# The header and the recorder's record open the file and are small: this much tells whose it is.
IDENTITY_BYTES = 4096

# What parsing a damaged file raises (the mcap package's own errors, and what its struct and
# decompression calls raise on bytes that are not what a record says they are).
_DAMAGE: tuple[type[BaseException], ...] = (
    McapError,
    ValueError,
    struct.error,
    EOFError,
    IndexError,
    KeyError,
    OverflowError,
    MemoryError,
)
try:
    import zstandard

    _DAMAGE = (*_DAMAGE, zstandard.ZstdError)
except ImportError:  # mcap reads uncompressed files without it
    pass


class EpisodeError(Exception):
    """A file that cannot be read as an episode: the message names it and says what is wrong."""

    def __init__(self, path: Path, problem: str) -> None:
        # One line, whatever a library put in its message.
        self.problem = " ".join(problem.split())
        self.path = path
        super().__init__(f"{path}: {self.problem}")


class FileBusy(EpisodeError):
    """The file is locked: its recorder is writing it, or another process repairs it."""


def _kind(mode: int) -> str:
    for test, name in (
        (stat.S_ISDIR, "a directory"),
        (stat.S_ISFIFO, "a FIFO"),
        (stat.S_ISSOCK, "a socket"),
        (stat.S_ISCHR, "a character device"),
        (stat.S_ISBLK, "a block device"),
    ):
        if test(mode):
            return name
    return "not a regular file"


def open_regular(path: Path, *, follow: bool = True) -> BinaryIO:
    """`path` opened for reading if it is a regular file; never blocks on a FIFO and, with
    `follow` False, never follows a symbolic link."""
    flags = os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC | (0 if follow else os.O_NOFOLLOW)
    try:
        fd = os.open(path, flags)
    except FileNotFoundError:
        raise EpisodeError(path, "no such file") from None
    except OSError as exc:
        if not follow and os.path.islink(path):
            raise EpisodeError(path, "is a symbolic link, not an episode file") from None
        raise EpisodeError(path, f"cannot be opened: {exc.strerror}") from None
    mode = os.fstat(fd).st_mode
    if not stat.S_ISREG(mode):
        os.close(fd)
        raise EpisodeError(path, f"is {_kind(mode)}, not an episode file")
    os.set_blocking(fd, True)
    return os.fdopen(fd, "rb")


@dataclass(frozen=True)
class Layout:
    """Where a file's whole records end, and whether its writer finished it (a footer and the
    closing magic: its summary and indexes are there)."""

    size: int
    end: int
    finished: bool


def layout(path: Path, stream: BinaryIO) -> Layout:
    """Walk the record prefixes (no record is read): the end of the last whole record."""
    size = os.fstat(stream.fileno()).st_size
    if size == 0:
        raise EpisodeError(path, "is empty (0 bytes): not an MCAP file")
    stream.seek(0)
    head = stream.read(len(MAGIC))
    if head != MAGIC[: len(head)]:
        raise EpisodeError(path, f"is not an MCAP file (it starts with {head[:8]!r})")
    if size < len(MAGIC) + RECORD_PREFIX.size:
        raise EpisodeError(
            path, f"holds only the MCAP magic ({size} bytes): nothing was written after it"
        )
    offset = len(MAGIC)
    finished = False
    while offset + RECORD_PREFIX.size <= size:
        stream.seek(offset)
        opcode, length = RECORD_PREFIX.unpack(stream.read(RECORD_PREFIX.size))
        if offset == len(MAGIC) and opcode != Opcode.HEADER:
            raise EpisodeError(
                path, f"is damaged: its first record has opcode {opcode:#04x}, not an MCAP header"
            )
        end = offset + RECORD_PREFIX.size + length
        if end > size:
            break  # a record cut short: where a killed writer stopped
        offset = end
        if opcode == Opcode.FOOTER:
            stream.seek(offset)
            finished = stream.read(len(MAGIC)) == MAGIC
            break
    return Layout(size=size, end=offset, finished=finished)


class _Bounded:
    """The first `end` bytes of a stream: what the record reader may see (unbuffered, so that
    `position` is where the reader is)."""

    def __init__(self, stream: BinaryIO, end: int) -> None:
        self._stream = stream
        self._end = end
        self.position = 0

    def read(self, size: int = -1) -> bytes:
        left = self._end - self.position
        data = self._stream.read(left if size < 0 else min(size, left)) if left > 0 else b""
        self.position += len(data)
        return data


def records(
    path: Path, stream: BinaryIO, shape: Layout, *, chunks: bool = True
) -> Iterator[McapRecord]:
    """The file's records up to its last whole one, a chunk's records in its place (its CRC
    checked; chunks are skipped unread when `chunks` is False). Damage is an EpisodeError
    naming the byte where the record starts."""
    stream.seek(0)
    bounded = _Bounded(stream, shape.end)
    reader = StreamReader(bounded, emit_chunks=True, record_size_limit=shape.end)
    found = reader.records
    while True:
        start = bounded.position
        try:
            record = next(found)
        except StopIteration:
            return
        except EndOfFile:
            if bounded.position >= shape.end:
                return  # the end of what was written whole
            raise EpisodeError(
                path, f"is damaged: a record at byte {start} is cut short inside the file"
            ) from None
        except _DAMAGE as exc:
            raise EpisodeError(
                path,
                f"is damaged: the record at byte {start} does not "
                f"parse ({type(exc).__name__}: {exc})",
            ) from None
        if not isinstance(record, Chunk):
            yield record
        elif chunks:
            try:
                inner = breakup_chunk(record, validate_crc=True)
            except _DAMAGE as exc:
                raise EpisodeError(
                    path,
                    f"is damaged: the chunk at byte {start} does not "
                    f"read back ({type(exc).__name__}: {exc})",
                ) from None
            yield from inner


def recorder_id(stream: BinaryIO) -> str | None:
    """The recorder id a file names in its first records (the recorder's own record), or None
    for any file the recorder did not write."""
    stream.seek(0)
    prefix = io.BytesIO(stream.read(IDENTITY_BYTES))
    reader = StreamReader(prefix, emit_chunks=True, record_size_limit=IDENTITY_BYTES)
    try:
        for _, record in zip(range(2), reader.records):
            if isinstance(record, Metadata) and record.name == RECORDER_RECORD:
                values = record.metadata
                if values.get("recorder") == RECORDER and values.get("recorder_id"):
                    return values["recorder_id"]
    except _DAMAGE:
        return None
    return None


def bag_info(
    file_name: str, types: Mapping[str, str], counts: Mapping[str, int], first_ns: int, last_ns: int
) -> str:
    """rosbag2's `BagMetadata` (JSON is YAML): what `ros2 bag info` prints. `types`: each
    topic's message type; `counts`: each topic's messages."""
    topics = [
        {
            "topic_metadata": {
                "name": topic,
                "type": types.get(topic, ""),
                "serialization_format": "cdr",
                # No publisher QoS profiles were offered (`ros2 bag play` uses its defaults).
                "offered_qos_profiles": "[]",
            },
            "message_count": count,
        }
        for topic, count in counts.items()
    ]
    info = {
        "rosbag2_bagfile_information": {
            "version": 5,
            "storage_identifier": "mcap",
            "relative_file_paths": [file_name],
            "duration": {"nanoseconds": max(0, last_ns - first_ns)},
            "starting_time": {"nanoseconds_since_epoch": first_ns},
            "message_count": sum(counts.values()),
            "topics_with_message_count": topics,
            "compression_format": "",
            "compression_mode": "",
        }
    }
    return json.dumps(info)
