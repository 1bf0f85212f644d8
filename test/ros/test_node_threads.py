"""The node's threads: a goal burst is answered in full, sensors are never starved, and
camera frames are taken on demand from a node that nothing spins."""

from __future__ import annotations

import threading
import time
from typing import Any

from action_msgs.msg import GoalStatus
from node_harness import ArmHarness, node_parameters, wait_for
from rclpy.action import ActionClient
from rclpy.qos import QoSProfile

from sequence_ai_interfaces.action import Act
from sequence_ai_ros.goals import DRIVING_THREAD

BURST = 50
# A planner that fires a burst needs room for its replies too (rclpy's default depth is 10).
DEEP = QoSProfile(depth=BURST * 2)
FINAL = {GoalStatus.STATUS_SUCCEEDED, GoalStatus.STATUS_ABORTED, GoalStatus.STATUS_CANCELED}


def _burst_client(arm: ArmHarness) -> ActionClient:
    client = ActionClient(
        arm, Act, f"{arm.get_namespace()}/act",
        goal_service_qos_profile=DEEP, result_service_qos_profile=DEEP,
        cancel_service_qos_profile=DEEP,
    )
    assert client.wait_for_server(timeout_sec=30.0)
    return client


def test_a_burst_of_50_goals_in_a_second_gets_every_result(
    ros_system: Any, gateway: Any, key_file: str
) -> None:
    _, arm = ros_system(**node_parameters(gateway.url, key_file))
    arm.configure_and_activate()
    client = _burst_client(arm)
    sent = []
    for index in range(BURST):
        # The last goal is short so that it completes; every earlier one is preempted.
        goal = Act.Goal(instruction=f"goal {index}", max_seconds=30.0,
                        max_actions=8 if index == BURST - 1 else 0)
        sent.append(client.send_goal_async(goal))
        time.sleep(1.0 / BURST)
    wait_for(lambda: all(f.done() for f in sent), what="every goal's response")
    handles = [f.result() for f in sent]
    assert all(h.accepted for h in handles)
    # Asked for all at once, as a client that fired the burst does.
    results = [h.get_result_async() for h in handles]
    wait_for(lambda: all(f.done() for f in results), timeout_s=60.0,
             what=f"all {BURST} results ({sum(f.done() for f in results)} so far)")
    answers = [f.result() for f in results]

    assert {a.status for a in answers} <= FINAL
    reasons = [a.result.reason for a in answers]
    assert not [r for r in reasons if "StaleObservation" in r], reasons
    assert reasons[-1] == "completed", answers[-1].result.message
    assert set(reasons[:-1]) == {"preempted"}, reasons
    client.destroy()


def test_goals_run_on_one_driving_thread_and_cameras_are_never_spun(
    ros_system: Any, gateway: Any, key_file: str
) -> None:
    node, arm = ros_system(**node_parameters(gateway.url, key_file))
    arm.configure_and_activate()
    drivers = [t for t in threading.enumerate() if t.name == DRIVING_THREAD]
    # One driving thread per configured node, alive between goals.
    assert len(drivers) >= 1
    for _ in range(2):
        handle, _ = arm.send_goal("pick up the cup", max_seconds=30.0, max_actions=4)
        assert handle.accepted
        status, result = arm.result(handle)
        assert result.reason == "completed", result.message
    assert [t for t in threading.enumerate() if t.name == DRIVING_THREAD] == drivers
    # The camera subscriptions are on a node of their own that the executor does not spin.
    topics = {s.topic_name for s in node.subscriptions}
    assert not [t for t in topics if "cameras/" in t], topics
    cameras = f"{node.get_name()}_cameras"
    wait_for(
        lambda: cameras in arm.get_node_names(), what=f"the camera node {cameras} in the graph"
    )
