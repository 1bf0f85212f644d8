"""sim-bimanual-reach end to end: config/sim-bimanual-reach.yaml, the node, the local gateway
and sim_bimanual — two arms and two grippers, each on its own controller, every tick."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import yaml
from action_msgs.msg import GoalStatus
from rclpy.executors import SingleThreadedExecutor
from std_msgs.msg import Float64MultiArray
from support.waiting import wait_for

from sequence_ai_ros.sim.bimanual import SimBimanual

CONFIG = Path(__file__).resolve().parents[2] / "config" / "sim-bimanual-reach.yaml"
TOPICS = (
    "left_arm_controller/commands", "right_arm_controller/commands",
    "left_gripper_controller/commands", "right_gripper_controller/commands",
)


def _parameters(base_url: str, key_file: str) -> dict[str, Any]:
    document = yaml.safe_load(CONFIG.read_text(encoding="utf-8"))
    values = dict(document["/**/sequence_ai"]["ros__parameters"])
    # As every node test's harness does: the shared machine may delay a frame.
    values.update(base_url=base_url, api_key_file=key_file, max_state_age_s=1.0,
                  max_image_age_s=1.0)
    return values


def test_the_bimanual_model_drives_both_arms_and_grippers_to_completion(
    ros_system: Any, ros_context: Any, gateway: Any, key_file: str
) -> None:
    node, arm = ros_system(**_parameters(gateway.url, key_file))
    sim = SimBimanual(namespace=node.get_namespace(), context=ros_context)
    executor = SingleThreadedExecutor(context=ros_context)
    executor.add_node(sim)
    spinner = threading.Thread(target=executor.spin, daemon=True)
    spinner.start()
    received: dict[str, list[list[float]]] = {topic: [] for topic in TOPICS}
    for topic, kept in received.items():
        arm.create_subscription(
            Float64MultiArray, topic, lambda msg, kept=kept: kept.append(list(msg.data)), 100
        )
    try:
        arm.configure_and_activate()
        start = sim.arms.step(0.0)
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
        moved = sim.arms.step(0.0) - start
        assert abs(moved[:6]).max() > 0.01 and abs(moved[6:12]).max() > 0.01
    finally:
        executor.shutdown(timeout_sec=5.0)
        spinner.join(timeout=5.0)
        sim.destroy_node()
