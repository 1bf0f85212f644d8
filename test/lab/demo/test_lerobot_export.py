"""`export-lerobot` with the real LeRobot writer, where `make lerobot-venv` has built its
environment (Python 3.12, lerobot, torch: about 5.4 GB, so not part of `make test`): the
dataset loads back with one episode per recorded goal and one frame per action played."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from support.ros_domains import DEMO_TESTS, domain

ROOT = Path(__file__).resolve().parents[3]
LEROBOT_PYTHON = ROOT / ".venv-lerobot" / "bin" / "python"
TIMEOUT_S = 600

# Runs the export in the LeRobot venv's interpreter: a process, so slow.
pytestmark = [
    pytest.mark.skipif(
        not LEROBOT_PYTHON.exists(), reason="no .venv-lerobot: `make lerobot-venv` builds it"
    ),
    pytest.mark.slow,
]

_LOAD = """
import json, sys
from lerobot.datasets.lerobot_dataset import LeRobotDataset
dataset = LeRobotDataset(sys.argv[1], root=sys.argv[2])
first = dataset[0]
print(json.dumps({
    "episodes": dataset.num_episodes, "frames": dataset.num_frames, "fps": dataset.fps,
    "state": list(first["observation.state"].shape), "action": list(first["action"].shape),
    "image": list(first["observation.images.exterior_1"].shape), "task": first["task"],
}))
"""


def test_the_demos_episodes_export_to_a_dataset_lerobot_loads(tmp_path: Path) -> None:
    from sequence_ai_lab.episodes import reader

    env = {**os.environ, "ROS_DOMAIN_ID": str(domain(DEMO_TESTS))}
    episodes = tmp_path / "episodes"
    demo = subprocess.run(
        [sys.executable, "-m", "sequence_ai_lab.demo", "--headless",
         "--max-seconds", "6", "--out", str(tmp_path / "demo.png"),
         "--record-dir", str(episodes)],
        env=env, capture_output=True, text=True, timeout=TIMEOUT_S, check=False,
    )
    files = reader.episode_files(episodes)
    assert len(files) == 2, demo.stdout + demo.stderr
    actions = [int(reader.read(f, messages=False).summary["actions"]) for f in files]

    # The export's environment has no rclpy: the reader decodes with rosbags there.
    clean = {k: v for k, v in os.environ.items() if not k.startswith(("AMENT", "COLCON"))}
    out = tmp_path / "dataset"
    export = subprocess.run(
        [str(LEROBOT_PYTHON), "-m", "sequence_ai_lab.episodes", "export-lerobot",
         str(episodes), str(out), "--repo-id", "local/test"],
        env={**clean, "PYTHONPATH": str(ROOT)}, capture_output=True, text=True,
        timeout=TIMEOUT_S, check=False,
    )
    assert export.returncode == 0, export.stderr[-3000:]
    loaded = subprocess.run(
        [str(LEROBOT_PYTHON), "-c", _LOAD, "local/test", str(out)],
        env=clean, capture_output=True, text=True, timeout=TIMEOUT_S, check=False,
    )
    assert loaded.returncode == 0, loaded.stderr[-3000:]
    dataset = json.loads(loaded.stdout.strip().splitlines()[-1])
    assert dataset["episodes"] == 2 and dataset["frames"] == sum(actions)
    assert dataset["fps"] == 15 and dataset["state"] == [8] and dataset["action"] == [8]
    assert dataset["image"] == [3, 180, 320] and dataset["task"] == "pick up the cup"
