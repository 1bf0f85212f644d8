"""The gateway's fine-tuning state: the simulated executor's clock-driven progress, the tuned
model it serves, per-key jobs and balances, the flags, the check order of POST /v1/train, and
its bounds: field lengths, jobs per key, and local datasets read off the event loop."""

from __future__ import annotations

import asyncio
import json
import os
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, Dict, List

import httpx
import pytest

pytest.importorskip("fastapi")

from support.gateway_fixture import run_gateway  # noqa: E402
from support.gateway_support import PI05  # noqa: E402
from support.waiting import wait_for  # noqa: E402

from sequence_ai_gateway.__main__ import build_parser  # noqa: E402
from sequence_ai_gateway.models.catalogue import simulated_row  # noqa: E402
from sequence_ai_gateway.service.state import Gateway  # noqa: E402
from sequence_ai_gateway.service.training import (  # noqa: E402
    DATASET_READ_THREAD,
    LIST_LIMIT_MAX,
    MAX_BASE_MODEL_CHARS,
    MAX_DATASET_CHARS,
    MAX_INFO_JSON_BYTES,
    QUEUED_FRACTION,
    DatasetReads,
    Trainer,
    TrainJob,
    TrainRefused,
    caller_of,
)


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def trainer(clock: Clock, served: List[str], **options: Any) -> Trainer:
    return Trainer(executor="sim", seconds=10.0, clock=clock,
                   on_success=lambda job: served.append(job.id), **options)


def test_a_simulated_job_is_queued_then_running_then_succeeded_by_the_clock() -> None:
    clock, served = Clock(), []
    book = trainer(clock, served)
    job = book.submit("k", simulated_row("pi05-droid"), "s3://lab/x", "lora", {})
    assert book.job("k", job.id).status == "queued"
    clock.now += 10.0 * QUEUED_FRACTION
    assert book.job("k", job.id).status == "running" and served == []
    clock.now += 10.0
    assert book.job("k", job.id).status == "succeeded"
    book.settle()
    assert served == [job.id]  # served once, however often it is read


def test_the_manual_executor_leaves_jobs_queued() -> None:
    clock, served = Clock(), []
    book = Trainer(clock=clock, on_success=lambda job: served.append(job.id))
    job = book.submit("k", simulated_row("pi05-droid"), "s3://lab/x", "lora", {})
    clock.now += 1e6
    assert book.job("k", job.id).status == "queued" and served == []


def test_a_succeeded_job_spends_its_quote_from_its_keys_balance_only() -> None:
    clock, served = Clock(), []
    book = trainer(clock, served, balance_usd=30.0, broke_keys=["broke"])
    assert book.balance("broke") == 0.0
    job = book.submit("k", simulated_row("pi05-droid"), "s3://lab/x", "lora",
                      {"frames": 15, "epochs": 1})
    assert job.estimated_cost_usd == 25.0  # the catalogue's minimum
    clock.now += 10.0
    book.settle()
    assert book.balance("k") == 5.0 and book.balance("other") == 30.0
    with pytest.raises(TrainRefused) as broke:
        book.check_credit("broke")
    assert broke.value.status == 402


def test_a_job_shows_a_digest_of_its_key_never_the_key() -> None:
    book = trainer(Clock(), [])
    wire = book.submit("seq_live_secret", simulated_row("pi05-droid"), "s3://lab/x", "lora",
                       {}).wire()
    assert wire["caller"] == caller_of("seq_live_secret")
    assert "seq_live_secret" not in str(wire)


def test_the_gateway_serves_a_tuned_model_until_reset() -> None:
    gateway = Gateway(train_executor="sim", train_seconds=0.0)
    job: TrainJob = gateway.training.submit("k", gateway.catalogue.find(PI05) or {},
                                            "s3://lab/x", "lora", {})
    tuned = "accounts/sequences/models/" + job.id
    server = gateway.server_for(tuned)  # settles the job first
    base = gateway.servers[PI05]
    assert server.policy is base.policy and server.row["tuned"]["base_model"] == PI05
    assert {k: v for k, v in server.row.items() if k not in ("id", "tuned", "tags",
                                                             "description")} == \
        {k: v for k, v in base.row.items() if k not in ("id", "tags", "description")}
    gateway.reset()
    assert gateway.catalogue.find(tuned) is None and tuned not in gateway.servers


