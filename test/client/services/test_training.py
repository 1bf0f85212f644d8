"""Fine-tuning through the client against the local gateway: every endpoint and error of
PROTOCOL §1.7 / §1.9, the simulated executor, and the tuned model serving /v1/act."""

from __future__ import annotations

import _thread
import json
import signal
from pathlib import Path
from typing import Any, Dict, Iterator, List

import pytest
from support.gateway_fixture import TEST_API_KEY, TEST_BROKE_KEY, run_gateway
from support.policy_support import make_observation

import sequence_ai
from sequence_ai import (
    TERMINAL_STATUSES,
    AuthError,
    InvalidRequest,
    OutOfCredit,
    SequencesError,
    TrainingJob,
)
from sequence_ai._model.catalogue import full_model_id
from sequence_ai._transport.transport import Transport

OTHER_KEY = "seq_test_other_account"
PI05 = "accounts/sequences/models/pi05-droid"
COSMOS = "cosmos3-edge-policy-droid"
# A simulated run long enough to be seen running, short enough for a test.
SIM_SECONDS = 0.5
FAST_POLL = {"poll_interval": 0.02, "max_poll_interval": 0.1}


@pytest.fixture(scope="module")
def manual_gateway() -> Iterator[Any]:
    """The default executor: jobs stay queued, as on the service today."""
    with run_gateway(api_keys=(TEST_API_KEY, OTHER_KEY)) as handle:
        yield handle


@pytest.fixture(scope="module")
def sim_gateway() -> Iterator[Any]:
    with run_gateway(train_executor="sim", train_seconds=SIM_SECONDS) as handle:
        yield handle


@pytest.fixture
def gw(manual_gateway: Any, no_env: None) -> Iterator[Any]:
    manual_gateway.reset()  # no jobs left from another test
    yield manual_gateway


@pytest.fixture
def sim(sim_gateway: Any, no_env: None) -> Iterator[Any]:
    sim_gateway.reset()
    yield sim_gateway


def at(gateway: Any, key: str = "") -> Dict[str, str]:
    return {"api_key": key or gateway.api_key, "base_url": gateway.url}


def rates(gateway: Any, model: str = PI05) -> Dict[str, Any]:
    rows = {m.id: m for m in sequence_ai.models(base_url=gateway.url)}
    return rows[full_model_id(model)].training


def lerobot_dataset(root: Path, total_frames: object) -> str:
    (root / "meta").mkdir(parents=True)
    (root / "meta" / "info.json").write_text(json.dumps({
        "codebase_version": "v2.1", "fps": 15, "total_episodes": 3,
        "total_frames": total_frames,
    }))
    return root.as_uri()


def raw_post(gateway: Any, body: Dict[str, Any]) -> InvalidRequest:
    """A body the client would never send (unknown keys, wrong types), to the same endpoint."""
    with Transport(base_url=gateway.url, api_key=gateway.api_key) as transport:
        with pytest.raises(InvalidRequest) as caught:
            transport.post("/v1/train", body)
    return caught.value


# --- quote -------------------------------------------------------------------------------------


def test_quote_is_frames_times_epochs_at_the_catalogues_rates(gw: Any) -> None:
    training = rates(gw)
    frames, epochs = 144_723, 3
    hours = frames * epochs / training["billing_fps"] / 3600.0
    expected = round(max(hours * training["usd_per_data_hour"], training["minimum_usd"]), 6)
    assert expected > training["minimum_usd"]  # metered, not the floor
    # No key is needed to ask.
    assert sequence_ai.estimate_training_cost(
        "pi05-droid", frames=frames, epochs=epochs, base_url=gw.url) == expected


def test_a_small_job_is_quoted_at_the_minimum(gw: Any) -> None:
    minimum = rates(gw)["minimum_usd"]
    assert minimum > 0
    assert sequence_ai.estimate_training_cost(
        "pi05-droid", frames=15, epochs=1, base_url=gw.url) == minimum


