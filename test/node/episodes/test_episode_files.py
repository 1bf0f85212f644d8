"""Episode files on disk: pruning removes only the recorder's own files (a user's bag survives,
whatever its name), the tools answer every unreadable entry with one line on stderr and exit 1,
and a killed recording gets its MCAP summary (`episodes repair`, or the recorder's next start)
so that `mcap`'s reader and `rosbags` open it."""

from __future__ import annotations

import hashlib
import subprocess
import sys
from pathlib import Path

import pytest
from support.episode_files import (
    INSTRUCTION,
    KILLED_MESSAGES,
    bad_entries,
    killed_recording,
    opens_in_mcap_and_rosbags,
    start_recorder,
    users_bag,
    write_episode,
)

from sequence_ai_lab.episodes import reader
from sequence_ai_lab.episodes.tools import PROG, main
from sequence_ai_ros.episodes.folder import folder_id, prune, repair_unfinished

pytest.importorskip("rosbags")

MB = 1_000_000
BAD_PROBLEMS = {
    "missing": "no such file",
    "directory": "is a directory",
    "zero_bytes": "is empty (0 bytes)",
    "text": "is not an MCAP file",
    "magic_only": "holds only the MCAP magic",
    "corrupted_chunk": "is damaged: the chunk at byte",
    "fifo": "is a FIFO",
}


def _digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _said(err: str) -> list[str]:
    """The tool's lines on stderr (a node of another test may log there too)."""
    return [line for line in err.splitlines() if line.startswith(PROG)]


# ----- pruning -----


def test_pruning_removes_only_the_recorders_own_oldest_files(tmp_path: Path) -> None:
    mine = folder_id(tmp_path)
    precious = users_bag(tmp_path / "0000_my_precious_bag.mcap", 2 * MB, like_episode=True)
    # An episode named like the recorder's, recorded into another folder and copied here.
    copied = write_episode(
        tmp_path / "20260101T000000_000000Z_m_copied.mcap", "b" * 32, pad_bytes=MB
    )
    # The recorder's own, but written before it named itself in its files.
    unnamed = write_episode(tmp_path / "20260101T000001_000000Z_m_unnamed.mcap", None, pad_bytes=MB)
    own = [
        write_episode(tmp_path / f"2026120{k}T000000_000000Z_m_goal.mcap", mine, pad_bytes=400_000)
        for k in range(1, 6)
    ]
    (tmp_path / "notes.txt").write_bytes(b"x" * 2 * MB)
    foreign = {p: _digest(p) for p in (precious, copied, unnamed)}

    removed = prune(tmp_path, max_mb=1.0, recorder=mine, keep={own[0]})

    assert removed == own[1:4]
    assert sorted(p.name for p in tmp_path.glob("*.mcap")) == sorted(
        p.name for p in (precious, copied, unnamed, own[0], own[4])
    )
    assert {p: _digest(p) for p in foreign} == foreign
    assert prune(tmp_path, max_mb=0.0, recorder=mine) == []


def test_pruning_leaves_a_file_being_written_and_waits_for_no_other_pruner(
    tmp_path: Path,
) -> None:
    import fcntl
    import os

    from sequence_ai_ros.episodes.folder import ID_FILE

    mine = folder_id(tmp_path)
    old = write_episode(tmp_path / "20260101T000000_000000Z_m_old.mcap", mine, pad_bytes=MB)
    with open(old, "rb") as held:
        # As a writer holds its file: pruning does not remove it.
        fcntl.flock(held.fileno(), fcntl.LOCK_EX)
        assert prune(tmp_path, max_mb=0.1, recorder=mine) == []
    # Another process prunes the folder (holds its lock): this pruner skips, never waits.
    fd = os.open(tmp_path / ID_FILE, os.O_RDWR)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        assert prune(tmp_path, max_mb=0.1, recorder=mine) == []
    finally:
        os.close(fd)
    assert prune(tmp_path, max_mb=0.1, recorder=mine) == [old]


def test_a_folder_keeps_its_recorder_id_and_a_writer_never_overwrites_a_file(
    tmp_path: Path,
) -> None:
    assert folder_id(tmp_path) == folder_id(tmp_path)
    (tmp_path / "sub").mkdir()
    assert folder_id(tmp_path / "sub") != folder_id(tmp_path)
    precious = users_bag(tmp_path / "20260101T000000_000000Z_m_goal.mcap", 1000)
    before = _digest(precious)
    with pytest.raises(FileExistsError):
        write_episode(precious, folder_id(tmp_path))
    assert _digest(precious) == before


# ----- the tools on unreadable entries -----


