"""``python -m sequence_ai_gateway``: start lines, keys, remote bind, TLS, plug-ins."""

from __future__ import annotations

import os
import ssl
import subprocess
import sys
import threading
from typing import Dict, Iterator, List, Optional

import httpx
import pytest

pytest.importorskip("fastapi")

from support.gateway_support import act_body  # noqa: E402
from support.waiting import wait_for  # noqa: E402

from sequence_ai_gateway.__main__ import main, resolve_keys  # noqa: E402

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


class Served:
    def __init__(self, proc: subprocess.Popen, lines: Dict[str, str]) -> None:
        self.proc = proc
        self.lines = lines
        self.url = lines["SEQUENCES_BASE_URL"]


@pytest.fixture
def serve() -> Iterator:
    started: List[subprocess.Popen] = []

    def start(*args: str, env: Optional[Dict[str, str]] = None) -> Served:
        full_env = dict(os.environ, PYTHONPATH=REPO, **(env or {}))
        proc = subprocess.Popen(
            [sys.executable, "-m", "sequence_ai_gateway", "--port", "0", "--log-level", "warning",
             *args],
            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, env=full_env, cwd=REPO,
        )
        started.append(proc)
        lines: Dict[str, str] = {}
        for line in proc.stdout:
            key, sep, value = line.partition("=")
            if sep:
                lines[key] = value.strip()
            if key == "SEQUENCES_BASE_URL":
                break
        # Keep draining stdout so the server never blocks on a full pipe.
        threading.Thread(target=proc.stdout.read, daemon=True).start()
        return Served(proc, lines)

    yield start
    for proc in started:
        proc.terminate()
        proc.wait(timeout=30)


def wait_healthy(url: str, verify=True) -> None:
    with httpx.Client(verify=verify, trust_env=False) as c:

        def healthy() -> bool:
            try:
                return c.get(url + "/v1/health").status_code == 200
            except httpx.TransportError:
                return False  # not listening yet

        wait_for(healthy, f"{url} to become healthy")


@pytest.mark.slow
def test_serves_the_catalogue_with_the_development_key_printed(serve):
    served = serve()
    assert served.url.startswith("http://127.0.0.1:")
    assert served.lines["SEQUENCES_API_KEY"] == "seq_dev_local_gateway"
    wait_healthy(served.url)
    assert len(httpx.get(served.url + "/v1/models", trust_env=False).json()["data"]) == 8
    headers = {"Authorization": "Bearer seq_dev_local_gateway"}
    response = httpx.post(served.url + "/v1/act", json=act_body(seed=1), headers=headers,
                          trust_env=False)
    assert response.status_code == 200


@pytest.mark.slow
def test_keys_from_flags_and_environment(serve):
    served = serve("--api-key", "seq_live_one", "--broke-key", "seq_live_empty",
                   env={"SEQUENCES_GATEWAY_KEYS": "ignored_when_flags_given"})
    assert "SEQUENCES_API_KEY" not in served.lines
    wait_healthy(served.url)
    for key, status in (("seq_live_one", 200), ("seq_live_empty", 402),
                        ("ignored_when_flags_given", 401)):
        response = httpx.post(served.url + "/v1/act", json=act_body(),
                              headers={"Authorization": f"Bearer {key}"}, trust_env=False)
        assert response.status_code == status, key


def test_resolve_keys_reads_the_comma_separated_environment(monkeypatch):
    monkeypatch.setenv("SEQUENCES_GATEWAY_KEYS", " a, b ,,c")
    assert resolve_keys([]) == ["a", "b", "c"]
    assert resolve_keys(["x"]) == ["x"]
    monkeypatch.delenv("SEQUENCES_GATEWAY_KEYS")
    assert resolve_keys([]) is None


def test_non_loopback_bind_needs_allow_remote(capsys):
    assert main(["--host", "0.0.0.0", "--port", "0"]) == 2
    assert "--allow-remote" in capsys.readouterr().err


def test_bad_port_is_refused(capsys):
    assert main(["--port", "70000"]) == 2
    assert "--port" in capsys.readouterr().err


@pytest.mark.slow
def test_tls_prints_a_ca_bundle_that_verifies(serve):
    served = serve("--tls")
    assert served.url.startswith("https://")
    context = ssl.create_default_context(cafile=served.lines["SEQUENCES_CA_BUNDLE"])
    wait_healthy(served.url, verify=context)


@pytest.mark.slow
def test_plug_in_policy_is_served_beside_the_simulated_models(serve):
    served = serve("--policy", "sequence_ai_gateway.examples.hold_still:make_policy")
    wait_healthy(served.url)
    rows = httpx.get(served.url + "/v1/models", trust_env=False).json()["data"]
    ids = [r["id"] for r in rows]
    assert "accounts/sequences/models/my-lab-hold-still" in ids and len(ids) == 9
    body = act_body(views=["exterior_1"])
    body["model"] = "accounts/sequences/models/my-lab-hold-still"
    response = httpx.post(served.url + "/v1/act", json=body, trust_env=False,
                          headers={"Authorization": "Bearer seq_dev_local_gateway"})
    assert response.status_code == 200
    joints = body["observation"]["proprioception"]["joint_positions"]
    assert response.json()["action_chunk"]["steps"][0]["values"] == joints + [0.0]


def test_bad_plug_in_exits_with_a_message(capsys):
    assert main(["--port", "0", "--policy", "nowhere.at_all:make"]) == 2
    assert "nowhere" in capsys.readouterr().err