def test_quote_of_a_model_that_is_not_trainable_carries_the_catalogues_reason(gw: Any) -> None:
    why = rates(gw, COSMOS)["why"]
    with pytest.raises(InvalidRequest, match="not available for fine-tuning") as caught:
        sequence_ai.estimate_training_cost(COSMOS, frames=100, epochs=1, base_url=gw.url)
    assert why in str(caught.value)
    with pytest.raises(InvalidRequest, match="not in the catalogue"):
        sequence_ai.estimate_training_cost("no-such-model", frames=100, epochs=1, base_url=gw.url)


@pytest.mark.parametrize("frames, epochs, field", [
    (0, 1, "frames"), (1.5, 1, "frames"), (True, 1, "frames"), (10, 0, "epochs"),
    (10, float("nan"), "epochs"),
])
def test_quote_refuses_bad_counts_naming_the_field(gw: Any, frames: Any, epochs: Any,
                                                   field: str) -> None:
    with pytest.raises(ValueError, match=f"^{field} is"):
        sequence_ai.estimate_training_cost("pi05-droid", frames=frames, epochs=epochs,
                                           base_url=gw.url)


# --- submit ------------------------------------------------------------------------------------


def test_submit_returns_the_queued_job_with_its_quote(gw: Any) -> None:
    job = sequence_ai.train("pi05-droid", "s3://lab/kitchen", epochs=3, frames=144_723, rank=16,
                            **at(gw))
    assert isinstance(job, TrainingJob)
    assert job.status == "queued" and not job.done
    assert job.base_model == PI05 and job.dataset == "s3://lab/kitchen" and job.method == "lora"
    assert job.config == {"epochs": 3, "frames": 144_723, "rank": 16}
    assert job.created_at.endswith("Z")
    assert job.estimated_cost_usd == sequence_ai.estimate_training_cost(
        "pi05-droid", frames=144_723, epochs=3, base_url=gw.url)
    assert job.caller and gw.api_key not in job.caller


def test_a_job_without_frames_and_epochs_is_not_yet_quoted(gw: Any) -> None:
    job = sequence_ai.train("pi05-droid", "hf://lab/episodes", **at(gw))
    assert job.estimated_cost_usd is None and job.config == {}


def test_the_job_holds_no_secret_in_its_repr(gw: Any) -> None:
    job = sequence_ai.train("pi05-droid", "gs://lab/episodes", **at(gw))
    for text in (repr(job), str(job), repr([job]), job.line()):
        assert gw.api_key not in text
    assert job.id in repr(job) and "queued" in repr(job)


def test_zero_balance_is_402(gw: Any) -> None:
    with pytest.raises(OutOfCredit) as caught:
        sequence_ai.train("pi05-droid", "s3://lab/kitchen", **at(gw, TEST_BROKE_KEY))
    assert caught.value.status == 402


def test_no_key_is_refused_locally_and_an_unknown_key_by_the_gateway(gw: Any) -> None:
    with pytest.raises(AuthError) as local:
        sequence_ai.train("pi05-droid", "s3://lab/kitchen", base_url=gw.url)
    assert local.value.status is None
    with pytest.raises(AuthError) as remote:
        sequence_ai.training_jobs(**at(gw, "seq_live_not_issued"))
    assert remote.value.status == 401


def test_a_base_that_is_not_trainable_is_422_with_the_reason(gw: Any) -> None:
    with pytest.raises(InvalidRequest, match="not available for fine-tuning") as caught:
        sequence_ai.train(COSMOS, "s3://lab/kitchen", **at(gw))
    assert caught.value.status == 422
    assert rates(gw, COSMOS)["why"] in str(caught.value)


def test_an_unknown_base_is_404(gw: Any) -> None:
    with pytest.raises(InvalidRequest) as caught:
        sequence_ai.train("no-such-model", "s3://lab/kitchen", **at(gw))
    assert caught.value.status == 404


@pytest.mark.parametrize("config, field", [
    ({"epochs": 0}, "epochs"), ({"epochs": 1000}, "epochs"), ({"rank": 1000}, "rank"),
    ({"frames": 0}, "frames"), ({"steps": 0}, "steps"), ({"learning_rate": 2.0}, "learning_rate"),
])
def test_an_out_of_range_value_is_422_naming_it(gw: Any, config: Dict[str, float],
                                                field: str) -> None:
    with pytest.raises(InvalidRequest) as caught:
        sequence_ai.train("pi05-droid", "s3://lab/kitchen", **config, **at(gw))
    assert caught.value.status == 422
    assert field in str(caught.value)


