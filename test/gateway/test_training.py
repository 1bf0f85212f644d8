"""The gateway's fine-tuning state: the simulated executor's clock-driven progress, the tuned
model it serves, per-key jobs and balances, the flags, and the check order of POST /v1/train."""

from __future__ import annotations

from typing import Any, Dict, List

import httpx
import pytest

pytest.importorskip("fastapi")

from gateway_support import PI05  # noqa: E402

from sequence_ai_gateway.__main__ import build_parser  # noqa: E402
from sequence_ai_gateway.catalogue import simulated_row  # noqa: E402
from sequence_ai_gateway.core import Gateway  # noqa: E402
from sequence_ai_gateway.training import (  # noqa: E402
    QUEUED_FRACTION,
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
