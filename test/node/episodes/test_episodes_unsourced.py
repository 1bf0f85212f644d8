"""`python -m sequence_ai_lab.episodes show <file>`, the line `make demo` ends with, works in a
shell without the sourced workspace (issue 33 item 11): where the node's own interfaces do not
import, the reader decodes with rosbags from the schemas in the file."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from std_msgs.msg import String

from sequence_ai_interfaces.action import Act
from sequence_ai_lab.episodes import reader, tools
from sequence_ai_ros.episodes import writer

ROOT = Path(__file__).resolve().parents[2]
TOPICS = "/robot/sequence_ai/episode"


def _episode(path: Path) -> None:
    episode = writer.EpisodeWriter(path, print)
    episode.metadata(reader.EPISODE_RECORD, {"topics": TOPICS, "instruction": "pick up the cup"})
    episode.put(f"{TOPICS}/instruction", String(data="pick up the cup"))
    episode.put(f"{TOPICS}/feedback", Act.Feedback(status="running", actions=3))
    episode.finish(lambda stats: {reader.SUMMARY_RECORD: {"messages": str(stats.written)}})
    assert episode.wait_closed(10.0)


@pytest.mark.slow
def test_show_without_the_workspace_reads_the_node_s_own_messages(tmp_path: Path) -> None:
    path = tmp_path / "episode.mcap"
    _episode(path)
    # The venv's Python and this checkout only: no install/ on the path.
    env = {"PATH": os.environ["PATH"], "HOME": os.environ.get("HOME", "/root"),
           "PYTHONPATH": str(ROOT)}  # fmt: skip
    probe = [sys.executable, "-c", "import sequence_ai_interfaces"]
    assert subprocess.run(probe, env=env, capture_output=True, check=False).returncode != 0
    shown = subprocess.run(
        [sys.executable, "-m", "sequence_ai_lab.episodes", "show", str(path)],
        env=env, capture_output=True, text=True, timeout=60, check=False,
    )
    assert shown.returncode == 0, shown.stderr
    assert shown.stdout.strip() == tools.show_text(reader.read(path))
    assert "feedback (1)" in shown.stdout
