"""Fine-tuning (PROTOCOL §1.7): submit a job on a dataset URI, follow it, cancel it, and quote
its price from the catalogue before submitting. A succeeded job's ``model_id`` goes straight
into ``connect()``; there is no deployment step."""

from __future__ import annotations

import math
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Callable, Dict, List, Optional, Union

from .._model.catalogue import find_model, full_model_id, models
from .._transport.connection import Connection, ConnectionSetting, connection_of
from ..errors import InvalidRequest, InvalidResponse, SequencesError, Unavailable

__all__ = [
    "TERMINAL_STATUSES",
    "TrainingJob",
    "cancel_training",
    "estimate_training_cost",
    "train",
    "training_job",
    "training_jobs",
]

# Nothing further happens to a job in one of these; ``wait()`` stops there.
TERMINAL_STATUSES = frozenset({"succeeded", "failed", "cancelled"})
# A run takes hours, and nothing in the service starts a queued job on its own today: an
# unbounded wait would be a hang, so the default is long but finite.
DEFAULT_WAIT_TIMEOUT_S = 6 * 3600.0
# Polls start responsive (a job refused on its dataset fails in the first minute) and stretch,
# so six hours of waiting costs a few hundred requests, not thousands.
FIRST_POLL_S = 10.0
POLL_GROWTH = 1.5
MAX_POLL_S = 60.0

Number = Union[int, float]
Wire = Mapping[str, object]


def _text(body: Wire, key: str, *, required: bool = True) -> str:
    value = body.get(key)
    if isinstance(value, str) and (value or not required):
        return value
    if value is None and not required:
        return ""
    raise InvalidResponse(f"training job {body.get('id')!r}: {key} is {value!r}; expected a string")


def _config(body: Wire) -> Dict[str, float]:
    value = body.get("config")
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise InvalidResponse(f"training job {body.get('id')!r}: config is {value!r}; "
                              "expected an object")
    return {str(k): v for k, v in value.items() if isinstance(v, (int, float))}


def _cost(body: Wire) -> Optional[float]:
    value = body.get("estimated_cost_usd")
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise InvalidResponse(f"training job {body.get('id')!r}: estimated_cost_usd is "
                              f"{value!r}; expected a number or null")
    return float(value)


@dataclass(frozen=True)
class TrainingJob:
    """One fine-tuning job as the service last described it (wire field names).

    ``status`` is whatever the service said; nothing here advances it. ``refresh()`` returns a
    new object. ``estimated_cost_usd`` is None until the job is quotable, never "free".
    """

    id: str
    base_model: str
    dataset: str
    method: str
    status: str
    created_at: str
    config: Dict[str, float] = field(default_factory=dict)
    estimated_cost_usd: Optional[float] = None
    caller: Optional[str] = None
    # How the job was reached, so refresh/cancel/wait reach it again.
    _access: Connection = field(default_factory=Connection, repr=False, compare=False)

    @classmethod
    def from_wire(cls, body: object, access: Optional[Connection] = None) -> TrainingJob:
        if not isinstance(body, Mapping):
            raise InvalidResponse(f"expected a training job object, got {body!r:.80}")
        caller = body.get("caller")
        return cls(
            id=_text(body, "id"),
            base_model=_text(body, "base_model"),
            dataset=_text(body, "dataset"),
            method=_text(body, "method"),
            status=_text(body, "status"),
            created_at=_text(body, "created_at", required=False),
            config=_config(body),
            estimated_cost_usd=_cost(body),
            caller=caller if isinstance(caller, str) else None,
            _access=access or Connection(),
        )

    def __repr__(self) -> str:
        cost = "unquoted" if self.estimated_cost_usd is None else f"${self.estimated_cost_usd:.2f}"
        return (f"TrainingJob(id={self.id!r}, status={self.status!r}, "
                f"base_model={self.base_model!r}, dataset={self.dataset!r}, {cost})")

    def line(self) -> str:
        """One readable line: id, status, base, dataset, price, created (the CLI's row)."""
        cost = "-" if self.estimated_cost_usd is None else f"${self.estimated_cost_usd:.2f}"
        base = self.base_model.rsplit("/", 1)[-1]
        return f"{self.id}  {self.status:<9}  {base}  {self.dataset}  {cost}  {self.created_at}"

    @property
    def done(self) -> bool:
        """True once nothing further will happen: succeeded, failed or cancelled."""
        return self.status in TERMINAL_STATUSES

    @property
    def model_id(self) -> str:
        """The tuned model's full id, for ``connect()``; only a succeeded job has one."""
        if self.status != "succeeded":
            raise SequencesError(
                f"training job {self.id} is {self.status!r}; a tuned model id exists only once "
                "it has succeeded (wait() for it)"
            )
        return full_model_id(self.id)

    def refresh(self) -> TrainingJob:
        """The job as the service describes it now (a new object)."""
        return _job(self._access, "GET", self.id)

    def cancel(self) -> TrainingJob:
        """Cancel it; an already finished job is returned as it ended (see cancel_training)."""
        return _cancel(self._access, self.id)

    def wait(
        self,
        *,
        timeout: float = DEFAULT_WAIT_TIMEOUT_S,
        poll_interval: float = FIRST_POLL_S,
        max_poll_interval: float = MAX_POLL_S,
        on_status: Optional[Callable[[TrainingJob], None]] = None,
    ) -> TrainingJob:
        """Poll until the job is terminal and return it; ``on_status`` sees each new status.

        Polls back off from ``poll_interval`` by 1.5x up to ``max_poll_interval``; an
        unreachable service is polled again rather than ending the wait. Past ``timeout``
        raises TimeoutError, and Ctrl-C a KeyboardInterrupt, each saying the job goes on and
        its last status (nothing is cancelled).
        """
        _check_wait(timeout, poll_interval, max_poll_interval)
        deadline = time.monotonic() + timeout
        interval, job, seen = poll_interval, self, ""
        try:
            while True:
                if on_status is not None and job.status != seen:
                    seen = job.status
                    on_status(job)
                if job.done:
                    return job
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    raise TimeoutError(
                        f"training job {job.id} is still {job.status!r} after {timeout:g} s of "
                        f"waiting; it goes on: wait again or cancel it ({_resume(job.id)})"
                    )
                # Never past the deadline: the timeout is the caller's, not the interval's.
                time.sleep(min(interval, remaining))
                interval = min(interval * POLL_GROWTH, max_poll_interval)
                try:
                    job = job.refresh()
                except Unavailable:
                    continue  # a blip in an hours-long wait; the deadline still bounds it
        except KeyboardInterrupt:
            raise KeyboardInterrupt(
                f"stopped waiting for training job {job.id}, last seen {job.status!r}; it goes "
                f"on: wait again or cancel it ({_resume(job.id)})"
            ) from None