@pytest.mark.parametrize("body, field", [
    ({"dataset": "s3://x", "method": "lora", "base_model": PI05, "priority": 1}, "priority"),
    ({"dataset": "s3://x", "method": "lora", "base_model": PI05, "config": {"batch": 8}},
     "batch"),
    ({"dataset": "s3://x", "method": "lora", "base_model": PI05, "config": {"frames": "900"}},
     "frames"),
    ({"dataset": "s3://x", "method": "lora", "base_model": PI05, "config": {"frames": 9.5}},
     "frames"),
    ({"dataset": "s3://x", "method": "full", "base_model": PI05}, "method"),
    ({"dataset": "s3://x", "base_model": PI05}, "method"),
])
def test_unknown_keys_and_wrong_types_are_422(gw: Any, body: Dict[str, Any], field: str) -> None:
    refused = raw_post(gw, body)
    assert refused.status == 422 and field in str(refused)
    assert sequence_ai.training_jobs(**at(gw)) == []


@pytest.mark.parametrize("dataset", ["ftp://lab/x", "s3://", "/home/lab/episodes",
                                     "file://otherhost/data"])
def test_a_dataset_uri_of_no_known_kind_is_422(gw: Any, dataset: str) -> None:
    with pytest.raises((InvalidRequest, ValueError)) as caught:
        sequence_ai.train("pi05-droid", dataset, **at(gw))
    if isinstance(caught.value, InvalidRequest):
        assert caught.value.status == 422 and "dataset" in str(caught.value)


def test_a_local_lerobot_folder_is_quoted_from_its_own_frame_count(gw: Any,
                                                                   tmp_path: Path) -> None:
    uri = lerobot_dataset(tmp_path / "episodes", 4_500)
    # The claim is an estimate; the folder's count is what is quoted.
    job = sequence_ai.train("pi05-droid", uri, epochs=20, frames=10, **at(gw))
    assert job.dataset == uri and job.config["frames"] == 4_500
    assert job.estimated_cost_usd == sequence_ai.estimate_training_cost(
        "pi05-droid", frames=4_500, epochs=20, base_url=gw.url)


@pytest.mark.parametrize("total_frames", [0, "many", None])
def test_a_local_folder_without_a_frame_count_is_422(gw: Any, tmp_path: Path,
                                                     total_frames: object) -> None:
    uri = lerobot_dataset(tmp_path / "episodes", total_frames)
    with pytest.raises(InvalidRequest, match="total_frames") as caught:
        sequence_ai.train("pi05-droid", uri, **at(gw))
    assert caught.value.status == 422


def test_a_local_folder_that_is_not_there_is_422(gw: Any, tmp_path: Path) -> None:
    with pytest.raises(InvalidRequest, match="not found") as caught:
        sequence_ai.train("pi05-droid", (tmp_path / "absent").as_uri(), **at(gw))
    assert caught.value.status == 422


# --- list, get, cancel -------------------------------------------------------------------------


def test_list_is_newest_first_and_filters_by_status(gw: Any) -> None:
    made = [sequence_ai.train("pi05-droid", f"s3://lab/run-{i}", **at(gw)) for i in range(3)]
    listed = sequence_ai.training_jobs(**at(gw))
    assert [j.id for j in listed] == [j.id for j in reversed(made)]
    sequence_ai.cancel_training(made[1].id, **at(gw))
    assert [j.id for j in sequence_ai.training_jobs(status="cancelled", **at(gw))] == [made[1].id]
    newest = sequence_ai.training_jobs(limit=2, **at(gw))
    assert [j.id for j in newest] == [made[2].id, made[1].id]


def test_an_unknown_status_lists_nothing(gw: Any) -> None:
    sequence_ai.train("pi05-droid", "s3://lab/kitchen", **at(gw))
    assert sequence_ai.training_jobs(status="exploded", **at(gw)) == []


def test_limit_is_clamped_to_200(gw: Any) -> None:
    with Transport(base_url=gw.url, api_key=gw.api_key) as transport:
        for i in range(205):
            transport.post("/v1/train", {"base_model": PI05, "dataset": f"s3://lab/{i}",
                                         "method": "lora"})
    listed = sequence_ai.training_jobs(limit=1000, **at(gw))
    assert len(listed) == 200
    assert listed[0].dataset == "s3://lab/204" and listed[-1].dataset == "s3://lab/5"


