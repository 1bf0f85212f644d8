"""The recorder's folder: its id, its own files, the bound on their size and the repair of those
a killed node left unfinished.

A file is the recorder's own only by its content: its first metadata record names the recorder
and the folder's recorder id (kept in `.sequence_ai_recorder`, made on the first recording).
Nothing else in the folder — a user's bag, whatever its name, an episode copied in from another
folder — is ever removed or rewritten. Pruning holds the id file's lock (one pruner per folder)
and each file's own lock while it removes it; a writer holds its file's lock until it closes
it, so a file being written is never removed or repaired.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import re
import stat
import uuid
from collections.abc import Collection, Iterator
from dataclasses import dataclass
from pathlib import Path

from sequence_ai_ros.episodes.files import (
    MAGIC,
    EpisodeError,
    FileBusy,
    open_regular,
    recorder_id,
)
from sequence_ai_ros.episodes.repair import Repaired, repair

SUFFIX = ".mcap"
ID_FILE = ".sequence_ai_recorder"
_ID = re.compile(r"[0-9a-f]{32}")


def _open_id_file(folder: Path, create: bool) -> int:
    flags = os.O_RDWR | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC | (os.O_CREAT if create else 0)
    fd = os.open(folder / ID_FILE, flags, 0o644)
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        raise OSError(f"{folder / ID_FILE} is not a regular file")
    return fd


def folder_id(folder: Path) -> str:
    """The folder's recorder id, made on its first recording."""
    fd = _open_id_file(folder, create=True)
    try:
        fcntl.flock(fd, fcntl.LOCK_SH)
        found = _read_id(fd)
        if found is None:
            fcntl.flock(fd, fcntl.LOCK_EX)
            found = _read_id(fd)  # another recorder may have made it meanwhile
        if found is None:
            found = uuid.uuid4().hex
            os.ftruncate(fd, 0)
            os.pwrite(fd, f"{found}\n".encode("ascii"), 0)
            os.fsync(fd)
        return found
    finally:
        os.close(fd)


def existing_folder_id(folder: Path) -> str | None:
    """The folder's recorder id, None when it was never recorded into."""
    try:
        fd = _open_id_file(folder, create=False)
    except FileNotFoundError:
        return None
    try:
        fcntl.flock(fd, fcntl.LOCK_SH)
        return _read_id(fd)
    finally:
        os.close(fd)


def _read_id(fd: int) -> str | None:
    found = os.pread(fd, 64, 0).decode("ascii", "replace").strip()
    return found if _ID.fullmatch(found) else None


@contextlib.contextmanager
def _folder_locked(folder: Path) -> Iterator[bool]:
    """Whether this caller holds the folder's lock (never waits: another holder is pruning)."""
    fd = _open_id_file(folder, create=True)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            yield False
            return
        yield True
    finally:
        os.close(fd)


def own_size(path: Path, recorder: str) -> int | None:
    """The size of `path` if it is a regular file the recorder `recorder` wrote, else None."""
    try:
        with open_regular(path, follow=False) as stream:
            if recorder_id(stream) != recorder:
                return None
            return os.fstat(stream.fileno()).st_size
    except (EpisodeError, OSError):
        return None


def own_files(folder: Path, recorder: str) -> list[tuple[Path, int]]:
    """The recorder's own files of a folder and their sizes, oldest first (by name: the UTC
    start)."""
    found = []
    for path in sorted(folder.glob(f"*{SUFFIX}")):
        size = own_size(path, recorder)
        if size is not None:
            found.append((path, size))
    return found


def _remove_own(path: Path, recorder: str) -> bool:
    """Remove `path` if, under its lock, it is still the recorder's and not being written."""
    try:
        with open_regular(path, follow=False) as stream:
            try:
                fcntl.flock(stream.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                return False  # being written or repaired
            opened, now = os.fstat(stream.fileno()), os.lstat(path)
            if (opened.st_dev, opened.st_ino) != (now.st_dev, now.st_ino):
                return False
            if recorder_id(stream) != recorder:
                return False
            path.unlink()
            return True
    except (EpisodeError, OSError):
        return False


def prune(folder: Path, max_mb: float, recorder: str, keep: Collection[Path] = ()) -> list[Path]:
    """Remove the recorder's oldest files until its files fit in `max_mb` (0: no bound); the
    files removed. `keep` are never removed, nor is any file another recorder is writing, nor
    any file the recorder did not write. Skipped while another process prunes the folder."""
    if max_mb <= 0:
        return []
    removed: list[Path] = []
    with _folder_locked(folder) as held:
        if not held:
            return removed
        own = own_files(folder, recorder)
        total = sum(size for _, size in own)
        for path, size in own:
            if total <= max_mb * 1e6:
                break
            if path in keep or not _remove_own(path, recorder):
                continue
            total -= size
            removed.append(path)
    return removed


def _ends_finished(path: Path) -> bool:
    """Whether a file ends with the MCAP magic, as only a finished file does."""
    try:
        with open_regular(path, follow=False) as stream:
            stream.seek(-len(MAGIC), os.SEEK_END)
            return stream.read(len(MAGIC)) == MAGIC
    except (EpisodeError, OSError):
        return False


@dataclass(frozen=True)
class FolderRepair:
    """What a folder's repair did: the files given a summary, and each that could not be."""

    repaired: list[Repaired]
    failed: list[EpisodeError]


def repair_unfinished(folder: Path) -> FolderRepair:
    """Repair the folder's unfinished files the recorder wrote (a killed node's), leaving the
    ones being written; nothing when the folder was never recorded into."""
    result = FolderRepair([], [])
    recorder = existing_folder_id(folder) if folder.is_dir() else None
    if recorder is None:
        return result
    for path, _ in own_files(folder, recorder):
        if _ends_finished(path):
            continue  # the common case, told by its last bytes: no record walked
        try:
            done = repair(path, follow=False)
        except FileBusy:
            continue  # being written: not unfinished, only not finished yet
        except EpisodeError as exc:
            result.failed.append(exc)
            continue
        if done is not None:
            result.repaired.append(done)
    return result