@pytest.mark.parametrize("kind", sorted(BAD_PROBLEMS))
@pytest.mark.parametrize("verb", ["show", "plot"])
def test_show_and_plot_give_one_line_naming_the_file_and_exit_1(
    kind: str, verb: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = bad_entries(tmp_path, folder_id(tmp_path))[kind]
    assert main([verb, str(path)]) == 1
    captured = capsys.readouterr()
    assert captured.out == ""
    (line,) = _said(captured.err)
    assert str(path) in line and BAD_PROBLEMS[kind] in line, line


def test_list_prints_the_good_episodes_and_a_line_per_bad_entry(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    mine = folder_id(tmp_path)
    bad = bad_entries(tmp_path, mine)
    good = [
        write_episode(tmp_path / f"2026120{k}T000000_000000Z_m_goal.mcap", mine) for k in (1, 2)
    ]
    precious = users_bag(tmp_path / "0000_my_precious_bag.mcap", 1000)

    assert main(["list", str(tmp_path)]) == 1
    captured = capsys.readouterr()
    printed = captured.out.splitlines()
    assert [line.rsplit("  ", 1)[-1] for line in printed] == [p.name for p in good]
    assert all(INSTRUCTION in line and "succeeded completed" in line for line in printed)
    complaints = _said(captured.err)
    expected = {p for k, p in bad.items() if k != "missing"} | {precious}
    assert len(complaints) == len(expected)
    assert {p for p in expected if any(str(p) in line for line in complaints)} == expected
    assert any("without a sequence_ai.episode record" in line for line in complaints)

    assert main(["list", str(tmp_path / "nowhere")]) == 1
    assert "no such folder" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("field_name", "value"),
    [("started_ns", "abc"), ("started_ns", "9" * 30), ("elapsed_s", "nan"),
     ("state_names", "{not json"), ("parameters", "[1, 2]")],
)
def test_list_names_an_episode_whose_records_hold_nonsense_and_lists_the_rest(
    field_name: str, value: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Issue 41 hole 12: a record the tools compute with (a start, an elapsed time) that holds
    nonsense is one line naming the field, not a traceback that stops the listing."""
    mine = folder_id(tmp_path)
    good = [write_episode(tmp_path / f"{k}_good.mcap", mine) for k in (1, 3)]
    override = {field_name: value}
    odd = tmp_path / "2_odd.mcap"
    if field_name == "elapsed_s":
        write_episode(odd, mine, summary=override)
    else:
        write_episode(odd, mine, record=override)

    assert main(["list", str(tmp_path)]) == 1
    captured = capsys.readouterr()
    assert [line.rsplit("  ", 1)[-1] for line in captured.out.splitlines()] == [
        p.name for p in good
    ]
    (line,) = _said(captured.err)
    assert str(odd) in line and field_name in line and "expected" in line, line


@pytest.mark.slow
def test_the_command_line_exits_1_with_one_line_and_no_traceback(tmp_path: Path) -> None:
    (tmp_path / "x.mcap").mkdir()
    done = subprocess.run(
        [sys.executable, "-m", "sequence_ai_lab.episodes", "show", str(tmp_path / "x.mcap")],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 1 and done.stdout == ""
    assert done.stderr.splitlines() == [
        f"python -m sequence_ai_lab.episodes: {tmp_path / 'x.mcap'}: is a directory, not an "
        "episode file"
    ]


# ----- a killed recording -----


@pytest.mark.slow
def test_repair_gives_a_killed_recording_its_summary_in_place(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    mine = folder_id(tmp_path)

    def refused_while_written(path: Path) -> None:
        assert main(["repair", str(path)]) == 1
        assert "is being written" in capsys.readouterr().err

    path = killed_recording(
        tmp_path / "20261201T000000_000000Z_m_goal.mcap", mine, while_alive=refused_while_written
    )
    before = reader.read(path)
    assert before.cut and not before.finished and len(before.messages) == KILLED_MESSAGES

    assert main(["repair", str(path)]) == 0
    assert f"{KILLED_MESSAGES} messages kept" in capsys.readouterr().out
    after = reader.read(path)
    assert after.finished and after.cut and after.repaired["messages"] == str(KILLED_MESSAGES)
    assert [(m.topic, m.log_time_ns, m.message) for m in after.messages] == [
        (m.topic, m.log_time_ns, m.message) for m in before.messages
    ]
    assert opens_in_mcap_and_rosbags(path) == KILLED_MESSAGES
    # Still the recorder's own (pruned like any other), no file left beside it.
    assert prune(tmp_path, max_mb=1e-6, recorder=mine) == [path]
    assert sorted(p.name for p in tmp_path.iterdir()) == [".sequence_ai_recorder"]

    assert main(["show", str(write_episode(path, mine))]) == 0
    capsys.readouterr()
    assert main(["repair", str(path)]) == 0
    assert "nothing to repair" in capsys.readouterr().out


@pytest.mark.slow
def test_the_recorders_next_start_repairs_its_own_unfinished_files_only(tmp_path: Path) -> None:
    mine = folder_id(tmp_path)
    own = killed_recording(tmp_path / "20261201T000000_000000Z_m_goal.mcap", mine)
    theirs = killed_recording(tmp_path / "20261201T000001_000000Z_m_goal.mcap", "c" * 32)
    untouched = _digest(theirs)
    said: list[str] = []
    errors: list[str] = []
    start_recorder(tmp_path, said.append, errors.append).close(30.0)
    assert errors == [] and len(said) == 1 and own.name in said[0], said
    assert reader.read(own).finished and opens_in_mcap_and_rosbags(own) == KILLED_MESSAGES
    assert _digest(theirs) == untouched and not reader.read(theirs).finished
    assert repair_unfinished(tmp_path).repaired == []


@pytest.mark.slow
def test_without_rclpy_a_killed_recording_reads_once_repaired(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from sequence_ai_ros.episodes.files import EpisodeError
    from sequence_ai_ros.episodes.repair import repair

    path = killed_recording(tmp_path / "killed.mcap", folder_id(tmp_path))
    # As in the LeRobot export's environment: rosbags decodes, and needs the summary.
    monkeypatch.setitem(sys.modules, "rclpy.serialization", None)
    with pytest.raises(EpisodeError, match="repair"):
        reader.read(path)
    assert repair(path) is not None
    decoded = reader.read(path)
    assert [m.message.data for m in decoded.messages] == [str(k) for k in range(KILLED_MESSAGES)]
