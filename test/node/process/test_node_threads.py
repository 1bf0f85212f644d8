"""The node's threads: goals run on one driving thread, joint states arrive on a small executor
of their own, and camera frames are taken on demand from a node that nothing spins. (A goal
burst answered in full is a row of the fault matrix, test/safety/test_fault_matrix_node.py.)"""

from __future__ import annotations

import threading
from typing import Any

import pytest
from support.node_harness import node_parameters
from support.waiting import wait_for

from sequence_ai_ros.goals.runner import DRIVING_THREAD
from sequence_ai_ros.inputs.joint_feed import JOINT_THREAD

# Starts processes or ROS nodes: `-m "not slow"` leaves it out.
pytestmark = pytest.mark.slow


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
    # Joint states too: the goals above were checked against them, on their own thread.
    assert not [t for t in topics if t.endswith("joint_states")], topics
    assert f"{node.get_name()}_joints" in arm.get_node_names()
    assert [t.name for t in threading.enumerate()].count(JOINT_THREAD) >= 1


def test_cleanup_stops_the_joint_thread_and_a_new_configuration_starts_one(
    ros_system: Any, gateway: Any, key_file: str
) -> None:
    from lifecycle_msgs.msg import Transition

    node, arm = ros_system(**node_parameters(gateway.url, key_file))

    def feeds() -> list[threading.Thread]:
        return [t for t in threading.enumerate() if t.name == JOINT_THREAD]

    before = feeds()
    arm.configure_and_activate()
    (mine,) = [t for t in feeds() if t not in before]
    assert arm.transition(Transition.TRANSITION_DEACTIVATE)
    assert arm.transition(Transition.TRANSITION_CLEANUP)
    assert not mine.is_alive()
    arm.configure_and_activate()
    handle, _ = arm.send_goal("pick up the cup", max_seconds=30.0, max_actions=4)
    _, result = arm.result(handle)
    assert result.reason == "completed", result.message
