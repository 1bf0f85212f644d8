"""One MCAP file written on a thread of its own: rosbag2's layout (`ros2msg` schemas, CDR
messages, a `rosbag2` metadata record), a bounded queue that drops rather than waits, and
chunks flushed at least once a second so a killed process leaves a readable file."""

from __future__ import annotations

import fcntl
import queue
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path

from mcap.writer import CompressionType, Writer
from rclpy.serialization import serialize_message

from sequence_ai_ros.episodes.cdr import cdr_length
from sequence_ai_ros.episodes.files import RECORDER_RECORD, bag_info
from sequence_ai_ros.episodes.schemas import schema_text, type_name

WRITER_THREAD = "sequence_ai-episode"
# Messages waiting for the writer; past this a message is dropped and counted.
QUEUE_MESSAGES = 4096
# The longest a written message waits in an open chunk before it reaches the disk.
FLUSH_PERIOD_S = 0.5
# A chunk is also closed when it grows past this (compression works per chunk).
CHUNK_BYTES = 4 * 1024 * 1024
PROFILE = "ros2"
# rosbag2 reads each channel's publisher QoS profiles as a YAML list: none were offered here
# (`ros2 bag play` then uses its defaults).
NO_QOS_PROFILES = "[]"
LIBRARY = "sequence_ai_ros episodes"


@dataclass(frozen=True)
class _Entry:
    topic: str
    message: object
    log_time_ns: int


@dataclass(frozen=True)
class _Metadata:
    name: str
    values: dict[str, str]


@dataclass(frozen=True)
class WriterStats:
    """What reached the file and what did not."""

    written: int
    dropped: int
    error: str
    bytes: int


@dataclass(frozen=True)
class _Finish:
    """The last item of the queue: write the summary records and close the file."""

    summary: Callable[[WriterStats], Mapping[str, Mapping[str, str]]]
    # Told the final figures on the writer thread once the file is closed.
    on_closed: Callable[[WriterStats], None] | None


