"""`evaluate --planner`: the task through the VLM planner's steps in the physics world. One trial
of make demo's task: its steps go out as act goals handed over one to the next, the trial's
figures are theirs together, and every step's episode carries the trial's verdict."""

from __future__ import annotations

import math
import os
import subprocess
import sys
from pathlib import Path

import pytest
from support.ros_domains import EVALUATION_TESTS, domain

from sequence_ai_lab.evaluation.results import load

pytest.importorskip("rclpy")

pytestmark = [pytest.mark.slow, pytest.mark.timeout(300)]

TASK = "put the cup on the blue block"
# Far above the run's own minute: the bound only stops a hung run before pytest does.
RUN_TIMEOUT_S = 240


def test_a_planned_task_sends_its_steps_and_labels_each_ones_episode(tmp_path: Path) -> None:
    from sequence_ai_lab.episodes.reader import read

    out = tmp_path / "out"
    env = {**os.environ, "ROS_DOMAIN_ID": str(domain(EVALUATION_TESTS)),
           "ROS_AUTOMATIC_DISCOVERY_RANGE": "LOCALHOST", "ROS_LOCALHOST_ONLY": "1"}
    completed = subprocess.run(
        [sys.executable, "-m", "sequence_ai_lab.evaluation", "--sim", "--out", str(out),
         "--task", TASK, "--planner", "sim-planner", "--trials", "1", "--max-seconds", "8",
         "--task-seconds", "60"],
        env=env, capture_output=True, text=True, timeout=RUN_TIMEOUT_S, check=False,
    )
    output = f"{completed.stdout[-6000:]}\n{completed.stderr[-3000:]}"
    assert completed.returncode == 0, output
    results = load(out)
    assert results is not None and results.settings["planner"] == "sim-planner"
    (trial,) = results.trials
    # A verdict on the task from the world, not a fault of the run.
    assert not trial.faulted, (trial, output)
    assert trial.success or trial.reason.startswith("not achieved"), trial
    # sim-planner splits the task into steps: more than one goal, each its own episode.
    episodes = sorted((out / "episodes").glob("*.mcap"))
    assert trial.goals == len(episodes) >= 2, (trial, output)
    assert trial.episode == str(episodes[-1])
    assert trial.commands > 0 and trial.requests > 0 and math.isfinite(trial.latency_p50_s)
    instructions = set()
    for path in episodes:
        episode = read(path)
        instructions.add(episode.instruction)
        assert episode.verdict["success"] == str(trial.success).lower(), path
        assert episode.verdict["task"] == TASK
    assert len(instructions) >= 2 and TASK not in instructions, instructions
    assert "planner:" in completed.stdout, output
