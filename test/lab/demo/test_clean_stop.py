"""Ctrl-C as `ros2 launch` delivers it: the terminal's SIGINT reaches the whole process group,
launch forwards a second SIGINT about a second later, then SIGTERM. Every process — gateway,
sim_robot, node — exits 0 with no traceback, and a running goal still gets its result with the
arm held. The project's own launcher stops the same way under a repeated Ctrl-C."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from sequence_ai_lab.demo import launcher
from sequence_ai_lab.demo.planner import Planner
from sequence_ai_ros.params import launch as node_launch

# Starts processes or ROS nodes: `-m "not slow"` leaves it out.
pytestmark = pytest.mark.slow

NAMESPACE = "clean_stop"
PATIENCE_S = 60.0
# Launch forwards its SIGINT after the terminal's (about a second), then SIGTERM: the gaps
# here are shorter so the later signals land while the processes are still shutting down.
# They shape the scenario and wait for nothing: any timing must end cleanly.
FORWARD_S = 0.2
TRACEBACK_WORDS = ("Traceback", "Exception in ASGI", "CancelledError", "KeyboardInterrupt",
                   "terminate called", "Fatal Python error")


def _wait_for_line(log: Path, words: str, process: subprocess.Popen[bytes]) -> None:
    """Until a line of the process's output holds `words`."""
    deadline = time.monotonic() + PATIENCE_S
    while time.monotonic() < deadline:
        if any(words in line for line in log.read_text(errors="replace").splitlines()):
            return
        assert process.poll() is None, log.read_text(errors="replace")
        time.sleep(0.05)
    raise AssertionError(f"{log.name} never printed {words!r}")


@pytest.fixture
def group(tmp_path: Path) -> Iterator[list[tuple[str, subprocess.Popen[bytes], Path]]]:
    """The sim launch's processes in one process group, as `ros2 launch` runs them."""
    launch = node_launch.launch_for({"sim": "true", "namespace": NAMESPACE})
    specs = launcher.specs_for(launch, launcher.params_files(launch))
    started: list[tuple[str, subprocess.Popen[bytes], Path]] = []
    for spec in specs:
        log = tmp_path / f"{spec.name}.log"
        leader = started[0][1].pid if started else 0
        with open(log, "wb") as sink:
            process = subprocess.Popen(
                spec.command(), stdout=sink, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                env={**os.environ, **spec.env, "PYTHONUNBUFFERED": "1"},
                # The first process leads a new group; the others join it.
                preexec_fn=lambda leader=leader: os.setpgid(0, leader),  # noqa: PLW1509
            )
        started.append((spec.name, process, log))
        if spec.ready_prefix:
            _wait_for_line(log, spec.ready_prefix, process)
    # Up, as a user sees it before pressing Ctrl-C: the arm simulated, the node active.
    _wait_for_line(started[1][2], "simulated arm up", started[1][1])
    planner = Planner("clean_stop_planner")
    try:
        lifecycle = planner.lifecycle(node_launch.node_path(NAMESPACE))
        assert lifecycle.transition("configure", PATIENCE_S)
        assert lifecycle.transition("activate", PATIENCE_S)
    finally:
        planner.close()
    yield started
    for _, process, _ in started:
        if process.poll() is None:
            process.kill()
            process.wait()


def _interrupt_like_launch(pgid: int, processes: list[subprocess.Popen[bytes]]) -> None:
    for sig in (signal.SIGINT, signal.SIGINT, signal.SIGTERM):
        if all(p.poll() is not None for p in processes):
            return
        os.killpg(pgid, sig)
        time.sleep(FORWARD_S)


def test_ctrl_c_twice_and_sigterm_end_every_process_cleanly_with_a_goal_running(
    group: list[tuple[str, subprocess.Popen[bytes], Path]],
) -> None:
    planner = Planner("clean_stop_planner")
    try:
        goal = planner.act(f"/{NAMESPACE}/act").send("pick up the cup", max_seconds=60.0)
        assert goal.accepted
        deadline = time.monotonic() + PATIENCE_S
        while not any(f.actions > 0 for f in list(goal.feedback)):
            assert time.monotonic() < deadline, "the goal never moved the arm"
            time.sleep(0.05)

        processes = [p for _, p, _ in group]
        _interrupt_like_launch(processes[0].pid, processes)
        status, result = goal.result(PATIENCE_S)
    finally:
        planner.close()

    codes = {name: process.wait(timeout=PATIENCE_S) for name, process, _ in group}
    assert codes == {"gateway": 0, "sim_robot": 0, "node": 0}
    for name, _, log in group:
        text = log.read_text(errors="replace")
        assert not [w for w in TRACEBACK_WORDS if w in text], f"{name}:\n{text[-3000:]}"
    # The goal ended held and answered, before its node exited.
    assert result.reason == "interrupted" and "node shut down" in result.message, result.message
    assert "could not be held" not in result.message
    del status


def test_ctrl_c_twice_and_sigterm_with_no_goal(
    group: list[tuple[str, subprocess.Popen[bytes], Path]],
) -> None:
    processes = [p for _, p, _ in group]
    _interrupt_like_launch(processes[0].pid, processes)
    codes = {name: process.wait(timeout=PATIENCE_S) for name, process, _ in group}
    assert codes == {"gateway": 0, "sim_robot": 0, "node": 0}
    for name, _, log in group:
        text = log.read_text(errors="replace")
        assert not [w for w in TRACEBACK_WORDS if w in text], f"{name}:\n{text[-3000:]}"


@pytest.mark.parametrize(("model", "simulator"), [
    ("pi05-droid", "sim_robot"),
    # An ee model's node also stops its pose source's thread (it aborted at exit once).
    ("sim-stateless-ee-delta", "sim_cartesian"),
])
def test_the_projects_launcher_stops_everything_cleanly_on_a_repeated_ctrl_c(
    tmp_path: Path, model: str, simulator: str
) -> None:
    log = tmp_path / "launcher.log"
    with open(log, "wb") as sink:
        process = subprocess.Popen(
            [sys.executable, "-m", "sequence_ai_lab.demo.launcher", "sim:=true",
             f"namespace:={NAMESPACE}_launcher", f"model:={model}"],
            stdout=sink, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
            env={**os.environ, "PYTHONUNBUFFERED": "1"}, start_new_session=True,
        )
    try:
        _wait_for_line(log, "activated", process)
        _interrupt_like_launch(process.pid, [process])
        assert process.wait(timeout=PATIENCE_S) == 0
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
    text = log.read_text(errors="replace")
    stopped = next(line for line in text.splitlines() if line.startswith("launcher: stopped"))
    assert stopped == f"launcher: stopped {{'node': 0, '{simulator}': 0, 'gateway': 0}}", text
    assert not [w for w in TRACEBACK_WORDS if w in text], text[-3000:]
