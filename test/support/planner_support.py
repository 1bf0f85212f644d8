"""The VLM planner as its own process against a test arm's node, and what the arm saw."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

from action_msgs.msg import GoalStatusArray
from rclpy.node import Node
from rclpy.qos import qos_profile_action_status_default

from support.node_harness import ArmHarness, Command

TASK = "put the cup on the blue block"


class GoalWatch:
    """The latest status of every goal of one `act` action, from its status topic."""

    def __init__(self, node: Node, action: str) -> None:
        self._lock = threading.Lock()
        self.latest: dict[bytes, int] = {}
        node.create_subscription(
            GoalStatusArray, f"{action}/_action/status", self._on_status,
            qos_profile_action_status_default,
        )  # fmt: skip

    def _on_status(self, msg: GoalStatusArray) -> None:
        with self._lock:
            for status in msg.status_list:
                self.latest[bytes(status.goal_info.goal_id.uuid)] = status.status

    def with_status(self, status: int) -> list[bytes]:
        with self._lock:
            return [goal for goal, seen in self.latest.items() if seen == status]


def moving(arm: ArmHarness, start: int) -> list[Command]:
    """Commands since `start` that are not a hold at a measured pose."""
    holds = set(arm.holds(start))
    return [c for c in arm.commands_since(start) if c not in holds]


def moving_after_the_hold(arm: ArmHarness, start: int) -> list[Command] | None:
    """Commands that move the arm after the first hold that ends the motion since `start`
    (None: no such hold). The arm receives in the order the node published."""
    holds = set(arm.holds(start))
    commands = arm.commands_since(start)
    moved = False
    for index, command in enumerate(commands):
        moved = moved or command not in holds
        if moved and command in holds:
            return [c for c in commands[index:] if c not in holds]
    return None


def planner_process(
    arm: ArmHarness, gateway: Any, key_file: str, log: Path, domain_id: int | None = None
) -> subprocess.Popen:
    """`python -m sequence_ai_ros.vlm_planner` on the arm's node, its output into `log`."""
    arguments = [
        f"task:={TASK}", f"base_url:={gateway.url}", f"api_key_file:={key_file}",
        "step_seconds:=60.0", "task_seconds:=120.0", "backoff_s:=0.2",
    ]  # fmt: skip
    env = dict(os.environ)
    if domain_id is not None:
        env["ROS_DOMAIN_ID"] = str(domain_id)
    with log.open("w") as out:
        return subprocess.Popen(
            [sys.executable, "-m", "sequence_ai_ros.vlm_planner", "--ros-args",
             "-r", f"__ns:={arm.get_namespace()}",
             *(item for a in arguments for item in ("-p", a))],
            stdout=out, stderr=subprocess.STDOUT, env=env,
        )  # fmt: skip
