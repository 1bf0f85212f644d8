"""The sequence-ai command: models table and doctor, against the local gateway."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from sequence_ai.cli import main

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


@pytest.fixture
def env(monkeypatch, no_env):
    """The test's monkeypatch, starting with no SEQUENCES_* variables set."""
    return monkeypatch


def run(capsys, *argv):
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_models_prints_a_table_of_the_catalogue(shared_gateway, env, capsys):
    code, out, _ = run(capsys, "models", "--base-url", shared_gateway.url)
    lines = out.splitlines()
    assert code == 0
    assert lines[0].split()[:3] == ["MODEL", "ENDPOINT", "ACTION"]
    pi05 = next(line for line in lines if line.startswith("pi05-droid"))
    assert pi05.split() == [
        "pi05-droid", "act", "joint_delta", "8", "8", "(7+1)", "15", "15", "8",
        "exterior_1,wrist_left",
    ]  # fmt: skip
    assert any(line.startswith("cosmos3-edge-policy-droid") for line in lines)


def test_models_uses_the_environment_base_url(shared_gateway, env, capsys):
    env.setenv("SEQUENCES_BASE_URL", shared_gateway.url)
    code, out, _ = run(capsys, "models", "--endpoint", "act")
    assert code == 0 and "pi05-droid" in out


def test_models_reports_an_unreachable_gateway_without_a_traceback(env, capsys):
    code, out, err = run(capsys, "models", "--base-url", "http://127.0.0.1:9")
    assert code == 1 and out == ""
    assert "could not reach" in err and "Traceback" not in err


def test_doctor_passes_with_a_valid_key(shared_gateway, env, capsys):
    env.setenv("SEQUENCES_API_KEY", shared_gateway.api_key)
    env.setenv("SEQUENCES_BASE_URL", shared_gateway.url)
    code, out, _ = run(capsys, "doctor", "--samples", "2")
    assert code == 0, out
    assert "from SEQUENCES_BASE_URL" in out
    assert "probe answered 404" in out
    assert "new connection" in out and "reused" in out
    assert shared_gateway.api_key not in out
    assert out.rstrip().endswith("no problems found")


@pytest.mark.parametrize(
    ("key", "expected"),
    [("seq_live_wrong_key_abcdef", "refused the API key (401)"), (None, "no credit (402)")],
)
def test_doctor_fails_on_a_refused_key_or_no_credit(shared_gateway, env, capsys, key, expected):
    key = key or shared_gateway.broke_key
    env.setenv("SEQUENCES_API_KEY", key)
    code, out, _ = run(capsys, "doctor", "--base-url", shared_gateway.url, "--samples", "1")
    assert code == 1
    assert expected in out and key not in out


def test_doctor_fails_without_a_key_but_still_checks_the_gateway(shared_gateway, env, capsys):
    code, out, _ = run(capsys, "doctor", "--base-url", shared_gateway.url, "--samples", "1")
    assert code == 1
    assert "SEQUENCES_API_KEY" in out and "/v1/health answered" in out


def test_doctor_fails_when_the_gateway_is_unreachable(env, capsys):
    env.setenv("SEQUENCES_API_KEY", "k")
    code, out, _ = run(capsys, "doctor", "--base-url", "http://127.0.0.1:9")
    assert code == 1 and "could not reach" in out


def test_doctor_refuses_plain_http_to_another_host(env, capsys):
    code, out, _ = run(capsys, "doctor", "--base-url", "http://gateway.example")
    assert code == 1 and "allow_insecure" in out


def test_doctor_over_tls_with_a_ca_bundle(gateway_factory, env, capsys):
    gw = gateway_factory(tls=True)
    env.setenv("SEQUENCES_API_KEY", gw.api_key)
    args = ("doctor", "--base-url", gw.url, "--ca-bundle", gw.ca_bundle, "--samples", "1")
    code, out, _ = run(capsys, *args)
    assert code == 0, out


@pytest.mark.slow
def test_the_module_runs_as_a_program(shared_gateway, env):
    result = subprocess.run(
        [sys.executable, "-m", "sequence_ai.cli", "models", "--base-url", shared_gateway.url],
        capture_output=True,
        text=True,
        cwd=REPO,
        env=dict(os.environ, PYTHONPATH=REPO),
        timeout=120,
    )
    assert result.returncode == 0, result.stderr
    assert "pi05-droid" in result.stdout


def test_a_subcommand_is_required(capsys):
    with pytest.raises(SystemExit) as info:
        main([])
    assert info.value.code == 2
