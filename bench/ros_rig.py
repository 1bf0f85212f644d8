"""Simulated robots with nodes in namespaces, and an in-process probe that watches them."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from bench.common import Context, log

if TYPE_CHECKING:
    from sequence_ai_lab.demo.launcher import Launcher
    from sequence_ai_lab.demo.planner import SentGoal

ROOT = Path(__file__).resolve().parent.parent
CLOCK_TICKS = os.sysconf("SC_CLK_TCK")


def cpu_seconds(pid: int) -> float:
    """User + system CPU seconds a process has used so far (from /proc/<pid>/stat)."""
    with open(f"/proc/{pid}/stat", encoding="ascii") as handle:
        fields = handle.read().rsplit(")", 1)[1].split()
    # After the command name: state is field 3, utime 14 and stime 15 (1-based, man 5 proc).
    return (int(fields[11]) + int(fields[12])) / CLOCK_TICKS


@dataclass
class Robot:
    """One namespace: a sim_robot and a node, started by the project's own launcher."""

    namespace: str
    launcher: Launcher
    ages_path: Path

    def pid(self, name: str) -> int:
        return int(self.launcher.pids()[name])

    def topic(self, name: str) -> str:
        return f"/{self.namespace}/{name}"

    def probe_record(self) -> dict[str, Any]:
        """What bench/node_probe.py wrote at the node's exit ({} if nothing)."""
        try:
            return dict(json.loads(self.ages_path.read_text(encoding="utf-8")))
        except (OSError, ValueError):
            return {}


def start_robot(
    ctx: Context,
    namespace: str,
    *,
    model: str,
    views: tuple[str, ...],
    transport: str = "raw",
    fps: float = 30.0,
    node_overrides: dict[str, str] | None = None,
    controller: str = "forward",
    sim_overrides: dict[str, str] | None = None,
) -> Robot:
    """Start sim_robot as the light camera feed (premade 1280×720 frames at exact rates,
    `transport` raw or compressed) and the node (with the age probe) in ``namespace``,
    configured + active. ``controller`` picks the node's parameters file as the launch
    argument of that name does (forward: config/droid.yaml, joint_trajectory: droid_jtc.yaml);
    ``sim_overrides`` change sim_robot's parameters (e.g. its physics, rendered frames)."""
    from sequence_ai_lab.demo.launcher import Launcher, ProcessSpec, bring_up, ros_arguments
    from sequence_ai_lab.robots.sim_robot.robot import light_feed_overrides
    from sequence_ai_ros.params.launch import PARAMS_FILES, node_path

    log_dir = ctx.log_dir
    ages_path = log_dir / f"{namespace}-observation-ages.json"
    sim_args = ros_arguments(
        "sim_robot",
        namespace,
        overrides={**light_feed_overrides(transport, fps, views), **(sim_overrides or {})},
    )
    overrides = {"model": model, "base_url": ctx.gateway.url, **(node_overrides or {})}
    if transport == "compressed":
        topics = ",".join(f"cameras/{view}/image_raw/compressed" for view in views)
        overrides.update({
            "camera_views": "[" + ",".join(views) + "]",
            "camera_topics": f"[{topics}]",
            "camera_transports": "[" + ",".join("compressed" for _ in views) + "]",
        })
    node_args = ros_arguments(
        "sequence_ai", namespace, (str(ROOT / PARAMS_FILES[controller]),), overrides
    )
    specs = [
        ProcessSpec(f"{namespace}-sim_robot", "sim_robot", sim_args),
        ProcessSpec(
            f"{namespace}-node", "sequence_ai_node", node_args,
            env={"SEQUENCES_API_KEY": ctx.gateway.api_key},
            command_line=[sys.executable, str(ROOT / "bench" / "node_probe.py"), str(ages_path),
                          *node_args],
        ),
    ]
    launcher = Launcher(specs, log_dir=log_dir)
    robot = Robot(namespace, launcher, ages_path)
    try:
        launcher.start()
        bring_up(node_path(namespace), timeout_s=60.0)
    except BaseException:
        launcher.stop(grace_s=5.0)
        raise
    return robot


def stop_robots(robots: list[Robot]) -> None:
    for robot in robots:
        robot.launcher.stop(grace_s=10.0)


