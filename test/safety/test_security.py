"""Security: the API key stays secret, plain http leaves the machine only when allowed, TLS is
verified by default, and the gateway serves loopback (and its control endpoints loopback only)
unless told otherwise."""

from __future__ import annotations

import asyncio
import logging
import queue
import secrets
import subprocess
import sys
import threading
import warnings
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import httpx
import pytest
from support.gateway_fixture import run_gateway
from support.policy_support import Robot, make_observation

import sequence_ai
from sequence_ai import SequencesError, Unavailable
from sequence_ai_gateway import DEFAULT_HOST
from sequence_ai_gateway.__main__ import build_parser
from sequence_ai_gateway.__main__ import main as gateway_main

# Faults whose error text is most likely to echo a request: auth refusals, server errors,
# broken transports and unparseable bodies.
FAULTS = [
    ("status", {"status": 401}),
    ("status", {"status": 402}),
    ("status", {"status": 500}),
    ("status", {"status": 503}),
    ("reset", {}),
    ("malformed", {}),
    ("nan", {}),
]


def _fresh_key(label: str) -> str:
    return f"seq_{label}_{secrets.token_hex(12)}"


class Collected:
    """Every string the client produced during a test: errors, reprs, outcomes, warnings."""

    def __init__(self) -> None:
        self.texts: list[str] = []

    def error(self, exc: BaseException) -> None:
        self.texts += [str(exc), repr(exc), repr(getattr(exc, "outcome", None)),
                       str(getattr(exc, "body", "")), repr(exc.__cause__), repr(exc.__context__)]

    def leaks(self, *secrets_: str) -> list[str]:
        return [text for text in self.texts for s in secrets_ if s in text]


def _run_with_fault(policy: sequence_ai.Policy, gw: Any, fault: str, options: dict[str, Any],
                    collected: Collected) -> None:
    robot = Robot()
    injected = []

    def on_chunk(prediction: Any) -> None:
        collected.texts.append(repr(prediction))
        if not injected:
            injected.append(True)
            gw.inject(fault, **options)

    callbacks = robot.callbacks()
    callbacks["on_chunk"] = on_chunk
    try:
        outcome = policy.run(robot.observe, robot.act, max_actions=200, max_seconds=30.0,
                             **callbacks)
        collected.texts.append(repr(outcome))
    except SequencesError as exc:
        collected.error(exc)


@pytest.mark.slow  # over half a second of wall time
def test_the_key_appears_in_no_client_output(
    capfd: pytest.CaptureFixture[str], caplog: pytest.LogCaptureFixture
) -> None:
    key, broke = _fresh_key("secret"), _fresh_key("broke")
    caplog.set_level(logging.DEBUG)
    collected = Collected()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with run_gateway(api_keys=[key], broke_keys=[broke]) as gw:
            for api_key in (key, broke):
                with sequence_ai.connect("pi05-droid", api_key=api_key,
                                         base_url=gw.url) as policy:
                    collected.texts += [repr(policy), str(policy)]
                    for fault, options in FAULTS:
                        _run_with_fault(policy, gw, fault, options, collected)
                    try:
                        collected.texts.append(repr(policy.predict(make_observation())))
                    except SequencesError as exc:
                        collected.error(exc)
            gw.kill()
            with sequence_ai.connect("pi05-droid", api_key=key, base_url=gw.url) as policy:
                with pytest.raises(Unavailable) as refused:
                    policy.predict(make_observation())
                collected.error(refused.value)
            # A key the service does not know at all, and one sent over unverified TLS.
            with run_gateway(tls=True) as tls_gw:
                with sequence_ai.connect("pi05-droid", api_key=key,
                                         base_url=tls_gw.url) as policy:
                    with pytest.raises(Unavailable) as untrusted:
                        policy.predict(make_observation())
                    collected.error(untrusted.value)
                with sequence_ai.connect("pi05-droid", api_key=key, base_url=tls_gw.url,
                                         verify=tls_gw.ca_bundle) as policy:
                    with pytest.raises(sequence_ai.AuthError) as unknown:
                        policy.predict(make_observation())
                    collected.error(unknown.value)
    collected.texts += [str(w.message) for w in caught]
    collected.texts += [r.getMessage() for r in caplog.records]
    captured = capfd.readouterr()
    collected.texts += [captured.out, captured.err]

    assert len(collected.texts) > 40
    assert collected.leaks(key, broke) == []


