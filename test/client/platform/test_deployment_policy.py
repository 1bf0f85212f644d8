"""``connect(protocol="deployment", adapter=...)`` drives a deployment with the client's own
loop: the schedule from connect, the adapter's rows, episodes and labels, an interrupt through
a warming wait; the shared-model default is untouched."""

from __future__ import annotations

import base64
from pathlib import Path
from typing import Iterator, List

import pytest

import sequence_ai
from sequence_ai import Connection, load_adapter
from sequence_ai.types import ImageFrame, Observation, Proprioception

from .fake_platform import ACTIONS, Platform, serve
from .test_adapter import JPEG_224

ADAPTER = Path(__file__).resolve().parents[3] / "config" / "adapters" / "pi05-droid.yaml"


@pytest.fixture
def platform() -> Iterator[Platform]:
    yield from serve()


def _observe() -> Observation:
    data = base64.b64encode(JPEG_224).decode()
    return Observation([ImageFrame("exterior_1", data), ImageFrame("wrist_left", data)],
                       Proprioception([0.0] * 7, gripper=[0.0]), "pick")


def _policy(platform: Platform) -> sequence_ai.Policy:
    pytest.importorskip("yaml")
    connection = Connection(api_key="seq_live_test", base_url=platform.control_url,
                            protocol="deployment")
    return sequence_ai.connect("my-pi05", connection=connection,
                               adapter=load_adapter(ADAPTER), max_in_flight=2)


def test_protocol_is_explicit_and_shared_model_stays_the_default() -> None:
    assert Connection().protocol == "shared-model"
    with pytest.raises(ValueError, match="protocol"):
        Connection(protocol="guess")
    with pytest.raises(TypeError, match="adapter="):
        sequence_ai.connect("my-pi05", api_key="k", protocol="deployment")
    shared = sequence_ai.connect("pi05-droid", api_key="k")
    assert shared.protocol == "shared-model"
    with pytest.raises(sequence_ai.SequencesError, match="deployment"):
        shared.label(True)


@pytest.mark.slow  # plays ten rows in real time
def test_run_plays_the_adapters_rows_at_the_deployments_rate(platform: Platform) -> None:
    rows: List[List[float]] = []
    with _policy(platform) as policy:
        assert policy.protocol == "deployment"
        outcome = policy.run(_observe, rows.append, max_actions=10, validate=lambda row: True,
                             hold=lambda: None)
        assert outcome.actions == 10
        assert policy.spec() is not None and policy.spec().control_hz == 15.0
        # Seven velocities integrated from the measured joints (all 0) at 15 Hz, then the gripper.
        assert rows[0] == pytest.approx([c * 0.1 / 15.0 for c in range(7)] + [0.7])
        episode = policy.label(True, "clean grasp")
    path, _, body = [s for s in platform.seen if s[0].endswith("/label")][0]
    assert path == f"/v1/deployments/my-pi05/episodes/{episode}/label"
    assert body == {"success": True, "notes": "clean grasp"}
    assert [p for p, _, _ in platform.seen].count("/act/episode_end") == 1
    assert platform.seen[-1][0] == "/v1/act/release"
    assert ACTIONS  # the fake's answer is what the rows came from


def test_interrupt_ends_a_warming_wait_and_holds(platform: Platform) -> None:
    for _ in range(3):
        platform.refuse("/v1/act/connect", 503, "warming", retry_after_s=30.0,
                        details={"eta_s": 30})
    held: List[bool] = []
    policy = _policy(platform)
    policy._session.on_warming = lambda waited, eta: policy.interrupt()
    with policy, pytest.raises(sequence_ai.SequencesError, match="interrupted"):
        policy.run(_observe, lambda row: None, max_actions=5, validate=lambda row: True,
                   hold=lambda: held.append(True))
    assert held == [True] and platform.connects == 0
