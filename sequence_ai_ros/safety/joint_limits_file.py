"""`joint_limits_file` kept off the executor: every read runs on a reader thread of its own and
is waited for with a timeout (joint_limits.read_file bounds the read itself: a regular file, a
size cap, no anchors or aliases, a depth cap); a watch thread looks at the file's identity
(a stat) once a second and reads it again only when it changed.

The limits in force change only to a file that was read whole and checked: configure refuses a
bad file (within configure_timeout_s); on a configured node a bad edit, or a new path whose
read fails after it was accepted, keeps the limits in force and is logged as a warning.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from sequence_ai_ros.core.joint_limits import (
    FileIdentity,
    JointLimitsError,
    file_identity,
    read_file,
)

__all__ = ["LimitsFile", "read_bounded"]

Table = Mapping[str, Mapping[str, object]]

# The watch looks at the file's identity this often (one stat, nothing read unless changed).
POLL_S = 1.0
# A re-read by the watch: far more than a few kB take, far less than a goal notices.
READ_TIMEOUT_S = 1.0
# Setting the parameter waits this long for its read on the executor's thread (a few kB take a
# millisecond); a read still running then is accepted and checked on its own thread.
SET_WAIT_S = 0.05
WATCH_THREAD = "sequence_ai-limits-file"
READER_THREAD = "sequence_ai-limits-read"


@dataclass(frozen=True)
class _Read:
    """One finished read of a path: its table and identity, or why it failed."""

    path: str
    table: Table | None = None
    identity: FileIdentity | None = None
    problem: str = ""


class _Reader:
    """One read of `path` on a daemon thread; `wait(timeout_s)` gives its `_Read` or None."""

    def __init__(self, path: str, done: Callable[[_Read], None] | None = None) -> None:
        self.path = path
        self._done = done
        self._finished = threading.Event()
        self._read: _Read | None = None
        # Daemon: a read that never returns (a hung network mount) cannot hold the exit.
        threading.Thread(target=self._run, name=READER_THREAD, daemon=True).start()

    def _run(self) -> None:
        try:
            table, identity = read_file(self.path)
            read = _Read(self.path, table, identity)
        except JointLimitsError as exc:
            read = _Read(self.path, problem=str(exc))
        except Exception as exc:  # noqa: BLE001 - a read must end in a reason, never a raise
            read = _Read(self.path, problem=f"joint_limits_file {self.path!r}: {exc!r}")
        self._read = read
        self._finished.set()
        if self._done is not None:
            self._done(read)

    @property
    def finished(self) -> bool:
        return self._finished.is_set()

    def wait(self, timeout_s: float) -> _Read | None:
        return self._read if self._finished.wait(max(0.0, timeout_s)) else None


def _timed_out(path: str, timeout_s: float) -> str:
    return (
        f"joint_limits_file {path!r} was not read within {timeout_s:g} s; expected a local "
        "file of a few kB"
    )


def read_bounded(path: str, timeout_s: float) -> Table:
    """The file's table, read on a thread of its own and waited for at most `timeout_s`;
    raises JointLimitsError (also on the timeout). For a caller without a `LimitsFile`."""
    read = _Reader(path).wait(timeout_s)
    if read is None:
        raise JointLimitsError(_timed_out(path, timeout_s))
    if read.problem:
        raise JointLimitsError(read.problem)
    return read.table or {}


class LimitsFile:
    """The node's `joint_limits_file` table: `load` at configure, `check` when the parameter is
    set, `table_for` whenever a parameter snapshot is taken (never waits), and the watch between
    `watch` and `stop` (its thread runs only while a file is set). `_lock` is a leaf; nothing
    is read, started or logged under it."""

    def __init__(self, warn: Callable[[str], object], path_of: Callable[[], str]) -> None:
        self._warn = warn
        # The parameter's value now (any thread).
        self._path_of_parameter = path_of
        # Lock order: a leaf (nothing is taken under it).
        self._lock = threading.Lock()
        # Under _lock: the file in force and its table (empty for ""); why its configure-time
        # read failed ("" when it did not); the path and identity last read or refused (not
        # read again until it changes); reads of paths checked when set; the last warning
        # (a broken file warns once); the parameter's getter while watching (None: not), the
        # watch's stop flag and its thread.
        self._path = ""
        self._table: Table = {}
        self._problem = ""
        self._seen: tuple[str, FileIdentity | None] = ("", None)
        self._checked: dict[str, _Read] = {}
        self._warned = ""
        self._path_of: Callable[[], str] | None = None
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def load(self, timeout_s: float) -> None:
        """Configure: read the parameter's file now (bounded by `timeout_s`) and put it in
        force; a failure is what `table_for(path)` raises until the next load."""
        path = self._path_of_parameter()
        read = _Reader(path).wait(timeout_s) if path else _Read(path, {}, None)
        with self._lock:
            self._adopt(
                read if read is not None else _Read(path, problem=_timed_out(path, timeout_s))
            )
            self._checked.clear()

    def check(self, path: str, wait_s: float = SET_WAIT_S) -> str | None:
        """Why the parameter may not be set to `path`, or None. Waits at most `wait_s` for the
        read (a control period's share); a read still running then is accepted and finishes on
        its thread, and a failure found later is a warning that keeps the limits in force."""
        if not path:
            return None
        try:
            # A stat never waits on a FIFO or a device: those are refused at once.
            file_identity(path)
        except JointLimitsError as exc:
            return str(exc)
        read = _Reader(path, self._checked_read).wait(wait_s)
        if read is None or not read.problem:
            return None
        return read.problem

    def table_for(self, path: str) -> Table:
        """The table in force for the parameter's value `path`; raises JointLimitsError with
        the configure-time problem. A path set since (its read checked) is put in force here;
        one whose read failed or still runs leaves the table in force (warned once)."""
        checked: _Read | None = None
        with self._lock:
            if path != self._path:
                checked = self._checked.pop(path, None)
                if not path or (checked is not None and not checked.problem):
                    self._adopt(checked or _Read(path, {}, None))
            if path == self._path and self._problem:
                raise JointLimitsError(self._problem)
            kept, table = self._path, self._table
        if path == kept:
            self._start_watch()
        elif checked is not None and checked.problem:
            self._warn_once(f"{checked.problem}; the limits of {kept!r} stay in force")
        return table

    # ----- the watch -----

    def watch(self) -> None:
        """From configure: look at the file once every POLL_S, on a thread of its own while a
        file is set, and put it in force again once a change was read whole and checked."""
        with self._lock:
            self._path_of = self._path_of_parameter
            self._stop = threading.Event()
        self._start_watch()

    def stop(self) -> None:
        """End the watch; its thread ends at its next look (it holds nothing)."""
        with self._lock:
            self._path_of = None
            self._stop.set()
            self._thread = None

    def _start_watch(self) -> None:
        with self._lock:
            if self._path_of is None or not self._path or self._thread is not None:
                return
            thread = self._thread = threading.Thread(
                target=self._watch,
                args=(self._path_of, self._stop),
                name=WATCH_THREAD,
                daemon=True,
            )
        thread.start()

    def _watch(self, path_of: Callable[[], str], stop: threading.Event) -> None:
        while not stop.wait(POLL_S):
            try:
                if not self._look(path_of()):
                    break
            except Exception as exc:  # noqa: BLE001 - the watch must outlive any file
                self._warn_once(f"joint_limits_file: the watch failed: {exc!r}")
        with self._lock:
            if self._thread is threading.current_thread():
                self._thread = None

    def _look(self, path: str) -> bool:
        """Read `path` again if it changed; False when no file is set (the watch ends)."""
        try:
            self.table_for(path)
        except JointLimitsError:
            return True  # configure failed on it: the next configure reads it
        with self._lock:
            current, seen = self._path, self._seen
        if not path:
            return False
        stay = f"the limits of {current!r} stay in force" if current else "no file is in force"
        try:
            identity = file_identity(path)
        except JointLimitsError as exc:
            self._warn_once(f"{exc}; {stay}")
            return True
        if (path, identity) == seen:
            return True
        with self._lock:
            self._seen = (path, identity)
        read = _Reader(path).wait(READ_TIMEOUT_S)
        if read is None:
            self._warn_once(f"{_timed_out(path, READ_TIMEOUT_S)}; {stay}")
        elif read.problem:
            self._warn_once(f"{read.problem}; {stay}")
        else:
            with self._lock:
                # Unless another file was put in force meanwhile.
                if self._path == current:
                    self._adopt(read)
        return True

    # ----- helpers -----

    def _adopt(self, read: _Read) -> None:
        """Under _lock: `read` in force."""
        self._path, self._table, self._problem = read.path, read.table or {}, read.problem
        self._seen, self._warned = (read.path, read.identity), ""

    def _checked_read(self, read: _Read) -> None:
        with self._lock:
            self._checked[read.path] = read

    def _warn_once(self, text: str) -> None:
        with self._lock:
            if text == self._warned:
                return
            self._warned = text
        self._warn(text)
