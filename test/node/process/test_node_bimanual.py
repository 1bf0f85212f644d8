"""sim-bimanual-reach end to end: config/sim-bimanual-reach.yaml, the node, the local gateway
and sim_bimanual — two arms and two grippers, each on its own controller, every tick.

sim_bimanual runs in a process of its own (support/sim_process.py says why)."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from action_msgs.msg import GoalStatus
from rclpy.qos import qos_profile_sensor_data
from sensor_msgs.msg import JointState
from std_msgs.msg import Float64MultiArray
from support.config_files import config_parameters
from support.sim_process import simulator
from support.waiting import wait_for

from sequence_ai_lab.robots.sim_bimanual.bimanual import GRIPPERS, JOINT_NAMES

# Starts processes or ROS nodes: `-m "not slow"` leaves it out.
pytestmark = pytest.mark.slow

TOPICS = (
    "left_arm_controller/commands", "right_arm_controller/commands",
    "left_gripper_controller/commands", "right_gripper_controller/commands",
)


def _parameters(base_url: str, key_file: str) -> dict[str, Any]:
    # As every node test's harness does: the shared machine may delay a frame.
    return config_parameters("sim-bimanual-reach", base_url=base_url, api_key_file=key_file,
                             max_state_age_s=1.0, max_image_age_s=1.0)


def test_the_bimanual_model_drives_both_arms_and_grippers_to_completion(
    ros_system: Any, gateway: Any, key_file: str, tmp_path: Path
) -> None:
    node, arm = ros_system(**_parameters(gateway.url, key_file))
    received: dict[str, list[list[float]]] = {topic: [] for topic in TOPICS}
    for topic, kept in received.items():
        arm.create_subscription(
            Float64MultiArray, topic, lambda msg, kept=kept: kept.append(list(msg.data)), 100
        )
    # sim_bimanual's joints, in its order (the test arm's own joint states name other joints).
    names = (*JOINT_NAMES, *GRIPPERS)
    latest: list[np.ndarray] = []
    lock = threading.Lock()

    def on_state(msg: JointState) -> None:
        if tuple(msg.name) == names:
            with lock:
                latest[:] = [np.array(msg.position)]

    arm.create_subscription(JointState, "joint_states", on_state, qos_profile_sensor_data)

    def positions() -> np.ndarray:
        with lock:
            return latest[0].copy() if latest else np.array([])

    with simulator("sequence_ai_lab.robots.sim_bimanual.bimanual", node.get_namespace(),
                   tmp_path / "sim_bimanual.log"):
        wait_for(lambda: positions().size == len(names), what="sim_bimanual's joint states")
        arm.configure_and_activate()
        start = positions()
        handle, _ = arm.send_goal("reach the red block", max_seconds=30.0, max_actions=50)
        assert handle.accepted
        status, result = arm.result(handle)
        assert status == GoalStatus.STATUS_SUCCEEDED, result.message
        assert result.reason == "completed" and result.actions == 50
        wait_for(lambda: all(len(kept) >= 50 for kept in received.values()),
                 what="every group's commands")
        assert all(len(v) == 6 for v in received["left_arm_controller/commands"])
        assert all(len(v) == 1 for v in received["right_gripper_controller/commands"])
        # The arms followed the rows: both moved.
        moved = positions() - start
        assert abs(moved[:6]).max() > 0.01 and abs(moved[6:12]).max() > 0.01
