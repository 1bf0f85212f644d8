"""A trial's verdict in its episode file: every record kept, the verdict added (or replaced),
read back by the episode reader, by rosbags (the LeRobot export's reader) and by `episodes`."""

from __future__ import annotations

from pathlib import Path

import pytest

pytest.importorskip("rclpy")

from std_msgs.msg import String  # noqa: E402

from sequence_ai_lab.episodes import reader  # noqa: E402
from sequence_ai_lab.episodes.export import EpisodeFrames, with_verdicts  # noqa: E402
from sequence_ai_lab.episodes.tools import list_line, show_text  # noqa: E402
from sequence_ai_lab.evaluation.labels import (  # noqa: E402
    UNJUDGED_DIR,
    label,
    set_aside_unjudged,
)
from sequence_ai_ros.episodes.writer import EpisodeWriter  # noqa: E402


def _episode(path: Path) -> Path:
    writer = EpisodeWriter(path, print)
    writer.metadata(reader.EPISODE_RECORD, {"topics": "/robot/sequence_ai/episode",
                                            "instruction": "pick up the cup",
                                            "model": "pi05-droid"})
    for k in range(20):
        writer.put("/robot/sequence_ai/episode/instruction", String(data=str(k)))
    writer.finish(lambda stats: {reader.SUMMARY_RECORD: {"messages": str(stats.written),
                                                         "reason": "timeout"}})
    assert writer.wait_closed(30.0)
    return path


def test_the_verdict_is_added_and_everything_else_kept(tmp_path: Path) -> None:
    path = _episode(tmp_path / "episode.mcap")
    before = reader.read(path)
    label(path, {"success": "false", "reason": "cup dropped", "judge": "world",
                 "condition": "default", "seed": "7"})
    label(path, {"success": "true", "reason": "succeeded at 4.2 s", "judge": "world",
                 "condition": "default", "seed": "7"})
    after = reader.read(path)
    assert not after.cut
    assert after.verdict["success"] == "true" and after.verdict["seed"] == "7"
    assert (after.episode, after.summary) == (before.episode, before.summary)
    assert [m.message.data for m in after.messages] == [str(k) for k in range(20)]
    assert [m.log_time_ns for m in after.messages] == [m.log_time_ns for m in before.messages]
    assert not list(tmp_path.glob("*.labelling"))
    assert "success (world, default, seed 7)" in list_line(after)
    assert "verdict      success (world, default, seed 7): succeeded at 4.2 s" in show_text(after)


def test_a_labelled_file_still_reads_without_rclpy(tmp_path: Path) -> None:
    from rosbags.highlevel import AnyReader

    path = _episode(tmp_path / "episode.mcap")
    label(path, {"success": "true"})
    with AnyReader([path]) as bag:
        texts = [bag.deserialize(raw, c.msgtype).data for c, _, raw in bag.messages()]
    assert texts == [str(k) for k in range(20)]


def test_a_killed_runs_unjudged_episodes_are_moved_out_of_the_dataset(tmp_path: Path) -> None:
    judged = _episode(tmp_path / "a.mcap")
    label(judged, {"success": "true", "arm": "default", "seed": "3", "judge": "world"})
    _episode(tmp_path / "b.mcap")  # the killed trial's: never labelled
    # Labelled, but killed before results.json took the trial: its (arm, seed) runs again.
    label(_episode(tmp_path / "c.mcap"), {"success": "false", "arm": "default", "seed": "4",
                                          "judge": "world"})
    (tmp_path / "a.mcap.labelling").write_bytes(b"half a copy")
    moved = set_aside_unjudged(tmp_path, {("default", 3)})
    assert moved == [tmp_path / UNJUDGED_DIR / "b.mcap", tmp_path / UNJUDGED_DIR / "c.mcap"]
    assert sorted(p.name for p in tmp_path.glob("*.mcap")) == ["a.mcap"]
    assert not list(tmp_path.glob("*.labelling"))
    assert reader.read(moved[0]).verdict == {}  # kept whole, for a look


def test_the_export_labels_what_it_can_and_names_what_it_leaves_out() -> None:
    def frames(success: bool | None) -> EpisodeFrames:
        return EpisodeFrames(fps=15.0, state_names=["j"], actions=[[0.0]], success=success)

    good, bad, unjudged = frames(True), frames(False), frames(None)
    played = [(Path("a.mcap"), good), (Path("b.mcap"), unjudged), (Path("c.mcap"), bad)]
    assert with_verdicts(played) == ([good, bad], [Path("b.mcap")])
    # None judged: all exported, unlabelled.
    assert with_verdicts([(Path("b.mcap"), unjudged)]) == ([unjudged], [])
