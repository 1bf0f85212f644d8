"""``sequence-ai estimate`` and ``sequence-ai train submit|list|show|cancel|wait`` against the
local gateway: one readable line per job, exit status by outcome."""

from __future__ import annotations

from typing import Any, Iterator, List, Tuple

import pytest
from support.gateway_fixture import run_gateway

import sequence_ai
from sequence_ai.cli import main


@pytest.fixture(scope="module")
def sim_gateway() -> Iterator[Any]:
    with run_gateway(train_executor="sim", train_seconds=0.3) as handle:
        yield handle


@pytest.fixture
def gw(sim_gateway: Any, no_env: None, monkeypatch: pytest.MonkeyPatch) -> Any:
    sim_gateway.reset()
    monkeypatch.setenv("SEQUENCES_API_KEY", sim_gateway.api_key)
    monkeypatch.setenv("SEQUENCES_BASE_URL", sim_gateway.url)
    return sim_gateway


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> Tuple[int, List[str], str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out.splitlines(), err


def test_estimate_needs_no_key(sim_gateway: Any, no_env: None,
                               capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "estimate", "pi05-droid", "--frames", "144723", "--epochs", "3",
                       "--base-url", sim_gateway.url)
    usd = sequence_ai.estimate_training_cost("pi05-droid", frames=144723, epochs=3,
                                             base_url=sim_gateway.url)
    assert code == 0
    assert out == [f"pi05-droid: 144723 frames x 3 epochs -> ${usd:.2f}"]


def test_estimate_also_takes_the_published_clis_model_option(
        gw: Any, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "estimate", "--model", "pi05-droid", "--frames", "15",
                       "--epochs", "1")
    assert code == 0 and out[0].startswith("pi05-droid: 15 frames x 1 epochs -> $")
    code, out, err = run(capsys, "estimate", "--frames", "15", "--epochs", "1")
    assert code == 1 and "expected a base model" in err


def test_estimate_of_a_model_that_is_not_trainable_fails_with_the_reason(
        gw: Any, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run(capsys, "estimate", "cosmos3-edge-policy-droid", "--frames", "10",
                         "--epochs", "1")
    assert code == 1 and out == []
    assert "not available for fine-tuning" in err and "Traceback" not in err


def test_submit_list_show_cancel_print_one_line_per_job(
        gateway_factory: Any, no_env: None, capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    # The manual executor keeps jobs queued: on a loaded machine the simulated one finished the
    # job before the cancel reached it.
    gateway = gateway_factory()
    monkeypatch.setenv("SEQUENCES_API_KEY", gateway.api_key)
    monkeypatch.setenv("SEQUENCES_BASE_URL", gateway.url)
    code, out, _ = run(capsys, "train", "submit", "pi05-droid", "hf://lab/episodes",
                       "--epochs", "2", "--frames", "900")
    assert code == 0 and len(out) == 1
    job_id, status, base, dataset, cost = out[0].split()[:5]
    assert job_id.startswith("ftjob-") and status == "queued" and base == "pi05-droid"
    assert dataset == "hf://lab/episodes" and cost.startswith("$")
    code, second, _ = run(capsys, "train", "submit", "pi05-droid", "s3://lab/b")
    other = second[0].split()[0]
    code, listed, _ = run(capsys, "train", "list")
    assert code == 0 and [line.split()[0] for line in listed] == [other, job_id]
    code, shown, _ = run(capsys, "train", "show", job_id)
    assert code == 0 and shown[0].split()[0] == job_id
    code, cancelled, _ = run(capsys, "train", "cancel", other)
    assert code == 0 and cancelled[0].split()[1] == "cancelled"
    code, only, _ = run(capsys, "train", "list", "--status", "cancelled")
    assert [line.split()[0] for line in only] == [other]
    code, none, _ = run(capsys, "train", "list", "--status", "exploded")
    assert code == 0 and none == ["no training jobs in status 'exploded'"]


def test_wait_follows_the_job_to_its_tuned_model(gw: Any,
                                                 capsys: pytest.CaptureFixture[str]) -> None:
    job = sequence_ai.train("pi05-droid", "s3://lab/kitchen")
    code, out, _ = run(capsys, "train", "wait", job.id, "--poll", "0.02", "--max-poll", "0.1")
    assert code == 0
    statuses = [line.split()[1] for line in out[:-1]]
    assert statuses[0] in ("queued", "running") and statuses[-1] == "succeeded"
    assert out[-1] == f"tuned model: accounts/sequences/models/{job.id}"


def test_wait_on_a_cancelled_job_exits_1(gw: Any, capsys: pytest.CaptureFixture[str]) -> None:
    job = sequence_ai.train("pi05-droid", "s3://lab/kitchen").cancel()
    code, out, _ = run(capsys, "train", "wait", job.id)
    assert code == 1 and out[0].split()[1] == "cancelled"


def test_wait_past_its_timeout_says_the_job_goes_on(
        gateway_factory: Any, no_env: None, capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    gateway = gateway_factory()  # the manual executor: the job stays queued
    monkeypatch.setenv("SEQUENCES_API_KEY", gateway.api_key)
    job = sequence_ai.train("pi05-droid", "s3://lab/kitchen", base_url=gateway.url)
    code, out, err = run(capsys, "train", "wait", job.id, "--timeout", "0.2", "--poll", "0.05",
                         "--max-poll", "0.05", "--base-url", gateway.url)
    assert code == 1 and out[0].split()[1] == "queued"
    assert job.id in err and "goes on" in err and "Traceback" not in err


def test_an_unknown_job_fails_without_a_traceback(gw: Any,
                                                  capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run(capsys, "train", "show", "ftjob-0000000000000000")
    assert code == 1 and out == []
    assert "404" in err and "Traceback" not in err