@pytest.mark.parametrize("url", [
    "http://example.com", "http://api.generalsequences.com", "http://10.0.0.5:8787",
    "http://192.168.1.20", "http://0.0.0.0:8787", "http://[2001:db8::1]:8787",
    "http://127.0.0.1.nip.io", "http://localhost.example.com",
])
def test_plain_http_to_another_host_is_refused_unless_allowed(url: str) -> None:
    with pytest.raises(ValueError, match="base_url"):
        sequence_ai.connect("pi05-droid", api_key="k", base_url=url)
    with pytest.raises(ValueError, match="base_url"):
        sequence_ai.models(base_url=url)
    # Allowed explicitly: constructed, and still nothing is sent until it is used.
    sequence_ai.connect("pi05-droid", api_key="k", base_url=url, allow_insecure=True).close()


@pytest.mark.parametrize("url", ["http://127.0.0.1:9", "http://localhost:9", "http://[::1]:9",
                                 "https://example.com"])
def test_loopback_http_and_any_https_are_accepted(url: str) -> None:
    sequence_ai.connect("pi05-droid", api_key="k", base_url=url).close()


def test_tls_is_verified_by_default() -> None:
    with run_gateway(tls=True) as gw:
        assert urlsplit(gw.url).scheme == "https" and gw.ca_bundle
        with sequence_ai.connect("pi05-droid", api_key=gw.api_key, base_url=gw.url) as policy:
            with pytest.raises(Unavailable, match="(?i)certificate|ssl"):
                policy.predict(make_observation())
            with pytest.raises(Unavailable, match="(?i)certificate|ssl"):
                policy.ready()
        with pytest.raises(Unavailable, match="(?i)certificate|ssl"):
            sequence_ai.models(base_url=gw.url)
        acts = gw.counters()["requests"]["act"]
        assert acts == 0
        with sequence_ai.connect("pi05-droid", api_key=gw.api_key, base_url=gw.url,
                                 verify=gw.ca_bundle) as policy:
            assert len(policy.predict(make_observation()).action_chunk) > 0


@pytest.mark.slow
def test_the_gateway_binds_loopback_by_default() -> None:
    assert DEFAULT_HOST == "127.0.0.1"
    assert build_parser().parse_args([]).host == DEFAULT_HOST
    command = [sys.executable, "-m", "sequence_ai_gateway", "--port", "0", "--scale", "0",
               "--log-level", "warning"]
    process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                               text=True)
    lines: queue.Queue[str] = queue.Queue()
    reader = threading.Thread(target=lambda: [lines.put(line) for line in process.stdout],
                              daemon=True)
    reader.start()
    try:
        url = ""
        while not url:
            line = lines.get(timeout=60)
            if line.startswith("SEQUENCES_BASE_URL="):
                url = line.strip().split("=", 1)[1]
        assert urlsplit(url).hostname == "127.0.0.1"
        assert httpx.get(url + "/v1/health", trust_env=False).status_code == 200
    finally:
        process.terminate()
        process.wait(timeout=30)
        reader.join(timeout=30)


