"""Hand-over end to end (issue 24 item 1): a goal with `handover` takes the running goal's motion
over without a hold, the old goal ends `handed_over`, cancel still stops with a hold, and a
hand-over the node cannot honour is rejected."""

from __future__ import annotations

import math
from typing import Any

import pytest
from action_msgs.msg import GoalStatus
from support.node_harness import ArmHarness, node_parameters
from support.ros_support import hold_events
from support.waiting import wait_for

# Starts processes or ROS nodes: `-m "not slow"` leaves it out.
pytestmark = pytest.mark.slow

FIRST = "pick up the cup"
NEXT = "put the cup in the sink"


@pytest.fixture
def active(ros_system: Any, gateway: Any, key_file: str) -> tuple[Any, ArmHarness]:
    node, arm = ros_system(**node_parameters(gateway.url, key_file))
    arm.configure_and_activate()
    return node, arm


def _start(arm: ArmHarness) -> Any:
    handle, feedback = arm.send_goal(FIRST, max_seconds=30.0)
    assert handle.accepted
    # Counted as its result counts them: from its run's events, which trail the commands.
    wait_for(lambda: any(f.actions >= 5 for f in list(feedback)),
             what="the first goal's feedback after 5 steps")
    return handle


def test_a_handed_over_goal_keeps_the_motion_and_cancel_still_holds(
    active: tuple[Any, ArmHarness],
) -> None:
    _, arm = active
    first = _start(arm)
    start = arm.command_count()
    second, feedback = arm.send_goal(NEXT, max_seconds=30.0, handover=True)
    assert second.accepted

    status, result = arm.result(first)
    assert status == GoalStatus.STATUS_SUCCEEDED, result.message
    assert result.reason == "handed_over" and not result.stopped_early, result.message
    assert result.actions >= 5 and result.chunks >= 1

    # The new instruction's chunk replaced the old rows: none of them is left to play.
    def playing_new() -> bool:
        return any(f.instruction == NEXT and f.previous_rows == 0 for f in list(feedback))

    wait_for(playing_new, what="feedback showing the new instruction's rows playing")
    switched = arm.command_count()
    wait_for(lambda: arm.command_count() >= switched + 5, what="steps of the new instruction")
    # No hold between the two instructions: the command stream went on.
    assert hold_events(arm, start) == []
    shown = [f for f in list(feedback) if f.instruction == NEXT]
    assert all(math.isfinite(f.since_chunk_s) and f.since_chunk_s >= 0 for f in shown)
    assert all(math.isfinite(f.observation_age_s) for f in shown if f.actions > 0)

    before_cancel = arm.command_count()
    second.cancel()
    status, result = arm.result(second)
    assert status == GoalStatus.STATUS_CANCELED, result.message
    assert result.reason == "interrupted" and result.stopped_early
    assert math.isfinite(result.instruction_lag_s) and result.instruction_lag_s > 0
    # Its figures are its own: the steps from its acceptance on.
    assert result.actions >= 5
    holds = arm.holds(before_cancel)
    assert holds, "no hold after the cancel"
    assert arm.commands_since(before_cancel)[-1].values == holds[-1].values


def test_hand_overs_the_node_cannot_honour_are_rejected(active: tuple[Any, ArmHarness]) -> None:
    _, arm = active
    first = _start(arm)
    refused, _ = arm.send_goal(NEXT, max_seconds=30.0, max_actions=10, handover=True)
    assert not refused.accepted
    results = arm.set_parameters(smooth_seam=2)
    assert all(r.successful for r in results), [r.reason for r in results]
    refused, _ = arm.send_goal(NEXT, max_seconds=30.0, handover=True)
    assert not refused.accepted
    wait_for(
        lambda: "parameters changed since the running goal started (smooth_seam)"
        in arm.log_text(),
        what="the rejection naming the changed parameter",
    )
    # Neither touched the running goal.
    first.cancel()
    status, result = arm.result(first)
    assert (status, result.reason) == (GoalStatus.STATUS_CANCELED, "interrupted"), result.message


def test_a_hand_over_with_nothing_running_is_a_plain_goal(active: tuple[Any, ArmHarness]) -> None:
    _, arm = active
    handle, _ = arm.send_goal(FIRST, max_seconds=1.0, handover=True)
    assert handle.accepted
    status, result = arm.result(handle)
    assert (status, result.reason) == (GoalStatus.STATUS_SUCCEEDED, "timeout"), result.message


def test_a_hand_over_on_cosmos3_commands_its_gripper_open_or_closed_only(
    ros_system: Any, gateway: Any, key_file: str
) -> None:
    # cosmos3's rows (here sim-droid-absolute-reach's, its row with a hashed target) are 7
    # absolute joint targets and its gripper (0 open, 1 closed), which it declares no
    # exception for. A hand-over shifts the new plan's joints onto the last command;
    # shifting its gripper too commanded a closed gripper over an open plan as 0.95 .. 1.9.
    views = ["exterior_1", "exterior_2", "wrist_left"]
    node, arm = ros_system(**node_parameters(
        gateway.url, key_file, model="sim-droid-absolute-reach", camera_views=views,
        camera_topics=[f"cameras/{view}/image_raw" for view in views],
        camera_transports=["raw"] * len(views),
    ))
    arm.configure_and_activate()
    first, _ = arm.send_goal(FIRST, max_seconds=30.0)
    assert first.accepted
    # The hash reach closes the gripper once the arm is at the instruction's target.
    wait_for(lambda: 1.0 in arm.gripper_commands, what="the first goal closing the gripper")
    closed_at = len(arm.gripper_commands)
    second, _ = arm.send_goal(NEXT, max_seconds=30.0, handover=True)
    assert second.accepted
    status, result = arm.result(first)
    assert (status, result.reason) == (GoalStatus.STATUS_SUCCEEDED, "handed_over"), result.message
    # The next target is elsewhere: its plan opens the gripper and, shifted, plays on.
    def opened() -> bool:
        return any(g < 1.0 for g in arm.gripper_commands[closed_at:])

    wait_for(opened, what="the new plan opening the gripper")
    opened_at = next(i for i, g in enumerate(arm.gripper_commands) if i >= closed_at and g < 1.0)
    wait_for(
        lambda: len(arm.gripper_commands) >= opened_at + 25 or second.done(),
        what="steps of the new plan",
    )
    assert set(arm.gripper_commands) <= {0.0, 1.0}, sorted(set(arm.gripper_commands))
    assert not second.done(), arm.result(second)[1].message
    second.cancel()
    status, result = arm.result(second)
    assert status == GoalStatus.STATUS_CANCELED, result.message