def _resume(job_id: str) -> str:
    return f"sequence-ai train wait {job_id} / sequence-ai train cancel {job_id}"


def _positive(name: str, value: object) -> float:
    if (isinstance(value, bool) or not isinstance(value, (int, float))
            or not math.isfinite(value) or value <= 0):
        raise ValueError(f"{name} is {value!r}; expected a positive number")
    return float(value)


def _check_wait(timeout: float, poll_interval: float, max_poll_interval: float) -> None:
    _positive("timeout", timeout)
    _positive("poll_interval", poll_interval)
    if _positive("max_poll_interval", max_poll_interval) < poll_interval:
        raise ValueError(f"max_poll_interval is {max_poll_interval!r}; expected at least "
                         f"poll_interval ({poll_interval!r})")


def _job_path(job_id: str) -> str:
    if not isinstance(job_id, str) or not job_id.strip() or "/" in job_id or "?" in job_id:
        raise ValueError(f"job_id is {job_id!r}; expected a training job id such as 'ftjob-...'")
    return f"/v1/train/{job_id.strip()}"


def _job(access: Connection, method: str, job_id: str) -> TrainingJob:
    path = _job_path(job_id)
    with access.transport() as transport:
        body = transport.get(path) if method == "GET" else transport.delete(path)
    return TrainingJob.from_wire(body, access)


def _cancel(access: Connection, job_id: str) -> TrainingJob:
    try:
        return _job(access, "DELETE", job_id)
    except InvalidRequest as exc:
        # 409: already terminal. The usual ``try: job.wait() finally: job.cancel()`` must not
        # raise for a job that just finished; the job as it ended is the honest answer.
        if exc.status != 409:
            raise
    return _job(access, "GET", job_id)


