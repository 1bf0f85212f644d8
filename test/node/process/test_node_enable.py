"""The enable switch (`~/enable`) and the heartbeat deadman (`enable_topic`) end to end: while
motion is blocked goals are rejected with the reason; blocking it during a goal stops the goal
with its own ending, the arm held, and nothing but the hold reaches the arm after it."""

from __future__ import annotations

import threading
from typing import Any

import pytest
from action_msgs.msg import GoalStatus
from std_msgs.msg import Bool
from std_srvs.srv import SetBool
from support.node_harness import ArmHarness, node_parameters
from support.waiting import wait_for

# Starts processes or ROS nodes: `-m "not slow"` leaves it out.
pytestmark = pytest.mark.slow

INSTRUCTION = "pick up the cup"
HEARTBEAT = "teleop/deadman"


def set_enabled(arm: ArmHarness, value: bool) -> str:
    """Call the node's ~/enable; its response message."""
    client = arm.create_client(SetBool, f"{arm.get_namespace()}/sequence_ai/enable")
    try:
        assert client.wait_for_service(timeout_sec=10.0), "no ~/enable service"
        future = client.call_async(SetBool.Request(data=value))
        response = wait_for(lambda: future.result(), what="the ~/enable response")
        assert response.success
        return response.message
    finally:
        arm.destroy_client(client)


class Heartbeat:
    """A teleop deadman: `true` every 50 ms (a timer of the test arm) while held.

    The timer runs throughout and a flag gates it: cancelling a timer from the test's thread
    races the arm's executor and can end it (rclpy#1485, unfixed in rclpy 7.1)."""

    def __init__(self, arm: ArmHarness) -> None:
        publisher = arm.create_publisher(Bool, HEARTBEAT, 10)
        self._held = threading.Event()
        arm.create_timer(
            0.05, lambda: publisher.publish(Bool(data=True)) if self._held.is_set() else None
        )

    def hold(self) -> None:
        self._held.set()

    def release(self) -> None:
        self._held.clear()


def _start(arm: ArmHarness) -> Any:
    handle, _ = arm.send_goal(INSTRUCTION, max_seconds=60.0)
    assert handle.accepted
    wait_for(lambda: arm.command_count() >= 3, what="the goal's first steps")
    return handle


def _assert_held_after(arm: ArmHarness, index: int, steps: int = 1) -> None:
    """After `index` commands, at most `steps` steps already on their way, then the hold,
    then nothing but that hold again (the idle republish, hold_republish_hz)."""
    wait_for(lambda: arm.holds(index), what="the hold")
    after = arm.commands_since(index)
    hold_at = next(i for i, c in enumerate(after) if c in arm.holds(index))
    hold = after[hold_at].values
    assert hold_at <= steps, after
    assert all(c.values == hold for c in after[hold_at + 1:]), after


def test_disabling_stops_the_goal_held_and_goals_are_rejected_until_enabled(
    ros_system: Any, gateway: Any, key_file: str
) -> None:
    _, arm = ros_system(**node_parameters(gateway.url, key_file))
    arm.configure_and_activate()
    handle = _start(arm)

    index = arm.command_count()
    assert "disabled" in set_enabled(arm, False)
    status, result = arm.result(handle)

    assert status == GoalStatus.STATUS_ABORTED, result.message
    assert result.reason == "disabled" and "motion disabled by ~/enable" in result.message
    _assert_held_after(arm, index)

    rejected, _ = arm.send_goal(INSTRUCTION, max_seconds=5.0)
    assert not rejected.accepted
    wait_for(lambda: "motion is disabled (~/enable false)" in arm.log_text(), what="the reason")
    wait_for(
        lambda: (arm.node_status() or {}).get("motion", "").startswith("motion is disabled"),
        what="/diagnostics saying motion is disabled",
    )

    assert set_enabled(arm, True) == "enabled"
    handle = _start(arm)
    handle.cancel()
    assert arm.result(handle)[1].reason == "interrupted"


def test_a_missing_heartbeat_stops_the_goal_held_with_its_own_ending(
    ros_system: Any, gateway: Any, key_file: str
) -> None:
    # A second: beats 50 ms apart arrive late under load, never that late.
    node, arm = ros_system(
        **node_parameters(gateway.url, key_file, enable_topic=HEARTBEAT, enable_timeout_s=1.0)
    )
    arm.configure_and_activate()
    # No heartbeat yet: goals are rejected, naming the topic's timeout.
    rejected, _ = arm.send_goal(INSTRUCTION, max_seconds=5.0)
    assert not rejected.accepted
    wait_for(lambda: "no true on the enable topic" in arm.log_text(), what="the reason")

    deadman = Heartbeat(arm)
    deadman.hold()
    wait_for(lambda: node._enable.blocked() is None, what="the heartbeat")
    handle = _start(arm)
    index = arm.command_count()
    deadman.release()
    status, result = arm.result(handle)

    assert status == GoalStatus.STATUS_ABORTED, result.message
    assert result.reason == "deadman" and "enable_timeout_s" in result.message
    # The steps within the timeout still play (bench section enable measures the stop after
    # it); then the hold, and nothing more.
    _assert_held_after(arm, index, steps=len(arm.commands_since(index)))


def test_a_false_on_the_heartbeat_stops_at_once(
    ros_system: Any, gateway: Any, key_file: str
) -> None:
    # A timeout far longer than the test: only the explicit false can stop the goal.
    _, arm = ros_system(
        **node_parameters(gateway.url, key_file, enable_topic=HEARTBEAT, enable_timeout_s=60.0)
    )
    arm.configure_and_activate()
    publisher = arm.create_publisher(Bool, HEARTBEAT, 10)
    wait_for(lambda: publisher.get_subscription_count() > 0, what="the node's heartbeat topic")
    publisher.publish(Bool(data=True))
    wait_for(lambda: (arm.node_status() or {}).get("motion") == "enabled", what="enabled")
    handle = _start(arm)
    publisher.publish(Bool(data=False))
    status, result = arm.result(handle)

    assert status == GoalStatus.STATUS_ABORTED and result.reason == "deadman", result.message
