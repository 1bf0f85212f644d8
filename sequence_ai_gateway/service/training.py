"""Fine-tuning jobs (PROTOCOL §1.7): kept per key, a balance per key, and the executors.

``manual`` (the default) is the real service today: jobs are picked up by hand, so a job stays
``queued``. ``sim`` moves each job ``queued → running → succeeded`` over ``seconds`` and then
serves the tuned model (the base's row under the job's id). Progress is read off the clock when
anything looks, so no thread advances it and a restarted server loses nothing.
"""

from __future__ import annotations

import asyncio
import copy
import hashlib
import json
import math
import os
import stat
import threading
import time
import uuid
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any, Callable, Dict, List, Mapping, Optional, Sequence
from urllib.parse import unquote, urlsplit

from sequence_ai_gateway.models.catalogue import MODEL_PREFIX, short_id

EXECUTORS = ("manual", "sim")
TERMINAL = frozenset({"succeeded", "failed", "cancelled"})
LIST_LIMIT_MAX = 200
DEFAULT_TRAIN_SECONDS = 60.0
DEFAULT_BALANCE_USD = 1000.0
# The part of a simulated run spent queued before it is running.
QUEUED_FRACTION = 0.1
REMOTE_SCHEMES = ("hf", "s3", "gs", "https")
# Bounds the service keeps (a URL's and a model id's length, a key's jobs, a dataset's
# description); a request past one is refused naming the field.
MAX_DATASET_CHARS = 2048
MAX_BASE_MODEL_CHARS = 256
# Queued or running jobs a key may have; past this a submit is 429 until one ends.
MAX_ACTIVE_JOBS_PER_KEY = 500
# Jobs kept per key: past this the oldest ended ones are forgotten (with the bounds above, a
# key's jobs take at most a few MB).
MAX_KEPT_JOBS_PER_KEY = 1000
MAX_INFO_JSON_BYTES = 1 << 20
# A file:// dataset is read on a thread of its own, at most this many at once, and waited for
# at most this long (the event loop never reads a file).
DATASET_READ_THREADS = 2
DATASET_READ_TIMEOUT_S = 2.0
DATASET_READ_THREAD = "gateway:dataset-read"
# How much of an oversized or malformed value an error quotes.
QUOTED_CHARS = 80


class TrainRefused(Exception):
    """A request the routes answer with ``status`` and ``detail``."""

    def __init__(self, status: int, detail: str) -> None:
        super().__init__(detail)
        self.status = status
        self.detail = detail


@dataclass
class TrainJob:
    id: str
    owner: str
    base_model: str
    dataset: str
    method: str
    config: Dict[str, Any]
    created_at: str
    submitted_s: float
    estimated_cost_usd: Optional[float]
    status: str = "queued"

    def wire(self) -> Dict[str, Any]:
        return {
            "id": self.id,
            "object": "training_job",
            "base_model": self.base_model,
            "dataset": self.dataset,
            "method": self.method,
            "status": self.status,
            "created_at": self.created_at,
            "config": copy.deepcopy(self.config),
            "estimated_cost_usd": self.estimated_cost_usd,
            "caller": caller_of(self.owner),
        }


def caller_of(key: str) -> str:
    """Who submitted a job, as the job shows it: a digest of the key, never the key."""
    return "key-" + hashlib.sha256(key.encode("utf-8")).hexdigest()[:12]


def _quoted(value: str) -> str:
    return repr(value if len(value) <= QUOTED_CHARS else value[:QUOTED_CHARS] + "...")


def check_text(field: str, value: str, limit: int) -> None:
    """A string field within `limit` characters and free of control characters."""
    if len(value) > limit:
        raise TrainRefused(422, f"{field} is {len(value)} characters ({_quoted(value)}); "
                                f"expected at most {limit}")
    if any(ord(c) < 0x20 or ord(c) == 0x7F for c in value):
        raise TrainRefused(422, f"{field} {_quoted(value)} holds control characters; "
                                "expected printable text")


