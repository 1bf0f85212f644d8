"""`make demo ARGS="--model sim-bimanual-reach --headless"`, short: the two-arm robot on its own
simulator and config, driven by the scripted planner (the simulated chat model plans only for
the Panda), both arms moving towards each instruction's target, every process stopped."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from support.ros_domains import DEMO_TESTS, domain

pytest.importorskip("rclpy")

from sequence_ai_lab.demo.run import process_alive  # noqa: E402

# Starts processes or ROS nodes: `-m "not slow"` leaves it out.
pytestmark = pytest.mark.slow

# test_demo.py's domain: the suite runs one demo at a time.
DOMAIN_ID = domain(DEMO_TESTS)
MAX_SECONDS = 8.0
RUN_TIMEOUT_S = 170


@pytest.fixture(scope="module")
def demo_run(tmp_path_factory: pytest.TempPathFactory) -> dict:
    out = tmp_path_factory.mktemp("demo_bimanual")
    env = {
        **os.environ,
        "ROS_DOMAIN_ID": str(DOMAIN_ID),
        "ROS_AUTOMATIC_DISCOVERY_RANGE": "LOCALHOST",
        "ROS_LOCALHOST_ONLY": "1",
    }
    # No --planner: the model's default, as `make demo ARGS="--model ..."` runs it.
    command = [
        sys.executable, "-m", "sequence_ai_lab.demo", "--headless",
        "--model", "sim-bimanual-reach",
        "--max-seconds", str(MAX_SECONDS),
        "--out", str(out / "demo.png"),
        "--summary", str(out / "summary.json"),
        "--log-dir", str(out / "logs"),
        "--record-dir", "",
    ]  # fmt: skip
    completed = subprocess.run(
        command, env=env, capture_output=True, text=True, timeout=RUN_TIMEOUT_S, check=False
    )
    summary_file = out / "summary.json"
    assert summary_file.exists(), f"no summary; demo output:\n{completed.stdout}{completed.stderr}"
    summary = json.loads(summary_file.read_text(encoding="utf-8"))
    yield {"completed": completed, "summary": summary, "out": out}
    for pid in summary["pids"].values():
        if process_alive(pid):
            os.kill(pid, signal.SIGKILL)


def _explain(run: dict) -> str:
    node_log = run["out"] / "logs" / "node.log"
    log = node_log.read_text(encoding="utf-8")[-3000:] if node_log.exists() else "(no node log)"
    return (
        f"demo output:\n{run['completed'].stdout[-4000:]}\n{run['completed'].stderr[-2000:]}\n"
        f"node log:\n{log}"
    )


def test_it_runs_the_scripted_planner_and_says_why(demo_run: dict) -> None:
    assert demo_run["completed"].returncode == 0, _explain(demo_run)
    stdout = demo_run["completed"].stdout
    assert "--model sim-bimanual-reach: scripted planner, since" in stdout
    assert "model:=sim-bimanual-reach" in demo_run["summary"]["via"]
    first, second = demo_run["summary"]["goals"]
    assert (first["reason"], second["reason"]) == ("preempted", "timeout"), _explain(demo_run)


def test_both_arms_moved_toward_each_instructions_target(demo_run: dict) -> None:
    for goal in demo_run["summary"]["goals"]:
        assert len(goal["target"]) == 12  # the arms' joints; the grippers follow
        start, end = goal["start_distance"], goal["end_distance"]
        assert end < start - 0.2, (
            f"{goal['instruction']!r}: {start:.2f} -> {end:.2f} rad\n{_explain(demo_run)}"
        )


def test_its_own_simulator_ran_and_everything_stopped(demo_run: dict) -> None:
    summary = demo_run["summary"]
    assert set(summary["pids"]) == {"gateway", "sim_bimanual", "node"}
    assert summary["alive_after_stop"] == []
    assert [pid for pid in summary["pids"].values() if process_alive(pid)] == []


def test_picture_was_written(demo_run: dict) -> None:
    image_module = pytest.importorskip("PIL.Image")
    path = Path(demo_run["summary"]["plot"])
    with image_module.open(path) as picture:
        assert picture.format == "PNG"
        assert picture.height > picture.width  # a column per arm, nine rows of panels