def test_list_limit_must_be_a_positive_integer(gw: Any) -> None:
    with pytest.raises(ValueError, match="^limit is 0"):
        sequence_ai.training_jobs(limit=0, **at(gw))


def test_get_reads_the_job_and_refresh_rereads_it(gw: Any) -> None:
    job = sequence_ai.train("pi05-droid", "s3://lab/kitchen", epochs=2, **at(gw))
    assert sequence_ai.training_job(job.id, **at(gw)) == job
    assert job.refresh() == job and job.refresh() is not job


def test_another_keys_job_is_404_like_one_that_never_was(gw: Any) -> None:
    job = sequence_ai.train("pi05-droid", "s3://lab/kitchen", **at(gw))
    messages = []
    for job_id in (job.id, "ftjob-0000000000000000"):
        with pytest.raises(InvalidRequest) as caught:
            sequence_ai.training_job(job_id, **at(gw, OTHER_KEY))
        assert caught.value.status == 404
        messages.append(str(caught.value).replace(job_id, "ID"))
    assert messages[0] == messages[1]  # nothing tells the two apart
    with pytest.raises(InvalidRequest) as cancelled:
        sequence_ai.cancel_training(job.id, **at(gw, OTHER_KEY))
    assert cancelled.value.status == 404
    assert sequence_ai.training_jobs(**at(gw, OTHER_KEY)) == []
    assert job.refresh().status == "queued"


def test_cancel_then_cancel_again_absorbs_the_409(gw: Any) -> None:
    job = sequence_ai.train("pi05-droid", "s3://lab/kitchen", **at(gw))
    cancelled = job.cancel()
    assert cancelled.status == "cancelled" and cancelled.done
    # The service answers 409 to a second cancel; the client re-reads and returns the job.
    with Transport(base_url=gw.url, api_key=gw.api_key) as transport:
        with pytest.raises(InvalidRequest) as conflict:
            transport.delete(f"/v1/train/{job.id}")
    assert conflict.value.status == 409
    again = sequence_ai.cancel_training(job.id, **at(gw))
    assert again.status == "cancelled" and again.id == job.id


def test_a_malformed_job_id_is_refused_before_sending(gw: Any) -> None:
    with pytest.raises(ValueError, match="^job_id is"):
        sequence_ai.training_job("../models", **at(gw))


# --- waiting -----------------------------------------------------------------------------------


def test_a_queued_job_times_out_saying_it_is_still_there(gw: Any) -> None:
    job = sequence_ai.train("pi05-droid", "s3://lab/kitchen", **at(gw))
    with pytest.raises(TimeoutError) as caught:
        job.wait(timeout=0.2, **FAST_POLL)
    text = str(caught.value)
    assert job.id in text and "'queued'" in text and "goes on" in text
    assert job.refresh().status == "queued"  # waiting cancelled nothing


@pytest.fixture
def default_sigint() -> Iterator[None]:
    """Python's own SIGINT handler, whatever an earlier test in this process installed."""
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    yield
    signal.signal(signal.SIGINT, previous)


def test_ctrl_c_while_waiting_says_the_job_goes_on_and_where_it_stood(
    gw: Any, default_sigint: None
) -> None:
    job = sequence_ai.train("pi05-droid", "s3://lab/kitchen", **at(gw))

    def interrupt(seen: TrainingJob) -> None:
        # As Ctrl-C does: KeyboardInterrupt arrives in the main thread while it waits.
        _thread.interrupt_main()

    with pytest.raises(KeyboardInterrupt) as caught:
        job.wait(timeout=30.0, on_status=interrupt, **FAST_POLL)
    text = str(caught.value)
    assert job.id in text and "'queued'" in text and "goes on" in text
    assert job.refresh().status == "queued"


