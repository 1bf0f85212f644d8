"""The referee of today's platform: the published client ``sequence-ai`` 0.51.5, unmodified, drives
our gateway's deployments over the direct-worker protocol.

One subprocess whose path holds the wheel (unpacked, not this tree) runs every scenario:
connect, wait_until_ready, observe + act returning the arrays, end_episode, label, interrupt
cutting a slow act, and its typed errors for a bad key, a robot key on another deployment, an
unknown deployment and a busy worker. `make setup` fetches the wheel into
build/reference-platform/; without it the test skips, saying why.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import zipfile
from pathlib import Path
from typing import Any, Dict, Iterator

import httpx
import pytest
from support.gateway_fixture import run_gateway
from support.policy_support import FRAME_16_9

REFERENCE = "sequence-ai==0.51.5"
CACHE_ENV = "SEQUENCE_AI_PLATFORM_REFERENCE_CACHE"
# How long the slow act would take if the interrupt (at 0.2 s) did not cut it; the published
# client's close() then waits for the act it left running, so it is kept short.
STALL_S = 2.0


def _missing_requirement() -> str:
    """What this interpreter lacks of the published client's and the platform gateway's needs."""
    for module in ("numpy", "PIL", "sequence_base"):
        try:
            __import__(module)
        except ImportError:
            return module
    if tuple(int(part) for part in httpx.__version__.split(".")[:2]) < (0, 24):
        return f"httpx>=0.24 (here {httpx.__version__})"
    return ""


# The 3.9 client venv and the Humble floors lack them; the main .venv (make pytest) has them all.
if _missing_requirement():
    pytest.skip(f"the published 0.51.5 client needs {_missing_requirement()}",
                allow_module_level=True)


def _cache() -> Path:
    default = Path(__file__).resolve().parents[2] / "build" / "reference-platform"
    return Path(os.environ.get(CACHE_ENV) or default)


@pytest.fixture(scope="module")
def reference_client(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A folder holding the published ``sequence_ai`` 0.51.5 package (unpacked from its wheel)."""
    cache = _cache()
    wheels = sorted(cache.glob("sequence_ai-0.51.5-*.whl"))
    if not wheels:
        pytest.skip(f"no {REFERENCE} wheel in {cache}: `make setup` fetches it "
                    f"(or set {CACHE_ENV} to a folder holding it)")
    unpacked = tmp_path_factory.mktemp("reference-platform-client")
    with zipfile.ZipFile(wheels[0]) as wheel:
        wheel.extractall(unpacked)
    return unpacked


@pytest.fixture(scope="module")
def platform_gateway() -> Iterator[Any]:
    with run_gateway(platform=True) as handle:
        yield handle


# The published client's calls, as its README has a robot write them.
_SCRIPT = r"""
import base64, json, sys, threading
import numpy as np
import sequence_ai as s

home, frame = sys.argv[1], base64.b64decode(sys.argv[2])
assert s.__file__.startswith(home), s.__file__
seen = {}
inputs = {"exterior_1": frame, "wrist_left": frame, "joint_positions": np.zeros(7, np.float32),
          "gripper_position": np.zeros(1, np.float32), "instruction": "pick up the cup"}

with s.connect("my-pi05") as policy:
    seen["ready"] = policy.wait_until_ready(timeout_s=30, poll_s=0.1) >= 0
    seen["seq"] = [policy.observe(inputs), policy.observe(inputs)]
    out = policy.act()
    seen["actions"] = [str(out["actions"].dtype), list(out["actions"].shape)]
    seen["finite"] = bool(np.isfinite(out["actions"]).all())
    episode = policy.end_episode()
    seen["labelled"] = policy.label(True, "cup lifted", episode_id=episode) == episode
    seen["episode"] = episode

with s.connect("my-droid-absolute") as policy:
    policy.observe(inputs)
    threading.Timer(0.2, policy.interrupt).start()
    try:
        policy.act()
        seen["interrupt"] = "answered"
    except s.Interrupted:
        seen["interrupt"] = "Interrupted"


def refusal(call):
    try:
        call()
        return None
    except s.SequencesError as exc:
        return [type(exc).__name__, exc.status, exc.code]


def act_once(model, **options):
    with s.connect(model, **options) as policy:
        policy.observe(inputs)
        return policy.act()


seen["bad_key"] = refusal(lambda: act_once("my-pi05", api_key="seq_live_not_a_key"))
seen["robot_key"] = refusal(lambda: act_once("my-echo", api_key="seq_robot_local_my-pi05"))
seen["unknown"] = refusal(lambda: act_once("my-nothing"))
seen["busy"] = refusal(lambda: act_once("my-echo", timeout_s=1.0))
print(json.dumps(seen))
"""


@pytest.mark.slow  # a few seconds: one subprocess, the busy worker waited out for a second
def test_the_published_platform_client_drives_our_deployments(
    reference_client: Path, platform_gateway: Any
) -> None:
    platform_gateway.inject_platform("stall", deployment="my-droid-absolute", seconds=STALL_S)
    platform_gateway.inject_platform("busy", deployment="my-echo", count=1000, retry_after_s=0.2)
    env = {k: v for k, v in os.environ.items() if not k.startswith("SEQUENCES_")}
    env.update(PYTHONPATH=str(reference_client), SEQUENCES_API_KEY=platform_gateway.platform_key,
               SEQUENCES_BASE_URL=platform_gateway.url)
    run = subprocess.run(
        [sys.executable, "-c", _SCRIPT, str(reference_client), FRAME_16_9],
        env=env, cwd=str(reference_client), capture_output=True, text=True, timeout=120,
    )
    platform_gateway.clear_faults()
    assert run.returncode == 0, run.stderr[-3000:]
    seen: Dict[str, Any] = json.loads(run.stdout.strip().splitlines()[-1])
    assert seen["ready"] is True
    assert seen["seq"] == [0, 1]
    assert seen["actions"] == ["float32", [15, 8]] and seen["finite"]
    assert seen["labelled"] is True
    labels = httpx.get(f"{platform_gateway.url}/_control/platform/labels", trust_env=False).json()
    assert labels == {f"my-pi05/{seen['episode']}": {"success": True, "notes": "cup lifted"}}
    assert seen["interrupt"] == "Interrupted"
    assert seen["bad_key"] == ["AuthError", 401, "unauthenticated"]
    assert seen["robot_key"] == ["PermissionDenied", 403, "forbidden"]
    assert seen["unknown"] == ["NotFound", 404, "not_found"]
    # Waited out within timeout_s, then raised as its own Unavailable with the 429 it met.
    assert seen["busy"][:2] == ["Unavailable", 429]
