"""The node's threads: goals run on one driving thread, and camera frames are taken on demand
from a node that nothing spins. (A goal burst answered in full is a row of the fault matrix,
test/safety/test_fault_matrix_node.py.)"""

from __future__ import annotations

import threading
from typing import Any

from node_harness import node_parameters, wait_for

from sequence_ai_ros.goals import DRIVING_THREAD


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
