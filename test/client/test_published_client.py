"""Compatibility with the published client ``sequence-ai`` 0.5.0: our ``__all__`` offers every
name it exports, and its own training calls work against our gateway as against the service.

The second test runs the published wheel itself, in a subprocess whose path holds it and not
this tree. `make setup` fetches the wheel from the package index into build/reference/, so no
test reaches beyond loopback; without it (a bare pytest run) the test skips, saying why.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import zipfile
from pathlib import Path
from typing import Any, Dict, Iterator

import pytest
from support.gateway_fixture import run_gateway
from support.policy_support import FRAME_16_9

import sequence_ai

# ``sequence_ai.__all__`` of the published 0.5.0 wheel, in its order.
PUBLISHED_0_5_0 = (
    "connect", "models", "train", "training_job", "training_jobs", "cancel_training",
    "estimate_training_cost", "TrainingJob", "TERMINAL_STATUSES", "observation", "encode",
    "prepare", "to_joint_positions", "recipes", "DEFAULT_JPEG_QUALITY", "Policy", "Observation",
    "ImageFrame", "Proprioception", "ActionChunk", "Prediction", "RunOutcome", "Model",
    "SequencesError", "AuthError", "OutOfCredit", "InvalidRequest", "Unavailable",
    "ChunkExhausted", "DEFAULT_BASE_URL",
)
REFERENCE = "sequence-ai==0.5.0"
CACHE_ENV = "SEQUENCE_AI_REFERENCE_CACHE"


def test_every_published_name_is_exported_and_importable() -> None:
    missing = [name for name in PUBLISHED_0_5_0 if name not in sequence_ai.__all__]
    assert missing == []
    for name in PUBLISHED_0_5_0:
        assert getattr(sequence_ai, name) is not None, name
    assert sequence_ai.DEFAULT_BASE_URL == "https://api.generalsequences.com"
    assert sequence_ai.DEFAULT_JPEG_QUALITY == 95
    assert sequence_ai.TERMINAL_STATUSES == frozenset({"succeeded", "failed", "cancelled"})


def _cache() -> Path:
    default = Path(__file__).resolve().parents[2] / "build" / "reference"
    return Path(os.environ.get(CACHE_ENV) or default)


@pytest.fixture(scope="module")
def reference_client(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A folder holding the published ``sequence_ai`` 0.5.0 package (unpacked from its wheel)."""
    cache = _cache()
    wheels = sorted(cache.glob("sequence_ai-0.5.0-*.whl"))
    if not wheels:
        pytest.skip(f"no {REFERENCE} wheel in {cache}: `make setup` fetches it "
                    f"(or set {CACHE_ENV} to a folder holding it)")
    unpacked = tmp_path_factory.mktemp("reference-client")
    with zipfile.ZipFile(wheels[0]) as wheel:
        wheel.extractall(unpacked)
    return unpacked


@pytest.fixture(scope="module")
def sim_gateway() -> Iterator[Any]:
    with run_gateway(train_executor="sim", train_seconds=0.3) as handle:
        yield handle


# The published client's own calls, as its users write them (key and URL from the environment).
_SCRIPT = r"""
import json, sys
import sequence_ai as s

home, frame = sys.argv[1], sys.argv[2]
assert s.__file__.startswith(home), s.__file__
seen = {}
seen["quote"] = s.estimate_training_cost("pi05-droid", frames=144723, epochs=3)
job = s.train("pi05-droid", "s3://lab/kitchen", epochs=3, frames=144723)
seen["submitted"] = [job.status, job.estimated_cost_usd, job.base_model]
done = job.wait(timeout=60, poll_interval=0.02, max_poll_interval=0.1)
seen["done"] = [done.status, done.model_id, done.id == job.id]
seen["listed"] = [j.id for j in s.training_jobs()] == [job.id]
seen["unknown_status"] = s.training_jobs(status="exploded")
seen["cancel_finished"] = s.cancel_training(job.id).status
queued = s.train("pi05-droid", "hf://lab/episodes")
seen["cancelled"] = queued.cancel().status
seen["newest_first"] = [j.id for j in s.training_jobs()] == [queued.id, job.id]
for name, call in (("unknown_job", lambda: s.training_job("ftjob-0000000000000000")),
                   ("not_trainable", lambda: s.train("cosmos3-edge-policy-droid", "s3://x")),
                   ("out_of_range", lambda: s.train("pi05-droid", "s3://x", rank=100000))):
    try:
        call()
        seen[name] = None
    except s.InvalidRequest as exc:
        seen[name] = exc.status
obs = s.Observation(
    images=[s.ImageFrame(view=v, data=frame) for v in ("exterior_1", "wrist_left")],
    proprioception=s.Proprioception(joint_positions=[0.0] * 7, gripper=[0.0]),
    instruction="pick up the cup",
)
with s.connect(done.model_id) as policy:
    prediction = policy.predict(obs)
seen["act"] = [prediction.model, len(prediction.action_chunk.steps)]
print(json.dumps(seen))
"""


@pytest.mark.slow  # over half a second of wall time
def test_the_published_clients_training_calls_work_against_the_gateway(
    reference_client: Path, sim_gateway: Any
) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("SEQUENCES_")}
    env.update(PYTHONPATH=str(reference_client), SEQUENCES_API_KEY=sim_gateway.api_key,
               SEQUENCES_BASE_URL=sim_gateway.url)
    run = subprocess.run(
        [sys.executable, "-c", _SCRIPT, str(reference_client), FRAME_16_9],
        env=env, cwd=str(reference_client), capture_output=True, text=True, timeout=120,
    )
    assert run.returncode == 0, run.stderr[-3000:]
    seen: Dict[str, Any] = json.loads(run.stdout.strip().splitlines()[-1])
    ours = sequence_ai.estimate_training_cost("pi05-droid", frames=144723, epochs=3,
                                              base_url=sim_gateway.url)
    assert seen["quote"] == ours
    assert seen["submitted"] == ["queued", ours, "accounts/sequences/models/pi05-droid"]
    status, model_id, same = seen["done"]
    assert status == "succeeded" and same and model_id.startswith("accounts/sequences/models/")
    assert seen["listed"] and seen["newest_first"] and seen["unknown_status"] == []
    assert seen["cancel_finished"] == "succeeded"  # the 409 absorbed, the job re-read
    assert seen["cancelled"] == "cancelled"
    assert (seen["unknown_job"], seen["not_trainable"], seen["out_of_range"]) == (404, 422, 422)
    assert seen["act"] == [model_id, 15]
