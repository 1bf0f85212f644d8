"""joint_limits_file read with bounds (issue 33 items 1 and 2): what is not a small regular
file of plain YAML is refused, naming the file and why, and never raises anything else; the
node's LimitsFile reads a file again only when it changed and keeps the limits in force when
an edit breaks it."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from sequence_ai_ros.core.joint_limits import (
    MAX_DEPTH,
    MAX_FILE_BYTES,
    JointLimitsError,
    load_file,
)
from sequence_ai_ros.safety import joint_limits_file
from sequence_ai_ros.safety.joint_limits_file import LimitsFile, read_bounded

GOOD = "joint_limits:\n  a: {has_velocity_limits: true, max_velocity: 2.0}\n"
# A different size: the file's identity changes even within the clock's granularity.
FASTER = "joint_limits:\n  a: {has_velocity_limits: true, max_velocity: 30.0}\n"


def _write(tmp_path: Path, text: str, name: str = "limits.yaml") -> str:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return str(path)


@pytest.mark.parametrize(
    ("text", "words"),
    [
        ("joint_limits: &a\n  a: *a\n", "uses a YAML anchor or alias (line 1)"),
        # A billion laughs in mappings: without the refusal, walking it never ends.
        ("a: &a {x: 1, y: 1}\nb: &b {x: *a, y: *a}\nrobot: *b\n", "anchor or alias"),
        ("joint_limits: " + "[" * 5000 + "]" * 5000 + "\n", f"deeper than {MAX_DEPTH} levels"),
        (
            "joint_limits:\n  a: {min_position: 2.0, max_position: 1.0}\n",
            "joint_limits.a.min_position=2.0 is above joint_limits.a.max_position=1.0",
        ),
        (
            "joint_limits:\n  a: {has_position_limits: true, min_position: .inf, "
            "max_position: 1.0}\n",
            "joint_limits.a.min_position=inf is refused; expected a finite",
        ),
        ("joint_limits:\n  a: {max_velocity: " + "9" * 5000 + "}\n", "cannot be parsed"),
    ],
    ids=["self_reference", "alias_bomb", "deep", "min_over_max", "infinite", "huge_int"],
)
def test_a_file_of_bad_yaml_is_refused_naming_it(tmp_path: Path, text: str, words: str) -> None:
    path = _write(tmp_path, text)
    with pytest.raises(JointLimitsError) as raised:
        load_file(path)
    assert words in str(raised.value) and path in str(raised.value)


def test_what_is_not_a_small_regular_file_is_refused_unread(tmp_path: Path) -> None:
    fifo = tmp_path / "limits.fifo"
    os.mkfifo(fifo)
    # No writer ever opens it: a read that opened it blocking would never return.
    with pytest.raises(JointLimitsError, match="is a FIFO; expected a regular YAML file"):
        read_bounded(str(fifo), 5.0)
    with pytest.raises(JointLimitsError, match="is a directory"):
        read_bounded(str(tmp_path), 5.0)
    with pytest.raises(JointLimitsError, match="is a character device"):
        read_bounded("/dev/zero", 5.0)
    big = _write(tmp_path, "#" * (MAX_FILE_BYTES + 1), "big.yaml")
    with pytest.raises(JointLimitsError, match=f"expected at most {MAX_FILE_BYTES}"):
        read_bounded(big, 5.0)
    binary = tmp_path / "binary.yaml"
    binary.write_bytes(b"joint_limits: \xff\n")
    with pytest.raises(JointLimitsError, match="is not UTF-8"):
        read_bounded(str(binary), 5.0)


def test_a_watched_file_is_read_again_only_when_it_changed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    reads: list[str] = []
    real = joint_limits_file.read_file

    def counted(path: str) -> tuple[object, object]:
        reads.append(path)
        return real(path)

    monkeypatch.setattr(joint_limits_file, "read_file", counted)
    warnings: list[str] = []
    path = _write(tmp_path, GOOD)
    limits = LimitsFile(warnings.append, lambda: path)
    limits.load(5.0)
    assert limits.table_for(path)["a"]["max_velocity"] == 2.0 and len(reads) == 1
    # Unchanged: a stat, no read.
    assert limits._look(path) and len(reads) == 1
    _write(tmp_path, FASTER)
    limits._look(path)
    assert limits.table_for(path)["a"]["max_velocity"] == 30.0 and len(reads) == 2
    # A self-referencing edit: warned once, the limits in force kept, not read again.
    _write(tmp_path, "robot: &a\n  ros__parameters: *a\n")
    limits._look(path)
    limits._look(path)
    assert len(reads) == 3 and limits.table_for(path)["a"]["max_velocity"] == 30.0
    (warning,) = warnings
    assert "anchor or alias" in warning and "stay in force" in warning


def test_a_bad_file_fails_configure_and_a_bad_value_is_refused_when_set(tmp_path: Path) -> None:
    path = _write(tmp_path, "joint_limits:\n  a: {min_position: 2.0, max_position: 1.0}\n")
    limits = LimitsFile(lambda _text: None, lambda: path)
    limits.load(5.0)
    with pytest.raises(JointLimitsError, match="is above"):
        limits.table_for(path)
    fifo = tmp_path / "limits.fifo"
    os.mkfifo(fifo)
    problem = limits.check(str(fifo), 0.05)
    assert problem is not None and "is a FIFO" in problem
    good = _write(tmp_path, GOOD, "good.yaml")
    assert limits.check(good, 5.0) is None
    # Set: the next snapshot puts it in force.
    assert limits.table_for(good)["a"]["max_velocity"] == 2.0
