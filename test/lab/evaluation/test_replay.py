"""`episodes replay` refuses what it cannot replay faithfully, each with one line and no
traceback, before any request goes out (issue 41 holes 11 and 12)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from support.episode_files import users_bag, write_episode
from support.gateway_fixture import GatewayHandle

from sequence_ai_lab.episodes.tools import main
from sequence_ai_lab.evaluation.replay import MAX_IN_FLIGHT


def _replay(gateway: GatewayHandle, *args: str) -> list[str]:
    return ["replay", *args, "--model", "pi05-droid", "--base-url", gateway.url, "--no-plots"]


def _one_line(capsys: pytest.CaptureFixture[str]) -> str:
    captured = capsys.readouterr()
    assert captured.out == ""
    (line,) = captured.err.splitlines()
    assert "Traceback" not in line
    return line


def test_an_episode_whose_model_is_not_in_the_catalogue_is_refused_naming_why(
    gateway: GatewayHandle, tmp_path: Path, capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("SEQUENCES_API_KEY", gateway.api_key)
    known = write_episode(tmp_path / "1_known.mcap", None)
    renamed = write_episode(tmp_path / "2_renamed.mcap", None, record={"model": "my-own-pi05"})
    out = tmp_path / "out"

    assert main([*_replay(gateway, str(known), str(renamed)), "--out", str(out)]) == 2
    line = _one_line(capsys)
    assert str(renamed) in line and "'my-own-pi05'" in line and "catalogue" in line, line
    assert not out.exists()  # refused before anything was sent or written


@pytest.mark.parametrize("kind", ["users_bag", "fifo", "empty_files"])
def test_what_is_no_episode_is_one_line_and_exit_1(
    kind: str, gateway: GatewayHandle, tmp_path: Path, capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("SEQUENCES_API_KEY", gateway.api_key)
    given = tmp_path / "given"
    given.mkdir()
    if kind == "users_bag":
        named = users_bag(given / "bag.mcap", 100)
    elif kind == "fifo":
        named = given / "a_fifo.mcap"
        os.mkfifo(named)
    else:
        for k in range(3):
            (given / f"{k}.mcap").write_bytes(b"")
        named = given / "0.mcap"
    argument = given if kind == "empty_files" else named

    assert main([*_replay(gateway, str(argument)), "--out", str(tmp_path / "out")]) == 1
    assert str(named) in _one_line(capsys)


def test_out_a_file_and_in_flight_past_its_bound_are_refused_before_anything(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    episode = write_episode(tmp_path / "e.mcap", None)
    a_file = tmp_path / "a_file"
    a_file.write_text("mine\n", encoding="utf-8")
    # No gateway: both refusals come before the catalogue is asked.
    base = ["replay", str(episode), "--model", "pi05-droid", "--base-url", "http://127.0.0.1:9"]

    assert main([*base, "--out", str(a_file)]) == 2
    line = _one_line(capsys)
    assert f"--out {a_file}" in line and "expected a folder" in line, line
    assert a_file.read_text(encoding="utf-8") == "mine\n"

    for count in (0, MAX_IN_FLIGHT + 1, 100000):
        assert main([*base, "--out", str(tmp_path / "out"), "--in-flight", str(count)]) == 2
        line = _one_line(capsys)
        assert f"--in-flight {count}" in line and f"1 to {MAX_IN_FLIGHT}" in line, line
