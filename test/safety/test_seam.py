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
from node.process.test_node_joint_limits import limits
from support.gateway_fixture import run_gateway
from support.node_harness import node_parameters
from support.ros_support import NodeSystem, key_file_for
from support.seam_policy import MODEL as TURNING_MODEL

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


def test_a_plan_turning_at_speed_crosses_every_seam_within_the_joint_speeds(
    safety_ros_context: Any, tmp_path: Any
) -> None:
    # droid.yaml's velocity limits and seam blend. Each moving chunk lands 0.3 s after its
    # observation with four rows due: 0.58 rad from where the arm stood. Faded over three rows
    # that adds 0.145 rad to steps already moving 0.116 (3.9 rad/s: refused); faded within the
    # gate's limits, it all plays.
    with run_gateway(policies=["support.seam_policy:turning"], latency_ms=300.0,
                     jitter_ms=0.0, scale=1.0) as gw:
        nodes = NodeSystem(safety_ros_context, "safety_turning")
        try:
            _, arm = nodes.start(**node_parameters(
                gw.url, key_file_for(tmp_path, gw.api_key), model=TURNING_MODEL,
                smooth_seam=3, max_in_flight=1, **limits(max_velocity=2.175),
            ))
            arm.configure_and_activate()
            handle, _ = arm.send_goal("turn at speed", max_seconds=30.0, max_actions=GOAL_ACTIONS)
            status, result = arm.result(handle)
        finally:
            nodes.close()
    assert status == GoalStatus.STATUS_SUCCEEDED, result.message
    assert result.reason == "completed" and result.max_seam_jump > 0.3
    targets = [c.values[:7] for c in arm.commands_since(0)]
    fastest = max(abs(b - a) for s, t in zip(targets, targets[1:]) for a, b in zip(s, t))
    assert fastest * 15.0 <= 2.175