@pytest.mark.parametrize("host", ["0.0.0.0", "192.0.2.10", "::", "example.com"])
def test_the_gateway_refuses_a_remote_address_without_allow_remote(
    host: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert gateway_main(["--host", host, "--port", "0"]) == 2
    err = capsys.readouterr().err
    assert host in err and "--allow-remote" in err


def _control_calls(client_ip: str) -> list[int]:
    from sequence_ai_gateway.http.app import create_app
    from sequence_ai_gateway.service.state import Gateway

    app = create_app(Gateway(scale=0.0))

    async def calls() -> list[int]:
        transport = httpx.ASGITransport(app=app, client=(client_ip, 40000))
        async with httpx.AsyncClient(transport=transport, base_url="http://gateway") as client:
            answers = [
                await client.post("/_control/faults", json={"fault": "reset"}),
                await client.get("/_control/counters"),
                await client.post("/_control/latency", json={"scale": 1.0}),
                await client.post("/_control/cold", json={"model": "pi05-droid"}),
                await client.delete("/_control/faults"),
            ]
        return [answer.status_code for answer in answers]

    return asyncio.run(calls())


def test_control_endpoints_answer_only_to_loopback_clients() -> None:
    assert _control_calls("127.0.0.1") == [200] * 5
    assert _control_calls("::1") == [200] * 5
    for remote in ("203.0.113.7", "10.1.2.3", "2001:db8::5"):
        assert _control_calls(remote) == [403] * 5, remote


def test_control_endpoints_are_not_in_the_public_schema() -> None:
    with run_gateway() as gw:
        schema = httpx.get(gw.url + "/openapi.json", trust_env=False).json()
    assert schema["paths"] and not [p for p in schema["paths"] if p.startswith("/_control")]


@pytest.mark.slow
def test_the_key_appears_in_no_node_output(
    safety_ros_context: Any, tmp_path: Any, capfd: pytest.CaptureFixture[str]
) -> None:
    from support.node_harness import node_parameters
    from support.ros_support import NodeSystem, key_file_for, wait_first_step
    from support.waiting import wait_for

    key = _fresh_key("node_secret")
    texts: list[str] = []
    with run_gateway(api_keys=[key]) as gw:
        nodes = NodeSystem(safety_ros_context, "safety_secret")
        try:
            _, arm = nodes.start(**node_parameters(gw.url, key_file_for(tmp_path, key)))
            arm.configure_and_activate()
            for fault, options in [(None, {})] + FAULTS:
                start = arm.command_count()
                handle, feedback = arm.send_goal("pick up the cup", 30.0, 0 if fault else 8)
                if fault is not None:
                    wait_first_step(arm, start)
                    gw.inject(fault, **options)
                _, result = arm.result(handle)
                texts += [result.reason, result.message, repr(result)]
                texts += [repr(f) for f in feedback]
            wait_for(lambda: len(arm.diagnostics) >= 2, what="diagnostics")
            texts += [repr(value) for value in arm.all_parameter_values().values()]
            texts.append(arm.log_text())
            texts += [repr(array) for array in list(arm.diagnostics)]
        finally:
            nodes.close()
    captured = capfd.readouterr()
    texts += [captured.out, captured.err]

    assert any("raised:AuthError" in text for text in texts)
    assert [text for text in texts if key in text] == []


@pytest.mark.parametrize("where", ["plain_http_remote", "untrusted_tls"])
def test_the_node_refuses_an_unsafe_service_address(
    safety_ros_context: Any, tmp_path: Any, capfd: pytest.CaptureFixture[str], where: str
) -> None:
    from lifecycle_msgs.msg import Transition
    from support.node_harness import node_parameters
    from support.ros_support import NodeSystem, key_file_for

    with run_gateway(tls=where == "untrusted_tls") as gw:
        url = "http://192.0.2.1:8787" if where == "plain_http_remote" else gw.url
        nodes = NodeSystem(safety_ros_context, "safety_address")
        try:
            _, arm = nodes.start(**node_parameters(url, key_file_for(tmp_path, gw.api_key)))
            assert not arm.transition(Transition.TRANSITION_CONFIGURE)
            assert arm.state() == "unconfigured"
        finally:
            nodes.close()
        assert gw.counters()["requests"]["act"] == 0
    err = capfd.readouterr().err
    expected = "base_url" if where == "plain_http_remote" else "certificate"
    assert "configure failed" in err and expected in err.lower(), err[-2000:]


@pytest.mark.parametrize("mode", [0o640, 0o604, 0o620, 0o644])
def test_a_key_file_others_may_access_is_refused_at_configure(
    safety_ros_context: Any, tmp_path: Any, capfd: pytest.CaptureFixture[str], mode: int
) -> None:
    """As ssh refuses a private key others can read: configure fails and says how to fix it."""
    from lifecycle_msgs.msg import Transition
    from support.node_harness import node_parameters
    from support.ros_support import NodeSystem, key_file_for

    with run_gateway() as gw:
        key_file = key_file_for(tmp_path, gw.api_key)
        Path(key_file).chmod(mode)
        nodes = NodeSystem(safety_ros_context, "safety_key_mode")
        try:
            _, arm = nodes.start(**node_parameters(gw.url, key_file))
            assert not arm.transition(Transition.TRANSITION_CONFIGURE)
            assert arm.state() == "unconfigured"
            Path(key_file).chmod(0o600)
            arm.configure_and_activate()
        finally:
            nodes.close()
    err = capfd.readouterr().err
    assert "configure failed" in err and f"chmod 600 {key_file}" in err, err[-2000:]
    assert f"mode {mode:04o}" in err and gw.api_key not in err
