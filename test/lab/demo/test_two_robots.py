"""The README's second-robot recipe, as written: two `sim:=true` launches side by side, one with
`namespace:=robot2`, each with its own gateway, and a goal on each. Started through the launcher
(the README's entry point where `ros2 launch` is missing: it runs droid.launch.py's plan)."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
from support.ros_domains import LAUNCH_TESTS, domain

pytest.importorskip("rclpy")

from action_msgs.msg import GoalStatus  # noqa: E402

from sequence_ai_lab.demo.launcher import STOP_GRACE_S  # noqa: E402
from sequence_ai_lab.demo.planner import Planner  # noqa: E402
from sequence_ai_ros.params.launch import node_path  # noqa: E402

# Starts processes or ROS nodes: `-m "not slow"` leaves it out.
pytestmark = pytest.mark.slow

DOMAIN_ID = domain(LAUNCH_TESTS)
BRING_UP_S = 120.0
# Two robots, each with three 1280x720 cameras, share two busy cores here: the node's live age
# limits get the room the demo gives them (the checks stay on).
SHARED_MACHINE_AGES = {"max_state_age_s": "1.0", "max_image_age_s": "2.0"}
# The launcher's own bound on stopping its three processes (SIGINT, then 5 s after SIGTERM and
# 5 s after SIGKILL each): killing it sooner would hide which child was slow.
LAUNCHER_STOP_S = 3 * (STOP_GRACE_S + 10.0) + 10.0


class Launch:
    """One `python -m sequence_ai_lab.demo.launcher` process and what it printed."""

    def __init__(self, namespace: str, log: Path, env: dict[str, str]) -> None:
        self.namespace = namespace
        self.lines: list[str] = []
        self.active = threading.Event()
        self.ended = threading.Event()
        self._log = log.open("w", encoding="utf-8")
        arguments = ["sim:=true"] + ([f"namespace:={namespace}"] if namespace else [])
        self.process = subprocess.Popen(
            [sys.executable, "-m", "sequence_ai_lab.demo.launcher", *arguments],
            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
            text=True, env=env, start_new_session=True,
        )  # fmt: skip
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            self.lines.append(line)
            self._log.write(line)
            self._log.flush()
            if f"{node_path(self.namespace)} activated" in line:
                self.active.set()
        self.ended.set()

    def gateway_url(self) -> str:
        found = [m.group(1) for line in self.lines
                 if (m := re.search(r"\[gateway\] SEQUENCES_BASE_URL=(\S+)", line))]
        assert len(found) == 1, "".join(self.lines)
        return found[0]

    def stop(self) -> int | None:
        if self.process.poll() is None:
            os.kill(self.process.pid, signal.SIGINT)
            try:
                self.process.wait(timeout=LAUNCHER_STOP_S)
            except subprocess.TimeoutExpired:
                os.killpg(self.process.pid, signal.SIGKILL)
                self.process.wait(timeout=10)
        self.ended.wait(10)
        self._log.close()
        return self.process.returncode


@pytest.fixture(scope="module")
def two_robots(tmp_path_factory: pytest.TempPathFactory) -> Iterator[list[Launch]]:
    logs = tmp_path_factory.mktemp("two_robots")
    env = {
        **os.environ,
        "ROS_DOMAIN_ID": str(DOMAIN_ID),
        "ROS_AUTOMATIC_DISCOVERY_RANGE": "LOCALHOST",
        "ROS_LOCALHOST_ONLY": "1",
    }
    # As the README has it: the first robot at the root, the second in robot2. The domain is
    # this suite's own in this run's block, so no other test or run can answer.
    launches = [Launch(ns, logs / f"{ns or 'root'}.log", env) for ns in ("", "robot2")]
    try:
        yield launches
    finally:
        codes = [launch.stop() for launch in launches]
        stopped = [next((line for line in reversed(launch.lines)
                         if line.startswith("launcher: stopped")), "no 'stopped' line")
                   for launch in launches]
        assert codes == [0, 0], (stopped, ["".join(launch.lines[-30:]) for launch in launches])
        # Every child of each launcher ended by itself with status 0 (not SIGTERM or SIGKILL).
        assert all(re.search(r"\{'node': 0, 'sim_robot': 0, 'gateway': 0\}", line)
                   for line in stopped), stopped


def test_two_namespaced_sim_robots_each_run_a_goal(
    two_robots: list[Launch], monkeypatch: pytest.MonkeyPatch
) -> None:
    for launch in two_robots:
        assert launch.active.wait(BRING_UP_S), "".join(launch.lines[-40:])
    # Each launch started a gateway of its own on its own port.
    urls = [launch.gateway_url() for launch in two_robots]
    assert len(set(urls)) == 2, urls

    monkeypatch.setenv("ROS_DOMAIN_ID", str(DOMAIN_ID))
    planner = Planner("two_robots_planner")
    try:
        for launch in two_robots:
            parameters = planner.parameters(node_path(launch.namespace))
            for name, value in SHARED_MACHINE_AGES.items():
                assert parameters.set_text(name, value).successful
        goals = [
            planner.act(node_path(launch.namespace, "act")).send("pick up the cup", 60.0, 8)
            for launch in two_robots
        ]
        assert all(goal.accepted for goal in goals)
        for launch, goal in zip(two_robots, goals):
            status, result = goal.result(timeout_s=120.0)
            assert (status, result.reason) == (GoalStatus.STATUS_SUCCEEDED, "completed"), (
                f"{launch.namespace or '/'}: {result.message}"
            )
            assert result.actions == 8
    finally:
        planner.close()
