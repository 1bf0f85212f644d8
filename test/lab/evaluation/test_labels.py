"""A trial's verdict in its episode file: every record kept, the verdict added (or replaced),
read back by the episode reader, by rosbags (the LeRobot export's reader) and by `episodes`."""

from __future__ import annotations

from pathlib import Path

import pytest

pytest.importorskip("rclpy")

from std_msgs.msg import String  # noqa: E402

from sequence_ai_lab.episodes import reader  # noqa: E402
from sequence_ai_lab.episodes.tools import list_line, show_text  # noqa: E402
from sequence_ai_lab.evaluation.labels import label  # noqa: E402
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
