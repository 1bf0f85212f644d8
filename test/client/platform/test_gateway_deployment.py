"""Our client drives the local gateway's deployments end to end over the platform's protocol:
a run with two requests in flight plays the deployment's rows with no underrun, and labels the
episode it ended."""

from __future__ import annotations

import base64
import io
from pathlib import Path
from typing import Any, Iterator, List

import httpx
import pytest
from support.gateway_fixture import run_gateway

import sequence_ai
from sequence_ai.types import ImageFrame, Observation, Proprioception

ADAPTERS = Path(__file__).resolve().parents[3] / "config" / "adapters"
pytestmark = pytest.mark.slow  # a gateway process and runs played in real time
# The adapter file and the frames' JPEG: the gateway's venv has both, the 3.9 client venv neither.
pytest.importorskip("yaml")
pytest.importorskip("PIL")
# The gateway's platform needs sequence-base (the main .venv; not the Humble floors venv).
pytest.importorskip("sequence_base")


@pytest.fixture(scope="module")
def platform_gateway() -> Iterator[Any]:
    with run_gateway(platform=True) as handle:
        yield handle


def _observe() -> Observation:
    from PIL import Image

    out = io.BytesIO()
    Image.new("RGB", (224, 224), (90, 120, 150)).save(out, format="JPEG")
    data = base64.b64encode(out.getvalue()).decode()
    return Observation([ImageFrame("exterior_1", data), ImageFrame("wrist_left", data)],
                       Proprioception([0.0, -0.5, 0.0, -2.0, 0.0, 1.5, 0.8], gripper=[0.0]),
                       "pick up the cup")


@pytest.mark.parametrize(("name", "adapter"), [("my-pi05", "pi05-droid.yaml"),
                                               ("my-droid-absolute", "droid-absolute.yaml")])
def test_a_run_with_two_in_flight_plays_without_underrun(
    platform_gateway: Any, name: str, adapter: str
) -> None:
    frame = _observe()
    rows: List[List[float]] = []
    with sequence_ai.connect(name, api_key=platform_gateway.platform_key,
                             base_url=platform_gateway.url, protocol="deployment",
                             adapter=sequence_ai.load_adapter(ADAPTERS / adapter),
                             max_in_flight=2) as policy:
        outcome = policy.run(lambda: frame, rows.append, max_actions=45,
                             validate=lambda row: True, hold=lambda: None)
        episode = policy.label(True, "cup lifted")
    assert outcome.actions == 45 and outcome.underruns == 0
    assert all(len(row) == 8 for row in rows)
    labels = httpx.get(f"{platform_gateway.url}/_control/platform/labels", trust_env=False).json()
    assert episode in str(labels)