def dataset_path(uri: str) -> Optional[str]:
    """Check a dataset URI (no file is read); the folder of a local ``file://`` dataset, None
    for a remote one.

    ``file://`` is this gateway's own: it reads the folder on this machine (the service cannot).
    """
    check_text("dataset", uri, MAX_DATASET_CHARS)
    parts = urlsplit(uri)
    if parts.scheme in REMOTE_SCHEMES:
        if not (parts.netloc or parts.path.strip("/")):
            raise TrainRefused(422, f"dataset {uri!r} names no location after {parts.scheme}://")
        return None
    if parts.scheme != "file":
        raise TrainRefused(
            422, f"dataset {uri!r}: expected a URI of scheme hf://, s3://, gs:// or https:// "
                 "(or file:// to a local LeRobot dataset folder, on this local gateway only)")
    if parts.netloc not in ("", "localhost"):
        raise TrainRefused(422, f"dataset {uri!r}: a file:// URI must name a path on this "
                                "machine (file:///abs/path)")
    return unquote(parts.path)


def dataset_frames(uri: str) -> Optional[int]:
    """Check a dataset URI; the frame count of a local ``file://`` LeRobot folder (read here,
    on the caller's thread), else None."""
    path = dataset_path(uri)
    return None if path is None else lerobot_frames(uri, path)


