"""The evaluator under misuse, refused before anything starts: a malformed results.json, a
hostile or binary params file, an absurd --trials, --out a file. Pure Python (no ROS)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from dataclasses import fields
from pathlib import Path

import pytest

from sequence_ai_lab.evaluation import cli, results
from sequence_ai_lab.evaluation.conditions import (
    MAX_OVERLAY_BYTES,
    ConditionError,
    parse_condition,
)

GOOD_TRIAL = {"index": 0, "arm": "a", "condition": "a", "time_mode": "realtime", "seed": 0,
              "success": True, "reason": "succeeded", "judge": "world"}


def _evaluate(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str]:
    try:
        code = cli.main(list(argv))
    except SystemExit as exc:  # argparse's refusals
        code = int(exc.code or 0)
    err = capsys.readouterr().err.strip()
    return code, err.splitlines()[-1] if err else ""


@pytest.mark.parametrize(
    ("document", "match"),
    [
        ([1, 2], "a JSON list; expected an object"),
        (7, "a JSON int; expected an object"),
        ({"format": results.FORMAT, "trials": []}, "settings missing; expected an object"),
        ({"format": results.FORMAT, "settings": {}}, "trials missing; expected a list"),
        ({"format": results.FORMAT, "settings": {}, "trials": [3]},
         "trial 0 is a int; expected an object"),
        ({"format": results.FORMAT, "settings": {}, "trials": [{"index": 0}]},
         "missing fields"),
        ({"format": results.FORMAT, "settings": {}, "trials": [GOOD_TRIAL | {"seed": "x"}]},
         "trial 0 field seed = 'x'; expected int"),
        ({"format": results.FORMAT, "settings": {}, "trials": [GOOD_TRIAL | {"success": 1}]},
         "field success = 1; expected bool"),
    ],
)
def test_a_malformed_results_file_is_one_line_and_exit_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], document: object, match: str,
) -> None:
    (tmp_path / results.RESULTS_FILE).write_text(json.dumps(document), encoding="utf-8")
    with pytest.raises(results.ResultsError, match=match):
        results.load(tmp_path)
    code, line = _evaluate(capsys, "--out", str(tmp_path), "--report-only")
    assert code == 2 and match in line


def test_every_trial_field_has_a_checked_type() -> None:
    assert set(results._FIELD_TYPES) == {f.name for f in fields(results.TrialResult)}
    loaded = results._trial(Path("r.json"), 0, GOOD_TRIAL | {"elapsed_s": 3})
    assert loaded.elapsed_s == 3


def test_trials_out_and_params_are_checked_before_anything_starts(
    tmp_path: Path, capsys: pytest.CaptureFixture[str],
) -> None:
    code, line = _evaluate(capsys, "--out", str(tmp_path), "--trials", "1000000000")
    assert code == 2 and f"expected 1 to {cli.MAX_TRIALS}" in line
    a_file = tmp_path / "results"
    a_file.write_text("x", encoding="utf-8")
    code, line = _evaluate(capsys, "--out", str(a_file))
    assert code == 2 and "is a file; expected a folder" in line
    binary = tmp_path / "binary.yaml"
    binary.write_bytes(b"\x89PNG\r\n\x1a\n\xff\xfe\x00")
    code, line = _evaluate(capsys, "--out", str(tmp_path / "eval"),
                           "--condition", f"b=params:{binary}")
    assert code == 2 and "not UTF-8 text" in line
    assert not (tmp_path / "eval").exists()


def test_an_alias_bomb_is_refused_unexpanded(tmp_path: Path) -> None:
    lines = ['a0: &a0 ["x","x","x","x","x","x","x","x","x","x","x","x"]']
    lines += [f"a{i}: &a{i} [" + ",".join([f"*a{i - 1}"] * 12) + "]" for i in range(1, 9)]
    bomb = tmp_path / "bomb.yaml"
    bomb.write_text("\n".join(lines) + "\n", encoding="utf-8")
    with pytest.raises(ConditionError, match="anchor or alias \\(line 1\\)"):
        parse_condition(f"b=params:{bomb}")


@pytest.mark.parametrize(
    ("text", "match"),
    [
        ("a:\n" + "".join(" " * i + f"k{i}:\n" for i in range(1, 12)) + " " * 12 + "v: 1\n",
         "nests deeper than 8 levels"),
        ("x: " + "1" * (MAX_OVERLAY_BYTES + 1) + "\n", f"more than {MAX_OVERLAY_BYTES} bytes"),
    ],
)
def test_deep_or_large_overlays_are_refused(tmp_path: Path, text: str, match: str) -> None:
    overlay = tmp_path / "o.yaml"
    overlay.write_text(text, encoding="utf-8")
    with pytest.raises(ConditionError, match=match):
        parse_condition(f"o=params:{overlay}")


def test_a_fifo_params_file_is_refused_never_waited_on(tmp_path: Path) -> None:
    fifo = tmp_path / "fifo.yaml"
    os.mkfifo(fifo)
    with pytest.raises(ConditionError, match="not a regular file"):
        parse_condition(f"f=params:{fifo}")


def test_a_second_evaluation_of_one_out_folder_is_refused_naming_the_first(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch,
) -> None:
    holder = subprocess.Popen(
        [sys.executable, "-c", "import sys; from pathlib import Path; "
         "from sequence_ai_lab.evaluation.claims import claim_folder; "
         "claim_folder(Path(sys.argv[1])); print('held', flush=True); sys.stdin.read()",
         str(tmp_path)],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline() == "held\n"
        ran: list[str] = []
        monkeypatch.setattr(cli, "_run", lambda *_: ran.append("run"))
        monkeypatch.setattr(cli.signal, "signal", lambda *_: None)  # pytest keeps its SIGTERM
        code, line = _evaluate(capsys, "--out", str(tmp_path))
        assert code == 2 and f"--out {tmp_path}: evaluation pid {holder.pid} holds it" in line
        assert ran == []
    finally:
        assert holder.stdin is not None
        holder.stdin.close()
        holder.wait(10)
    # Its end (however it ends) frees the folder: the same command now runs.
    code, _ = _evaluate(capsys, "--out", str(tmp_path))
    assert code == 0 and ran == ["run"]