@pytest.mark.parametrize("options, field", [
    ({"timeout": 0}, "timeout"), ({"poll_interval": -1.0}, "poll_interval"),
    ({"poll_interval": 5.0, "max_poll_interval": 1.0}, "max_poll_interval"),
])
def test_wait_refuses_bad_timings_naming_them(gw: Any, options: Dict[str, float],
                                              field: str) -> None:
    job = sequence_ai.train("pi05-droid", "s3://lab/kitchen", **at(gw))
    with pytest.raises(ValueError, match=f"^{field} is"):
        job.wait(**options)


def test_the_default_wait_is_bounded_and_backs_off() -> None:
    from sequence_ai._services import training

    assert 0 < training.DEFAULT_WAIT_TIMEOUT_S < float("inf")
    assert training.FIRST_POLL_S < training.MAX_POLL_S and training.POLL_GROWTH > 1


def test_a_job_that_has_not_succeeded_has_no_model_id(gw: Any) -> None:
    job = sequence_ai.train("pi05-droid", "s3://lab/kitchen", **at(gw))
    with pytest.raises(SequencesError, match="queued"):
        _ = job.model_id


# --- the simulated executor and the tuned model ------------------------------------------------


@pytest.mark.slow  # over half a second of wall time
def test_the_simulated_run_succeeds_and_its_model_serves_act(sim: Any) -> None:
    job = sequence_ai.train("pi05-droid", "s3://lab/kitchen", epochs=1, frames=900, **at(sim))
    seen: List[str] = []
    done = job.wait(timeout=60.0, on_status=lambda j: seen.append(j.status), **FAST_POLL)
    assert done.status == "succeeded" and done.done and "succeeded" in TERMINAL_STATUSES
    order = ["queued", "running", "succeeded"]
    assert seen[0] == "queued" and seen[-1] == "succeeded"
    assert seen == sorted(seen, key=order.index)  # never backwards
    assert done.model_id == f"accounts/sequences/models/{job.id}"

    rows = {m.id: m for m in sequence_ai.models(base_url=sim.url)}
    tuned, base = rows[done.model_id], rows[PI05]
    assert tuned.raw["tuned"]["base_model"] == PI05 and "tuned" in tuned.raw["tags"]
    for field in ("action_space", "action_dim", "state_dim", "state_layout", "control_hz",
                  "camera_views", "action_semantics", "open_loop_horizon"):
        assert getattr(tuned, field) == getattr(base, field), field

    with sequence_ai.connect(done.model_id, **at(sim)) as policy:
        assert policy.spec() == tuned
        prediction = policy.predict(make_observation())
    assert prediction.model == done.model_id
    assert len(prediction.action_chunk) == base.action_horizon


@pytest.mark.slow  # over half a second of wall time
def test_cancelling_a_succeeded_job_returns_it_as_it_ended(sim: Any) -> None:
    job = sequence_ai.train("pi05-droid", "s3://lab/kitchen", **at(sim))
    done = job.wait(timeout=60.0, **FAST_POLL)
    assert job.cancel().status == "succeeded" == done.status


def test_a_cancelled_run_never_serves_a_model(sim: Any) -> None:
    job = sequence_ai.train("pi05-droid", "s3://lab/kitchen", **at(sim)).cancel()
    assert job.wait(timeout=60.0, **FAST_POLL).status == "cancelled"
    tail = job.id
    assert all(m.short_id != tail for m in sequence_ai.models(base_url=sim.url))


def test_the_balance_is_per_key_and_spent_by_succeeded_jobs(gateway_factory: Any,
                                                            no_env: None) -> None:
    gateway = gateway_factory(api_keys=(TEST_API_KEY, OTHER_KEY), train_executor="sim",
                              train_seconds=0.0, train_balance_usd=25.0)
    minimum = rates(gateway)["minimum_usd"]
    assert minimum >= 25.0  # one small job spends the whole balance
    job = sequence_ai.train("pi05-droid", "s3://lab/kitchen", epochs=1, frames=15, **at(gateway))
    assert job.wait(timeout=60.0, **FAST_POLL).status == "succeeded"
    with pytest.raises(OutOfCredit):
        sequence_ai.train("pi05-droid", "s3://lab/kitchen", **at(gateway))
    # Another key's balance is its own.
    other = sequence_ai.train("pi05-droid", "s3://lab/kitchen", **at(gateway, OTHER_KEY))
    assert other.status in ("queued", "running", "succeeded")
