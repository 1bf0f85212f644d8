"""A prefetched chunk must continue from where the arm is, not from where it was asked.

pi05-droid's rows are displacements from the joints of the request's observation. A chunk
fetched while the previous one plays arrives after the arm has moved on; played from its first
row it would take the arm back by everything played since the request, a jump the node's
max_step check refuses (the goal would end `validate`). The client starts such a chunk at the
row due on arrival; this guards that a default-configured node finishes a fast, far reach.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from action_msgs.msg import GoalStatus
from support.gateway_fixture import run_gateway
from support.node_harness import node_parameters
from support.ros_support import NodeSystem, key_file_for

# An instruction whose target lies more than 1.5 rad from the test arm's ready pose.
FAR_REACH = "safety matrix stall_runway"
GOAL_ACTIONS = 40
MAX_STEP = 0.25


@pytest.fixture
def fresh_node(safety_ros_context: Any, tmp_path: Any) -> Iterator[Any]:
    with run_gateway() as gw:
        nodes = NodeSystem(safety_ros_context, "safety_seam")
        try:
            _, arm = nodes.start(**node_parameters(gw.url, key_file_for(tmp_path, gw.api_key)))
            arm.configure_and_activate()
            yield arm
        finally:
            nodes.close()


def test_a_far_reach_with_default_parameters_crosses_every_seam(fresh_node: Any) -> None:
    arm = fresh_node
    handle, _ = arm.send_goal(FAR_REACH, 60.0, GOAL_ACTIONS)
    status, result = arm.result(handle)
    assert result.reason == "completed", result.message
    assert status == GoalStatus.STATUS_SUCCEEDED and result.actions == GOAL_ACTIONS
    assert result.max_seam_jump <= MAX_STEP