def test_the_training_flags_reach_the_gateway() -> None:
    args = build_parser().parse_args(["--train-executor", "sim", "--train-seconds", "5",
                                      "--train-balance-usd", "12.5"])
    assert (args.train_executor, args.train_seconds, args.train_balance_usd) == ("sim", 5.0, 12.5)
    defaults = build_parser().parse_args([])
    assert defaults.train_executor == "manual"
    with pytest.raises(SystemExit):
        build_parser().parse_args(["--train-executor", "gpu"])


@pytest.mark.parametrize("options, field", [
    ({"train_executor": "gpu"}, "train_executor"), ({"train_seconds": -1.0}, "train_seconds"),
    ({"train_balance_usd": float("inf")}, "train_balance_usd"),
])
def test_bad_training_options_are_refused_naming_them(options: Dict[str, Any],
                                                      field: str) -> None:
    with pytest.raises(ValueError, match=f"^{field}="):
        Gateway(**options)


def test_a_malformed_body_is_422_whatever_the_key_and_a_good_one_needs_a_key(gateway: Any) -> None:
    with httpx.Client(base_url=gateway.url, trust_env=False) as http:
        bad = http.post("/v1/train", json={"base_model": PI05, "dataset": "s3://x"})
        assert bad.status_code == 422
        good = {"base_model": PI05, "dataset": "s3://x", "method": "lora"}
        assert http.post("/v1/train", json=good).status_code == 401
        assert http.get("/v1/train").status_code == 401
        assert http.delete("/v1/train/ftjob-0").status_code == 401


# ----- bounds: every field the service would bound, and datasets read off the event loop -----


def _lerobot(root: Path, info: bytes) -> str:
    (root / "meta").mkdir(parents=True)
    (root / "meta" / "info.json").write_bytes(info)
    return root.as_uri()


def _post(url: str, key: str, **changes: Any) -> httpx.Response:
    body = {"base_model": PI05, "dataset": "s3://lab/x", "method": "lora", **changes}
    with httpx.Client(base_url=url, trust_env=False, timeout=30.0) as http:
        return http.post("/v1/train", json=body, headers={"Authorization": f"Bearer {key}"})


@pytest.fixture(scope="module")
def bounded() -> Iterator[Any]:
    with run_gateway() as handle:
        yield handle


@pytest.mark.parametrize("field, value, said", [
    ("dataset", "s3://lab/" + "x" * 1_900_000, f"at most {MAX_DATASET_CHARS}"),
    ("dataset", "s3://lab/a\x00b", "control characters"),
    ("base_model", "accounts/sequences/models/" + "p" * 300, f"at most {MAX_BASE_MODEL_CHARS}"),
])
def test_an_oversized_or_malformed_field_is_422_naming_it_and_nothing_is_kept(
    bounded: Any, field: str, value: str, said: str
) -> None:
    bounded.reset()
    answer = _post(bounded.url, bounded.api_key, **{field: value})
    assert answer.status_code == 422, answer.text
    detail = answer.json()["detail"]
    assert detail.startswith(field) and said in detail
    assert len(answer.content) < 1000  # the value is quoted, not echoed whole
    with httpx.Client(base_url=bounded.url, trust_env=False) as http:
        listed = http.get("/v1/train", headers={"Authorization": f"Bearer {bounded.api_key}"})
    assert listed.json() == {"data": []}