class EpisodeWriter:
    """Appends ROS messages to one MCAP file from any thread, never blocking the caller.

    `put`/`metadata` enqueue (a full queue drops, counts and tells `on_drop` the total); the
    writer thread serialises, writes and flushes. A write error stops the writing: `on_error`
    is called once with the reason and later messages are discarded. `_lock` guards
    `_dropped`, `_error`, `_counts` and the first and last log times; the `Writer`, the file,
    `_channels` and `_schemas` belong to the writer thread.
    """

    def __init__(
        self,
        path: Path,
        on_error: Callable[[str], None],
        *,
        on_drop: Callable[[int], None] | None = None,
        queue_messages: int = QUEUE_MESSAGES,
        identity: Mapping[str, str] | None = None,
    ) -> None:
        self.path = path
        self._on_error = on_error
        self._on_drop = on_drop
        # Opened here so that an unwritable folder is reported before the goal's first message;
        # never over an existing file (a user's, of the same name).
        self._file = open(path, "xb")  # noqa: SIM115 - closed by the writer thread
        try:
            # Held until the file is closed: pruning and repair leave a locked file alone.
            fcntl.flock(self._file.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
            self._mcap = Writer(self._file, chunk_size=CHUNK_BYTES,
                                compression=CompressionType.ZSTD)
            self._mcap.start(profile=PROFILE, library=LIBRARY)
            if identity is not None:
                # The first record after the header, on disk at once: whose file this is.
                self._mcap.add_metadata(RECORDER_RECORD, dict(identity))
                self._file.flush()
        except BaseException:
            self._file.close()
            raise
        # Unbounded, bounded by _enqueue: the close is never dropped, the messages may be.
        self._queue: queue.Queue[_Entry | _Metadata | _Finish] = queue.Queue()
        self._queue_messages = queue_messages
        # Writer thread only: channel id and message type of each topic, schema ids by type.
        self._channels: dict[str, tuple[int, str]] = {}
        self._schemas: dict[str, int] = {}
        # Lock order: a leaf (the queue, the file and the callbacks are used outside it).
        self._lock = threading.Lock()
        self._dropped = 0
        self._error = ""
        self._counts: dict[str, int] = {}
        self._first_ns = 0
        self._last_ns = 0
        self._thread = threading.Thread(target=self._write, name=WRITER_THREAD, daemon=True)
        self._thread.start()

    def put(self, topic: str, message: object, log_time_ns: int | None = None) -> None:
        """Queue one message for `topic` (a full queue drops it, and it is counted)."""
        entry = _Entry(topic, message, time.time_ns() if log_time_ns is None else log_time_ns)
        self._enqueue(entry)

    def metadata(self, name: str, values: Mapping[str, str]) -> None:
        """Queue one metadata record (string values)."""
        self._enqueue(_Metadata(name, dict(values)))

    def stats(self) -> WriterStats:
        with self._lock:
            written = sum(self._counts.values())
            dropped, error = self._dropped, self._error
        size = self.path.stat().st_size if self.path.exists() else 0
        return WriterStats(written=written, dropped=dropped, error=error, bytes=size)

    def finish(
        self,
        summary: Callable[[WriterStats], Mapping[str, Mapping[str, str]]],
        on_closed: Callable[[WriterStats], None] | None = None,
    ) -> None:
        """Close the file after what is queued, with `summary(stats)`'s metadata records and
        the rosbag2 record, then tell `on_closed`; never waits (`wait_closed` does)."""
        self._queue.put_nowait(_Finish(summary, on_closed))

    def wait_closed(self, timeout_s: float) -> bool:
        """Wait at most `timeout_s` for the file to be closed; whether it is."""
        self._thread.join(timeout_s)
        return self.closed

    @property
    def closed(self) -> bool:
        return not self._thread.is_alive()

    # ----- any thread -----

    def _enqueue(self, item: _Entry | _Metadata) -> None:
        with self._lock:
            if self._error:
                return
        if self._queue.qsize() < self._queue_messages:
            self._queue.put_nowait(item)
        else:
            with self._lock:
                self._dropped += 1
                dropped = self._dropped
            if self._on_drop is not None:
                self._on_drop(dropped)

    def _fail(self, reason: str) -> None:
        with self._lock:
            first = not self._error
            if first:
                self._error = reason
        if first:
            self._on_error(reason)

    # ----- the writer thread -----

    def _write(self) -> None:
        unflushed_since: float | None = None
        while True:
            timeout = None
            if unflushed_since is not None:
                timeout = max(0.0, unflushed_since + FLUSH_PERIOD_S - time.monotonic())
            try:
                item = self._queue.get(timeout=timeout)
            except queue.Empty:
                item = None
            if isinstance(item, _Finish):
                self._close(item)
                if item.on_closed is not None:
                    item.on_closed(self.stats())
                return
            with self._lock:
                failed = bool(self._error)
            if failed:
                continue  # drain: the file takes no more messages
            try:
                if item is not None:
                    self._record(item)
                    if unflushed_since is None:
                        unflushed_since = time.monotonic()
                if unflushed_since is not None and (
                    time.monotonic() - unflushed_since >= FLUSH_PERIOD_S
                ):
                    self._mcap.flush()
                    unflushed_since = None
            except (OSError, ValueError) as exc:
                self._fail(f"cannot write {self.path}: {exc}")

    def _close(self, finish: _Finish) -> None:
        with self._lock:
            failed = bool(self._error)
        try:
            if not failed:
                for name, values in finish.summary(self.stats()).items():
                    self._mcap.add_metadata(name, dict(values))
                self._mcap.add_metadata("rosbag2", {"serialized_metadata": self._bag_info()})
                self._mcap.finish()
        except (OSError, ValueError) as exc:
            self._fail(f"cannot finish {self.path}: {exc}")
        finally:
            try:
                self._file.close()
            except OSError as exc:
                self._fail(f"cannot close {self.path}: {exc}")

    def _record(self, item: _Entry | _Metadata) -> None:
        if isinstance(item, _Metadata):
            self._mcap.add_metadata(item.name, item.values)
            return
        channel = self._channel(item.topic, item.message)
        # Exactly the message: no trailing bytes of the serialiser's buffer (cdr.py).
        data = serialize_message(item.message)[: cdr_length(item.message)]
        self._mcap.add_message(
            channel, log_time=item.log_time_ns, publish_time=item.log_time_ns, data=data
        )
        with self._lock:
            self._counts[item.topic] = self._counts.get(item.topic, 0) + 1
            if not self._first_ns or item.log_time_ns < self._first_ns:
                self._first_ns = item.log_time_ns
            self._last_ns = max(self._last_ns, item.log_time_ns)

    def _channel(self, topic: str, message: object) -> int:
        known = self._channels.get(topic)
        if known is not None:
            return known[0]
        name = type_name(type(message))
        schema = self._schemas.get(name)
        if schema is None:
            schema = self._mcap.register_schema(
                name=name, encoding="ros2msg", data=schema_text(name).encode()
            )
            self._schemas[name] = schema
        channel = self._mcap.register_channel(
            topic=topic, message_encoding="cdr", schema_id=schema,
            metadata={"offered_qos_profiles": NO_QOS_PROFILES},
        )
        self._channels[topic] = (channel, name)
        return channel

    def _bag_info(self) -> str:
        with self._lock:
            counts = dict(self._counts)
            first, last = self._first_ns, self._last_ns
        types = {topic: name for topic, (_, name) in self._channels.items()}
        return bag_info(self.path.name, types, counts, first, last)
