"""Between goals and beside them: the idle node sends its hold again only while the hold still
passes the gate, and the readiness thread polls the service while a goal drives the arm."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from action_msgs.msg import GoalStatus
from lifecycle_msgs.msg import Transition
from support.gateway_fixture import run_gateway
from support.node_harness import node_parameters
from support.ros_support import NodeSystem, hold_events, key_file_for
from support.waiting import wait_for

REFUSED = "the idle hold is not republished"
# Long enough that a goal sent once every input has arrived still meets a loading model.
COLD_START_S = 4.0
# Moved while the node cannot see it: more than max_step (0.25) from the hold.
PUSH_RAD = 1.0


@pytest.fixture
def idle_node(safety_ros_context: Any, tmp_path: Any) -> Iterator[tuple[Any, Any]]:
    with run_gateway() as gw:
        nodes = NodeSystem(safety_ros_context, "safety_idle")
        try:
            node, arm = nodes.start(**node_parameters(gw.url, key_file_for(tmp_path, gw.api_key)))
            arm.configure_and_activate()
            yield node, arm
        finally:
            nodes.close()


def test_an_idle_node_republishes_its_hold_only_while_it_passes(
    idle_node: tuple[Any, Any],
) -> None:
    """A controller that connects after a goal ended hears the hold within a second; a hold the
    arm has moved away from, or one no fresh joint state can vouch for, is not sent."""
    _, arm = idle_node
    start = arm.command_count()
    handle, _ = arm.send_goal("pick up the cup", 30.0, 8)
    status, result = arm.result(handle)
    assert status == GoalStatus.STATUS_SUCCEEDED, result.message
    (hold,) = wait_for(lambda: hold_events(arm, start), what="the goal's hold")
    resent = wait_for(
        lambda: [c for c in arm.commands_since(start) if c.values == hold.values][2:],
        what="the hold sent twice more while idle",
    )
    assert all(c.values == hold.values for c in arm.commands_since(start)[-len(resent):])

    # No fresh joint state: the hold cannot be checked, so it is not sent.
    arm.publish_joints = False
    try:
        wait_for(lambda: REFUSED in arm.log_text() and "max_state_age_s" in arm.log_text(),
                 what="the refusal for stale joints")
        mark = arm.command_count()
        joint = 1
        arm.move_joint(joint, -PUSH_RAD if arm.positions[joint] > 0.0 else PUSH_RAD)
    finally:
        arm.publish_joints = True
    # Fresh again, but the arm is 1 rad from the hold: sending it would move the arm back.
    wait_for(lambda: REFUSED in arm.log_text() and "max_step" in arm.log_text(),
             what="the refusal for an arm that moved")
    assert arm.commands_since(mark) == []


def test_readiness_is_polled_beside_a_running_goal(
    safety_ros_context: Any, tmp_path: Any, capfd: pytest.CaptureFixture[str]
) -> None:
    """The readiness thread calls Policy.ready() while the goal's thread drives the same Policy
    through a cold start; neither refuses the other and both finish."""
    with run_gateway(cold_start_s=COLD_START_S) as gw:
        nodes = NodeSystem(safety_ros_context, "safety_ready")
        try:
            _, arm = nodes.start(**node_parameters(gw.url, key_file_for(tmp_path, gw.api_key)))
            assert arm.transition(Transition.TRANSITION_CONFIGURE)
            assert arm.transition(Transition.TRANSITION_ACTIVATE)
            # The goal starts while the readiness thread still sees the model loading.
            wait_for(lambda: _inputs_arrived(arm) and arm.node_status()["ready"] == "false",
                     what="every input and the readiness thread reporting the cold model")
            handle, feedback = arm.send_goal("pick up the cup", 60.0, 8)
            assert handle.accepted
            status, result = arm.result(handle)
            wait_for(lambda: (arm.node_status() or {}).get("ready") == "true",
                     what="the readiness thread to see the model loaded")
            readiness_polls = gw.counters()["requests"]["ready"]
        finally:
            nodes.close()
    assert status == GoalStatus.STATUS_SUCCEEDED and result.actions == 8, result.message
    assert any(f.status == "waiting" for f in feedback)
    assert readiness_polls >= 1
    err = capfd.readouterr().err
    assert "another thread is driving" not in err and "readiness check failed" not in err


def _inputs_arrived(arm: Any) -> bool:
    values = arm.node_status() or {}
    ages = [v for k, v in values.items() if k.endswith("_age_s")]
    return bool(ages) and "never received" not in ages