def train(
    base_model: str,
    dataset: str,
    *,
    epochs: Optional[Number] = None,
    frames: Optional[int] = None,
    rank: Optional[int] = None,
    steps: Optional[int] = None,
    learning_rate: Optional[float] = None,
    method: str = "lora",
    connection: Optional[Connection] = None,
    **settings: ConnectionSetting,
) -> TrainingJob:
    """Submit a fine-tuning job of ``base_model`` on ``dataset`` (a URI: ``hf://``, ``s3://``,
    ``gs://``, ``https://``); returns the queued job at once.

    Only the config values given are sent (the service applies its defaults). ``frames`` with
    ``epochs`` makes the job quotable at once; a claimed ``frames`` is an estimate, the
    dataset's own count is authoritative. Raises OutOfCredit (402) at zero balance and
    InvalidRequest (422) for a base that is not fine-tunable or a value out of range.
    """
    if not isinstance(dataset, str) or "://" not in dataset:
        raise ValueError(f"dataset is {dataset!r}; expected a URI such as 's3://bucket/episodes'")
    given = {"epochs": epochs, "frames": frames, "rank": rank, "steps": steps,
             "learning_rate": learning_rate}
    body: Dict[str, object] = {
        "base_model": full_model_id(base_model), "dataset": dataset, "method": method,
    }
    config = {key: value for key, value in given.items() if value is not None}
    if config:
        body["config"] = config
    access = connection_of(connection, settings, "train")
    with access.transport() as transport:
        answer = transport.post("/v1/train", body)
    return TrainingJob.from_wire(answer, access)


def training_job(
    job_id: str,
    *,
    connection: Optional[Connection] = None,
    **settings: ConnectionSetting,
) -> TrainingJob:
    """One of your jobs; InvalidRequest (404) for an unknown id or another key's."""
    return _job(connection_of(connection, settings, "training_job"), "GET", job_id)


def training_jobs(
    *,
    status: Optional[str] = None,
    limit: int = 50,
    connection: Optional[Connection] = None,
    **settings: ConnectionSetting,
) -> List[TrainingJob]:
    """Your jobs, newest first. The service clamps ``limit`` to 200; a status it does not know
    matches no job, so the answer is an empty list rather than an error."""
    if isinstance(limit, bool) or not isinstance(limit, int) or limit < 1:
        raise ValueError(f"limit is {limit!r}; expected a positive integer (at most 200 served)")
    params: Dict[str, object] = {"limit": limit}
    if status:
        params["status"] = status
    access = connection_of(connection, settings, "training_jobs")
    with access.transport() as transport:
        body = transport.get("/v1/train", params=params)
    rows = body.get("data") if isinstance(body, Mapping) else None
    if not isinstance(rows, list):
        raise InvalidResponse(f"GET /v1/train returned {body!r:.80}; expected {{'data': [...]}}")
    return [TrainingJob.from_wire(row, access) for row in rows]


def cancel_training(
    job_id: str,
    *,
    connection: Optional[Connection] = None,
    **settings: ConnectionSetting,
) -> TrainingJob:
    """Cancel a queued or running job and return it. A job that already ended (the service's
    409) is re-read and returned as it ended; every other error propagates."""
    return _cancel(connection_of(connection, settings, "cancel_training"), job_id)


def _rate(model: str, training: Mapping[str, object], key: str, *, floor: bool = False) -> float:
    value = training.get(key, 0.0 if floor else None)
    if (isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value)
            or value < 0 or (value == 0 and not floor)):
        raise InvalidResponse(f"catalogue row {model}: training.{key} is {value!r}; expected a "
                              f"{'non-negative' if floor else 'positive'} number")
    return float(value)


def estimate_training_cost(
    base_model: str,
    *,
    frames: int,
    epochs: Number,
    connection: Optional[Connection] = None,
    **settings: ConnectionSetting,
) -> float:
    """What a job would cost in USD, quoted from the catalogue's ``training`` rates; submits
    nothing and needs no key: ``frames × epochs / billing_fps`` seconds of data, as hours ×
    ``usd_per_data_hour``, floored at ``minimum_usd``. InvalidRequest for a model that is not
    in the catalogue or not fine-tunable (with the catalogue's reason)."""
    if isinstance(frames, bool) or not isinstance(frames, int) or frames < 1:
        raise ValueError(f"frames is {frames!r}; expected a positive integer")
    _positive("epochs", epochs)
    rows = models(connection=connection_of(connection, settings, "estimate_training_cost"))
    row = find_model(rows, base_model)
    if row is None:
        raise InvalidRequest(f"model {base_model!r} is not in the catalogue")
    training = row.training or {}
    if training.get("trainable") is not True:
        why = training.get("why")
        raise InvalidRequest(f"model {row.short_id} is not available for fine-tuning"
                             + (f": {why}" if why else ""))
    seconds = frames * epochs / _rate(row.id, training, "billing_fps")
    metered = seconds / 3600.0 * _rate(row.id, training, "usd_per_data_hour")
    return round(max(metered, _rate(row.id, training, "minimum_usd", floor=True)), 6)