def lerobot_frames(uri: str, path: str) -> int:
    """``meta/info.json``'s total_frames: a regular file of at most MAX_INFO_JSON_BYTES
    (opened without blocking, so a FIFO is refused rather than waited on)."""
    info = path.rstrip("/") + "/meta/info.json"
    try:
        fd = os.open(info, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    except FileNotFoundError:
        raise TrainRefused(422, f"dataset {uri!r}: {info} not found; expected a LeRobot dataset "
                                "folder (python -m sequence_ai_lab.episodes export-lerobot)"
                           ) from None
    except OSError as exc:
        raise TrainRefused(422, f"dataset {uri!r}: {info} is unreadable: {exc}") from None
    try:
        found = os.fstat(fd)
        if not stat.S_ISREG(found.st_mode):
            raise TrainRefused(422, f"dataset {uri!r}: {info} is not a regular file; expected "
                                    "LeRobot's meta/info.json")
        if found.st_size > MAX_INFO_JSON_BYTES:
            raise TrainRefused(422, f"dataset {uri!r}: meta/info.json is {found.st_size} bytes; "
                                    f"expected at most {MAX_INFO_JSON_BYTES}")
        os.set_blocking(fd, True)
        # One byte past the bound: a file that grew since fstat is still refused.
        data = os.read(fd, MAX_INFO_JSON_BYTES + 1)
        if len(data) > MAX_INFO_JSON_BYTES:
            raise TrainRefused(422, f"dataset {uri!r}: meta/info.json is over "
                                    f"{MAX_INFO_JSON_BYTES} bytes")
        meta = json.loads(data.decode("utf-8"))
    except (OSError, ValueError, RecursionError) as exc:
        raise TrainRefused(422, f"dataset {uri!r}: {info} is unreadable: "
                                f"{type(exc).__name__}: {exc}") from None
    finally:
        os.close(fd)
    frames = meta.get("total_frames") if isinstance(meta, dict) else None
    if isinstance(frames, bool) or not isinstance(frames, int) or frames < 1:
        raise TrainRefused(422, f"dataset {uri!r}: meta/info.json total_frames is "
                                f"{_quoted(repr(frames))}; expected a positive integer")
    return frames


class DatasetReads:
    """Local datasets read off the event loop: each on a daemon thread of its own (a read that
    never ends holds only its thread), at most ``threads`` at once, each awaited at most
    ``timeout_s``."""

    def __init__(self, threads: int = DATASET_READ_THREADS,
                 timeout_s: float = DATASET_READ_TIMEOUT_S) -> None:
        self._slots = threading.BoundedSemaphore(threads)
        self._threads = threads
        self._timeout_s = timeout_s

    async def frames(self, uri: str) -> Optional[int]:
        """The URI checked and, for ``file://``, its frame count (TrainRefused otherwise)."""
        path = dataset_path(uri)
        if path is None:
            return None
        if not self._slots.acquire(blocking=False):
            raise TrainRefused(503, f"dataset {uri!r}: {self._threads} dataset reads are still "
                                    "running; try again later")
        loop = asyncio.get_running_loop()
        answer: asyncio.Future[int] = loop.create_future()

        def settle(frames: Optional[int], error: Optional[TrainRefused]) -> None:
            if answer.done():
                return  # awaited no longer (timed out)
            if error is not None:
                answer.set_exception(error)
            else:
                answer.set_result(frames or 0)

        def read() -> None:
            frames, error = None, None
            try:
                frames = lerobot_frames(uri, path)
            except TrainRefused as exc:
                error = exc
            except Exception as exc:  # noqa: BLE001 - the answer must come, whatever failed
                error = TrainRefused(422, f"dataset {uri!r} is unreadable: "
                                          f"{type(exc).__name__}: {exc}")
            finally:
                self._slots.release()
            try:
                loop.call_soon_threadsafe(settle, frames, error)
            except RuntimeError:
                pass  # the loop closed while the file was read

        threading.Thread(target=read, name=DATASET_READ_THREAD, daemon=True).start()
        try:
            return await asyncio.wait_for(answer, self._timeout_s)
        except asyncio.TimeoutError:
            raise TrainRefused(422, f"dataset {uri!r}: meta/info.json was not read within "
                                    f"{self._timeout_s:g} s") from None


def check_trainable(base: Mapping[str, Any]) -> None:
    training = base.get("training") or {}
    if training.get("trainable") is not True:
        raise TrainRefused(422, f"base_model {base['id']!r} is not available for "
                                f"fine-tuning: {training.get('why') or 'not trainable'}")


def quote_usd(training: Mapping[str, Any], frames: Optional[int],
              epochs: Optional[float]) -> Optional[float]:
    """``frames × epochs / billing_fps`` s of data, priced by the hour, floored at the minimum;
    None while either count is unknown."""
    if frames is None or epochs is None:
        return None
    hours = frames * epochs / float(training["billing_fps"]) / 3600.0
    metered = hours * float(training["usd_per_data_hour"])
    return round(max(metered, float(training.get("minimum_usd") or 0.0)), 6)


def tuned_row(base: Mapping[str, Any], job: TrainJob) -> Dict[str, Any]:
    """The tuned model's catalogue row: the base's, under the job's model id, marked tuned."""
    row = copy.deepcopy(dict(base))
    row["id"] = MODEL_PREFIX + job.id
    row["tuned"] = {"base_model": base["id"], "job_id": job.id, "dataset": job.dataset,
                    "method": job.method}
    row["tags"] = [*row.get("tags", []), "tuned"]
    row["description"] = (f"{job.method} fine-tune of {short_id(base['id'])} on {job.dataset}; "
                          "served here with the base's simulated policy.")
    return row


class Trainer:
    """Jobs and balances by key; thread-safe (routes on the loop, control on any thread)."""

    def __init__(
        self,
        *,
        executor: str = "manual",
        seconds: float = DEFAULT_TRAIN_SECONDS,
        balance_usd: float = DEFAULT_BALANCE_USD,
        broke_keys: Sequence[str] = (),
        on_success: Callable[[TrainJob], None],
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        if executor not in EXECUTORS:
            raise ValueError(f"train_executor={executor!r}: expected one of {EXECUTORS}")
        for name, value in (("train_seconds", seconds), ("train_balance_usd", balance_usd)):
            if isinstance(value, bool) or not isinstance(value, (int, float)) \
                    or not 0 <= value < math.inf:
                raise ValueError(f"{name}={value!r}: expected a finite number >= 0")
        self.executor = executor
        self.seconds = float(seconds)
        self._initial_balance = float(balance_usd)
        self._broke = set(broke_keys)
        self._on_success = on_success
        self._clock = clock
        self._lock = threading.Lock()
        self._jobs: Dict[str, TrainJob] = {}  # by id, in submission order
        self._balances: Dict[str, float] = {}
        self.datasets = DatasetReads()

    def balance(self, key: str) -> float:
        with self._lock:
            return self._balance(key)

    def _balance(self, key: str) -> float:
        return self._balances.get(key, 0.0 if key in self._broke else self._initial_balance)

    def check_credit(self, key: str) -> None:
        if self.balance(key) <= 0:
            raise TrainRefused(402, "balance exhausted: add credit to this key's account "
                                    "before submitting a training job")

    def check_room(self, key: str) -> None:
        """Refuse (429) a key that has MAX_ACTIVE_JOBS_PER_KEY jobs queued or running."""
        self.settle()
        with self._lock:
            self._check_room(key)

    def _check_room(self, key: str) -> None:
        active = sum(1 for j in self._jobs.values()
                     if j.owner == key and j.status not in TERMINAL)
        if active >= MAX_ACTIVE_JOBS_PER_KEY:
            raise TrainRefused(429, f"this key has {active} training jobs queued or running; "
                                    f"expected at most {MAX_ACTIVE_JOBS_PER_KEY}: cancel one or "
                                    "wait for one to end")

    def submit(self, key: str, base: Mapping[str, Any], dataset: str, method: str,
               config: Dict[str, Any], *, frames: Optional[int] = None) -> TrainJob:
        """Queue a job on ``base`` (its row) once the base and the dataset are checked.
        ``frames``: a local dataset's count as ``DatasetReads`` read it off the event loop
        (without it a ``file://`` dataset is read here)."""
        check_trainable(base)
        if frames is None:
            frames = dataset_frames(dataset)
        else:
            dataset_path(dataset)
        if frames is not None:
            config = {**config, "frames": frames}  # the dataset's count, not the claim
        job = TrainJob(
            id="ftjob-" + uuid.uuid4().hex[:16], owner=key, base_model=base["id"],
            dataset=dataset, method=method, config=config,
            created_at=datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
            submitted_s=self._clock(),
            estimated_cost_usd=quote_usd(base.get("training") or {}, config.get("frames"),
                                         config.get("epochs")),
        )
        self.settle()
        with self._lock:
            self._check_room(key)
            self._jobs[job.id] = job
            self._forget_oldest_ended(key)
        return job

    def _forget_oldest_ended(self, key: str) -> None:
        """Keep at most MAX_KEPT_JOBS_PER_KEY of a key's jobs: the oldest ended ones go."""
        mine = [j for j in self._jobs.values() if j.owner == key]
        extra = len(mine) - MAX_KEPT_JOBS_PER_KEY
        for job in mine:
            if extra <= 0:
                break
            if job.status in TERMINAL:
                del self._jobs[job.id]
                extra -= 1

    def job(self, key: str, job_id: str) -> TrainJob:
        self.settle()
        with self._lock:
            return copy.deepcopy(self._owned(key, job_id))

    def _owned(self, key: str, job_id: str) -> TrainJob:
        job = self._jobs.get(job_id)
        # Another key's job is as unknown as a job that never was: its existence is not told.
        if job is None or job.owner != key:
            raise TrainRefused(404, f"training job {job_id!r} not found for this API key")
        return job

    def jobs(self, key: str, limit: int, status: Optional[str]) -> List[TrainJob]:
        self.settle()
        limit = max(1, min(LIST_LIMIT_MAX, limit))
        with self._lock:
            mine = [j for j in reversed(list(self._jobs.values()))
                    if j.owner == key and status in (None, j.status)]
            return copy.deepcopy(mine[:limit])

    def cancel(self, key: str, job_id: str) -> TrainJob:
        self.settle()
        with self._lock:
            job = self._owned(key, job_id)
            if job.status in TERMINAL:
                raise TrainRefused(409, f"training job {job_id} is already {job.status}; "
                                        "only a queued or running job can be cancelled")
            job.status = "cancelled"
            return copy.deepcopy(job)

    def settle(self) -> None:
        """Advance simulated jobs to where the clock says they are; serve each that succeeded."""
        if self.executor != "sim":
            return
        now = self._clock()
        with self._lock:
            for job in self._jobs.values():
                if job.status in TERMINAL:
                    continue
                elapsed = now - job.submitted_s
                if elapsed >= self.seconds:
                    job.status = "succeeded"
                    self._balances[job.owner] = max(
                        0.0, self._balance(job.owner) - (job.estimated_cost_usd or 0.0))
                    # Under the lock: nobody sees the job succeeded before its model is served.
                    self._on_success(job)
                elif elapsed >= self.seconds * QUEUED_FRACTION:
                    job.status = "running"

    def reset(self) -> List[str]:
        """Forget every job and balance; the model ids of the tuned models to stop serving."""
        with self._lock:
            tuned = [MODEL_PREFIX + j.id for j in self._jobs.values() if j.status == "succeeded"]
            self._jobs.clear()
            self._balances.clear()
        return tuned