@dataclass
class Watch:
    """Commands received on one namespace: (receive time, values)."""

    commands: list[tuple[float, list[float]]] = field(default_factory=list)


class RosProbe:
    """A planner node in this process (its own context): watches topics, sends goals."""

    def __init__(self) -> None:
        from sequence_ai_lab.demo.planner import Planner

        self.planner = Planner("sequence_ai_bench_probe")
        self.node = self.planner.node
        self.diagnostics: dict[str, list[dict[str, str]]] = {}
        self._lock = threading.Lock()
        self._subscribe_diagnostics()

    def _subscribe_diagnostics(self) -> None:
        from diagnostic_msgs.msg import DiagnosticArray

        def on_diagnostics(msg: DiagnosticArray) -> None:
            with self._lock:
                for status in msg.status:
                    values = {kv.key: kv.value for kv in status.values}
                    self.diagnostics.setdefault(status.name, []).append(values)

        self.node.create_subscription(DiagnosticArray, "/diagnostics", on_diagnostics, 50)

    def watch(self, robot: Robot) -> Watch:
        from rclpy.qos import QoSProfile, ReliabilityPolicy
        from std_msgs.msg import Float64MultiArray

        watch = Watch()

        def on_command(msg: Float64MultiArray) -> None:
            watch.commands.append((time.monotonic(), list(msg.data)))

        qos = QoSProfile(depth=50, reliability=ReliabilityPolicy.RELIABLE)
        self.node.create_subscription(
            Float64MultiArray, robot.topic("forward_position_controller/commands"), on_command, qos
        )
        return watch

    def diagnostics_of(self, robot: Robot) -> list[dict[str, str]]:
        with self._lock:
            return [values for name, rows in self.diagnostics.items()
                    if name.startswith(f"/{robot.namespace}/") for values in rows]

    def send_goal(self, robot: Robot, instruction: str, max_seconds: float) -> SentGoal:
        """Send an Act goal; ``result(timeout)`` of the answer waits for (status, result)."""
        return self.planner.act(robot.topic("act")).send(instruction, max_seconds)

    def wait_for_joint_states(self, robot: Robot, timeout_s: float = 30.0) -> None:
        from rclpy.qos import qos_profile_sensor_data
        from sensor_msgs.msg import JointState

        seen = threading.Event()
        sub = self.node.create_subscription(
            JointState, robot.topic("joint_states"), lambda _msg: seen.set(),
            qos_profile_sensor_data,
        )
        try:
            if not seen.wait(timeout_s):
                raise RuntimeError(f"{robot.topic('joint_states')}: nothing within {timeout_s} s")
        finally:
            self.node.destroy_subscription(sub)

    def close(self) -> None:
        self.planner.close()


def start_command_timer(
    ctx: Context, namespace: str, topic: str, kind: str = "step"
) -> tuple[subprocess.Popen, Path]:
    """bench/command_timer.py on `topic` of `namespace` (`kind`: step, trajectory, twist or
    pose): (its process, the JSON it writes on SIGINT — one record per command, see that
    script)."""
    times = ctx.log_dir / f"{namespace}-command-times.json"
    log_file = (ctx.log_dir / f"{namespace}-command-timer.log").open("w")
    process = subprocess.Popen(
        [sys.executable, str(ROOT / "bench" / "command_timer.py"), str(times), f"/{namespace}",
         topic, kind],
        stdout=log_file, stderr=subprocess.STDOUT, env=dict(os.environ),
    )
    log_file.close()
    return process, times


def stop_command_timer(process: subprocess.Popen, times: Path) -> list[dict[str, Any]]:
    """Stop the timer; the commands it recorded (none if it wrote nothing)."""
    process.send_signal(signal.SIGINT)
    process.wait(timeout=20)
    try:
        return [dict(record) for record in json.loads(times.read_text(encoding="utf-8"))]
    except (OSError, ValueError):
        return []


def unique_namespace(stem: str) -> str:
    """Namespaces carry the pid: tests of others may share the ROS domain."""
    return f"bench_{os.getpid()}_{stem}"


def log_robot(robot: Robot) -> None:
    log(f"robot {robot.namespace}: pids {robot.launcher.pids()}")
