"""Fine-tuning jobs (PROTOCOL §1.7): kept per key, a balance per key, and the executors.

``manual`` (the default) is the real service today: jobs are picked up by hand, so a job stays
``queued``. ``sim`` moves each job ``queued → running → succeeded`` over ``seconds`` and then
serves the tuned model (the base's row under the job's id). Progress is read off the clock when
anything looks, so no thread advances it and a restarted server loses nothing.
"""

from __future__ import annotations

import copy
import hashlib
import json
import math
import threading
import time
import uuid
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any, Callable, Dict, List, Mapping, Optional, Sequence
from urllib.parse import unquote, urlsplit

from sequence_ai_gateway.catalogue import MODEL_PREFIX, short_id

EXECUTORS = ("manual", "sim")
TERMINAL = frozenset({"succeeded", "failed", "cancelled"})
LIST_LIMIT_MAX = 200
DEFAULT_TRAIN_SECONDS = 60.0
DEFAULT_BALANCE_USD = 1000.0
# The part of a simulated run spent queued before it is running.
QUEUED_FRACTION = 0.1
REMOTE_SCHEMES = ("hf", "s3", "gs", "https")


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


def dataset_frames(uri: str) -> Optional[int]:
    """Check a dataset URI; the frame count of a local ``file://`` LeRobot folder, else None.

    ``file://`` is this gateway's own: it reads the folder on this machine (the service cannot).
    """
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
    return _lerobot_frames(uri, unquote(parts.path))


def _lerobot_frames(uri: str, path: str) -> int:
    info = path.rstrip("/") + "/meta/info.json"
    try:
        with open(info, encoding="utf-8") as handle:
            meta = json.load(handle)
    except FileNotFoundError:
        raise TrainRefused(422, f"dataset {uri!r}: {info} not found; expected a LeRobot dataset "
                                "folder (python -m sequence_ai_ros.episodes export-lerobot)"
                           ) from None
    except (OSError, ValueError) as exc:
        raise TrainRefused(422, f"dataset {uri!r}: {info} is unreadable: {exc}") from None
    frames = meta.get("total_frames") if isinstance(meta, dict) else None
    if isinstance(frames, bool) or not isinstance(frames, int) or frames < 1:
        raise TrainRefused(422, f"dataset {uri!r}: meta/info.json total_frames is {frames!r}; "
                                "expected a positive integer")
    return frames


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

    def balance(self, key: str) -> float:
        with self._lock:
            return self._balance(key)

    def _balance(self, key: str) -> float:
        return self._balances.get(key, 0.0 if key in self._broke else self._initial_balance)

    def check_credit(self, key: str) -> None:
        if self.balance(key) <= 0:
            raise TrainRefused(402, "balance exhausted: add credit to this key's account "
                                    "before submitting a training job")

    def submit(self, key: str, base: Mapping[str, Any], dataset: str, method: str,
               config: Dict[str, Any]) -> TrainJob:
        """Queue a job on ``base`` (its row) once the base and the dataset are checked."""
        training = base.get("training") or {}
        if training.get("trainable") is not True:
            raise TrainRefused(422, f"base_model {base['id']!r} is not available for "
                                    f"fine-tuning: {training.get('why') or 'not trainable'}")
        frames = dataset_frames(dataset)
        if frames is not None:
            config = {**config, "frames": frames}  # the dataset's count, not the claim
        job = TrainJob(
            id="ftjob-" + uuid.uuid4().hex[:16], owner=key, base_model=base["id"],
            dataset=dataset, method=method, config=config,
            created_at=datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
            submitted_s=self._clock(),
            estimated_cost_usd=quote_usd(training, config.get("frames"), config.get("epochs")),
        )
        with self._lock:
            self._jobs[job.id] = job
        return job

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