def test_a_key_has_at_most_its_active_jobs_and_keeps_its_newest_ones(
    bounded: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    import sequence_ai_gateway.service.training as training

    # The bounds made small here (the gateway runs in this process).
    monkeypatch.setattr(training, "MAX_ACTIVE_JOBS_PER_KEY", 5)
    monkeypatch.setattr(training, "MAX_KEPT_JOBS_PER_KEY", 12)
    clock, served = Clock(), []
    book = trainer(clock, served)
    row = simulated_row("pi05-droid")
    jobs = [book.submit("k", row, "s3://lab/x", "lora", {}) for _ in range(5)]
    with pytest.raises(TrainRefused, match="expected at most 5") as no:
        book.submit("k", row, "s3://lab/x", "lora", {})
    assert no.value.status == 429
    book.submit("other", row, "s3://lab/x", "lora", {})  # another key's room is its own
    book.cancel("k", jobs[0].id)
    book.submit("k", row, "s3://lab/x", "lora", {})
    for job in jobs[2:]:
        book.cancel("k", job.id)
    # Ended jobs beyond the kept number are forgotten, oldest first.
    for _ in range(12):
        book.cancel("k", book.submit("k", row, "s3://lab/x", "lora", {}).id)
    assert len(book.jobs("k", LIST_LIMIT_MAX, None)) == 12
    with pytest.raises(TrainRefused):
        book.job("k", jobs[0].id)
    assert book.job("k", jobs[1].id).status == "queued"  # an active job is never forgotten

    bounded.reset()
    for _ in range(5):
        assert _post(bounded.url, bounded.api_key).status_code == 200
    refused = _post(bounded.url, bounded.api_key)
    assert refused.status_code == 429 and "queued or running" in refused.json()["detail"]


@pytest.mark.parametrize("make, said", [
    (lambda info: os.mkfifo(info), "not a regular file"),
    (lambda info: info.mkdir(), "not a regular file"),
    (lambda info: os.truncate(_touch(info), MAX_INFO_JSON_BYTES + 1),
     f"expected at most {MAX_INFO_JSON_BYTES}"),
    (lambda info: info.write_text("[" * 100_000 + "]" * 100_000), "RecursionError"),
], ids=["fifo", "directory", "oversized", "nested"])
def test_a_dataset_info_json_that_is_no_regular_small_file_is_422_and_the_gateway_answers(
    bounded: Any, tmp_path: Path, make: Callable[[Path], object], said: str
) -> None:
    bounded.reset()
    (tmp_path / "meta").mkdir()
    make(tmp_path / "meta" / "info.json")
    answer = _post(bounded.url, bounded.api_key, dataset=tmp_path.as_uri())
    assert answer.status_code == 422 and said in answer.json()["detail"], answer.text
    with httpx.Client(base_url=bounded.url, trust_env=False, timeout=5.0) as http:
        assert http.get("/v1/health").status_code == 200
    good = _lerobot(tmp_path / "good", json.dumps({"total_frames": 30}).encode())
    accepted = _post(bounded.url, bounded.api_key, dataset=good)
    assert accepted.status_code == 200 and accepted.json()["config"]["frames"] == 30


def _touch(path: Path) -> Path:
    path.write_bytes(b"")
    return path


def test_dataset_reads_are_bounded_in_threads_and_time(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import threading

    import sequence_ai_gateway.service.training as training

    release = threading.Event()
    read = training.lerobot_frames

    def stuck(uri: str, path: str) -> int:
        release.wait(30.0)  # a network file system that does not answer, until released
        return read(uri, path)

    monkeypatch.setattr(training, "lerobot_frames", stuck)
    uri = _lerobot(tmp_path / "set", json.dumps({"total_frames": 7}).encode())
    reads = DatasetReads(threads=1, timeout_s=0.05)

    async def scenario() -> List[Any]:
        seen: List[Any] = []
        for _ in range(2):
            try:
                seen.append(await reads.frames(uri))
            except TrainRefused as exc:
                seen.append((exc.status, exc.detail))
        return seen

    first, second = asyncio.run(scenario())
    assert first[0] == 422 and "not read within 0.05 s" in first[1]
    assert second[0] == 503 and "1 dataset reads are still running" in second[1]
    release.set()
    wait_for(lambda: not [t for t in threading.enumerate() if t.name == DATASET_READ_THREAD],
             what="the stuck read's thread to end")
    monkeypatch.setattr(training, "lerobot_frames", read)
    assert asyncio.run(DatasetReads(threads=1, timeout_s=5.0).frames(uri)) == 7
