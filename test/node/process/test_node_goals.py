"""`act` goals end to end: real rclpy, the local gateway, a test arm that follows commands."""

from __future__ import annotations

import math
from typing import Any

import pytest
from action_msgs.msg import GoalStatus
from lifecycle_msgs.msg import Transition
from support.node_harness import ArmHarness, node_parameters
from support.waiting import wait_for

# Starts processes or ROS nodes: `-m "not slow"` leaves it out.
pytestmark = pytest.mark.slow

INSTRUCTION = "pick up the cup"


@pytest.fixture
def active(ros_system: Any, gateway: Any, key_file: str) -> tuple[Any, ArmHarness]:
    """An active node driving the test arm with sim-droid-reach (pi05-droid's row)."""
    node, arm = ros_system(**node_parameters(gateway.url, key_file))
    arm.configure_and_activate()
    return node, arm


def _start(arm: ArmHarness, max_seconds: float = 30.0, max_actions: int = 0) -> Any:
    """Send a goal and wait until it is moving the arm."""
    before = arm.command_count()
    handle, feedback = arm.send_goal(INSTRUCTION, max_seconds, max_actions)
    assert handle.accepted
    wait_for(lambda: arm.command_count() >= before + 5, what="the goal's first commands")
    return handle


def test_goal_publishes_at_the_chunk_rate_and_succeeds(active: tuple[Any, ArmHarness]) -> None:
    _, arm = active
    handle, feedback = arm.send_goal(INSTRUCTION, max_seconds=30.0, max_actions=30)
    assert handle.accepted
    status, result = arm.result(handle)

    assert status == GoalStatus.STATUS_SUCCEEDED, result.message
    assert result.reason == "completed" and not result.stopped_early
    assert result.actions == 30 and result.chunks >= 4
    commands = arm.commands_since(0)
    steps = [c for c in commands if c not in arm.holds()]
    assert len(steps) == 30
    # pi05-droid plays at 15 Hz. The median interval between published steps is the pacing
    # itself; a wait for a late chunk on a loaded machine only adds a few long intervals.
    intervals = sorted(b.received_s - a.received_s for a, b in zip(steps, steps[1:]))
    rate = 1.0 / intervals[len(intervals) // 2]
    assert 7.5 <= rate <= 30.0, f"{rate:.1f} Hz"
    # Each step carries the gripper too, on its own topic.
    wait_for(lambda: len(arm.gripper_commands) >= 30, what="gripper commands")
    assert set(arm.gripper_commands) <= {0.0, 1.0}
    # A completed goal still ends commanded to stay where the arm is.
    wait_for(lambda: arm.holds(), what="the hold after the goal")
    # By value: the idle node may have sent the same hold again since.
    assert arm.holds()[-1].values == arm.commands_since(0)[-1].values
    assert any(f.status == "running" for f in feedback)
    assert math.isfinite(result.max_seam_jump)


def test_cancel_holds_and_reports_interrupted(active: tuple[Any, ArmHarness]) -> None:
    _, arm = active
    handle = _start(arm)
    start = arm.command_count()
    handle.cancel()
    status, result = arm.result(handle)

    assert status == GoalStatus.STATUS_CANCELED, result.message
    assert result.reason == "interrupted" and result.stopped_early
    holds = arm.holds(start)
    assert holds, "no hold after cancel"
    assert arm.commands_since(start)[-1].values == holds[-1].values


def test_a_new_goal_preempts_the_running_one(active: tuple[Any, ArmHarness]) -> None:
    _, arm = active
    first = _start(arm)
    start = arm.command_count()
    second, _ = arm.send_goal("put the cup in the sink", max_seconds=30.0, max_actions=12)
    assert second.accepted

    first_status, first_result = arm.result(first)
    assert first_status == GoalStatus.STATUS_ABORTED, first_result.message
    assert first_result.reason == "preempted" and first_result.stopped_early
    second_status, second_result = arm.result(second)
    assert second_status == GoalStatus.STATUS_SUCCEEDED, second_result.message
    assert second_result.reason == "completed" and second_result.actions == 12
    # hold_between_goals (default true): one hold when the first stops, one after the second.
    wait_for(lambda: len(arm.holds(start)) >= 2, what="a hold after each goal")


def test_preemption_without_hold_between_goals(
    ros_system: Any, gateway: Any, key_file: str
) -> None:
    _, arm = ros_system(**node_parameters(gateway.url, key_file, hold_between_goals=False))
    arm.configure_and_activate()
    first = _start(arm)
    start = arm.command_count()
    second, _ = arm.send_goal("put the cup in the sink", max_seconds=30.0, max_actions=12)
    first_result = arm.result(first)[1]
    assert first_result.reason == "preempted", first_result.message
    second_result = arm.result(second)[1]
    assert second_result.reason == "completed", second_result.message
    # Only the second goal's final hold: none between the goals. Commands arrive in order, so
    # once the final hold is in, an earlier one would be too.
    wait_for(lambda: arm.holds(start), what="the hold after the second goal")
    assert len(arm.holds(start)) == 1


def test_a_stale_camera_stops_the_goal_with_a_hold(
    ros_system: Any, gateway: Any, key_file: str
) -> None:
    # A second: the paused view is the one to go stale; the harness's 15 Hz images of the others
    # have been seen 0.36 s apart on a loaded CI machine, never a second.
    _, arm = ros_system(**node_parameters(gateway.url, key_file, max_image_age_s=1.0))
    arm.configure_and_activate()
    handle = _start(arm)
    arm.paused_views.add("wrist_left")
    start = arm.command_count()
    status, result = arm.result(handle)

    assert status == GoalStatus.STATUS_ABORTED, result.message
    assert result.reason == "stale_input"
    assert "camera wrist_left" in result.message and "max_image_age_s" in result.message
    holds = arm.holds(start)
    assert holds and arm.commands_since(start)[-1].values == holds[-1].values


def test_set_parameters_changes_the_next_goal(active: tuple[Any, ArmHarness]) -> None:
    _, arm = active
    handle, _ = arm.send_goal(INSTRUCTION, max_seconds=30.0, max_actions=8)
    first = arm.result(handle)[1]
    assert first.reason == "completed", first.message
    wait_for(
        lambda: "prefetch True, smooth_seam 0" in arm.log_text(),
        what="the first goal's settings in /rosout",
    )

    results = arm.set_parameters(prefetch=False, smooth_seam=3)
    assert all(r.successful for r in results), [r.reason for r in results]
    handle, _ = arm.send_goal(INSTRUCTION, max_seconds=30.0, max_actions=24)
    status, result = arm.result(handle)
    assert status == GoalStatus.STATUS_SUCCEEDED, result.message
    wait_for(
        lambda: "prefetch False, smooth_seam 3" in arm.log_text(),
        what="the second goal's settings in /rosout",
    )
    # Without prefetch every chunk after the first is fetched while the arm waits.
    assert result.underruns >= result.chunks - 1 >= 1, result.message
    assert result.requests == result.chunks and result.discarded == 0

    results = arm.set_parameters(prefetch=True, max_in_flight=3, playback_speed="auto")
    assert all(r.successful for r in results), [r.reason for r in results]
    handle, feedback = arm.send_goal(INSTRUCTION, max_seconds=30.0, max_actions=40)
    status, result = arm.result(handle)
    assert status == GoalStatus.STATUS_SUCCEEDED, result.message
    wait_for(
        lambda: "max_in_flight 3, playback_speed auto" in arm.log_text(),
        what="the third goal's settings in /rosout",
    )
    # The cost and the continuity of the run reach the result and the feedback.
    assert result.requests >= result.chunks and result.requests_per_s > 0
    assert 0.5 <= result.speed_min <= result.speed_mean <= 1.0
    assert feedback and max(fb.in_flight for fb in feedback) <= 3
    assert all(fb.request_bytes > 0 for fb in feedback if fb.chunks > 0)

    (too_big,) = arm.set_parameters(smooth_seam=16)
    assert not too_big.successful
    assert "smooth_seam" in too_big.reason and "15" in too_big.reason
    (too_low,) = arm.set_parameters(jpeg_quality=80)
    assert not too_low.successful
    assert "jpeg_quality" in too_low.reason and "90" in too_low.reason
    (at_configure,) = arm.set_parameters(command_topic="elsewhere")
    assert not at_configure.successful
    assert "command_topic='elsewhere'" in at_configure.reason and "active" in at_configure.reason
    # What `ros2 param set <node> prefetch banana` sends: a string, refused by name.
    banana = arm.parameters.set_text("prefetch", "banana")
    assert not banana.successful
    assert "prefetch='banana'" in banana.reason and "expected a bool" in banana.reason
    values = arm.all_parameter_values()
    assert values["smooth_seam"].integer_value == 3
    assert values["jpeg_quality"].integer_value == 95


def test_deactivate_during_a_goal_holds(active: tuple[Any, ArmHarness]) -> None:
    _, arm = active
    handle = _start(arm)
    start = arm.command_count()
    assert arm.transition(Transition.TRANSITION_DEACTIVATE)

    status, result = arm.result(handle)
    assert status == GoalStatus.STATUS_ABORTED, result.message
    assert result.reason == "interrupted" and "deactivated" in result.message
    holds = arm.holds(start)
    assert holds and arm.commands_since(start)[-1].values == holds[-1].values
    rejected, _ = arm.send_goal(INSTRUCTION, max_seconds=2.0)
    assert not rejected.accepted


def test_a_service_error_aborts_the_goal_and_the_next_one_succeeds(
    active: tuple[Any, ArmHarness], gateway: Any
) -> None:
    _, arm = active
    handle = _start(arm)
    start = arm.command_count()
    gateway.inject("status", status=500)
    status, result = arm.result(handle)

    assert status == GoalStatus.STATUS_ABORTED, result.message
    assert result.reason == "raised:SequencesError" and "500" in result.message
    holds = arm.holds(start)
    assert holds and arm.commands_since(start)[-1].values == holds[-1].values

    handle, _ = arm.send_goal(INSTRUCTION, max_seconds=30.0, max_actions=10)
    status, result = arm.result(handle)
    assert (status, result.reason) == (GoalStatus.STATUS_SUCCEEDED, "completed"), result.message


def test_the_api_key_appears_nowhere(
    active: tuple[Any, ArmHarness], gateway: Any, capfd: pytest.CaptureFixture[str]
) -> None:
    node, arm = active
    key = gateway.api_key
    results = []
    handle, _ = arm.send_goal(INSTRUCTION, max_seconds=30.0, max_actions=10)
    results.append(arm.result(handle)[1])
    # The gateway refusing the key: the error text must not echo it either.
    handle = _start(arm)
    gateway.inject("status", status=401)
    results.append(arm.result(handle)[1])
    assert results[-1].reason == "raised:AuthError", results[-1].message
    wait_for(lambda: len(arm.diagnostics) >= 2, what="diagnostics")

    for name, value in arm.all_parameter_values().items():
        assert key not in str(value), name
    assert key not in arm.log_text()
    for array in list(arm.diagnostics):
        for status in array.status:
            assert key not in status.message
            assert all(key not in kv.value for kv in status.values)
    for result in results:
        assert key not in result.message and key not in result.reason
    captured = capfd.readouterr()
    assert key not in captured.out and key not in captured.err


def test_diagnostics_describe_the_node(active: tuple[Any, ArmHarness]) -> None:
    _, arm = active
    # One chunk's worth (pi05-droid plays 8 steps per chunk).
    handle, _ = arm.send_goal(INSTRUCTION, max_seconds=30.0, max_actions=8)
    arm.result(handle)
    values = wait_for(
        lambda: (v := arm.node_status()) and v["last_outcome"].startswith("completed") and v,
        what="the goal's outcome in /diagnostics",
    )
    assert values["model"] == "sim-droid-reach" and values["ready"] == "true"
    assert values["lifecycle"] == "active" and values["goals_run"] == "1"
    assert int(values["underruns"]) >= 0
    for key in ("request_latency_p50_ms", "request_latency_p95_ms"):
        assert float(values[key]) >= 0.0, key
    for key in ("camera_exterior_1_age_s", "camera_wrist_left_age_s", "joint_state_age_s"):
        assert 0.0 <= float(values[key]) < 5.0, key
    assert float(values["command_rate_hz"]) >= 0.0
    assert 0.0 <= float(values["input_stamp_skew_s"]) < 5.0
    # The goal's cost and continuity, and what its observations weighed.
    assert int(values["requests"]) >= 1 and int(values["requests_in_flight"]) >= 0
    assert float(values["requests_per_s"]) > 0 and float(values["playback_speed"]) == 1.0
    assert int(values["rows_beyond_horizon"]) >= 0 and float(values["no_fresh_command_s"]) >= 0
    views = {k: int(v) for k, v in values.items() if k.startswith("view_") and k.endswith("_bytes")}
    assert set(views) == {"view_exterior_1_bytes", "view_wrist_left_bytes"}
    assert int(values["request_bytes"]) > sum(views.values()) > 0


def test_compressed_camera_topics_feed_the_model(
    ros_system: Any, gateway: Any, key_file: str
) -> None:
    _, arm = ros_system(
        **node_parameters(
            gateway.url,
            key_file,
            camera_topics=[
                "cameras/exterior_1/image_raw/compressed",
                "cameras/wrist_left/image_raw",
            ],
            camera_transports=["compressed", "raw"],
        )
    )
    arm.configure_and_activate()
    handle, _ = arm.send_goal(INSTRUCTION, max_seconds=30.0, max_actions=8)
    status, result = arm.result(handle)
    assert (status, result.reason) == (GoalStatus.STATUS_SUCCEEDED, "completed"), result.message


def test_canceling_a_preempted_goal_never_stops_the_goal_that_preempted_it(
    active: tuple[Any, ArmHarness],
) -> None:
    _, arm = active
    first = _start(arm)
    second, _ = arm.send_goal("put the cup in the sink", max_seconds=30.0, max_actions=12)
    assert second.accepted
    # The cancel of the first goal lands while it stops or right after: each goal has its own
    # interrupt, so the second goal plays all its steps.
    first.cancel()
    first_status, first_result = arm.result(first)
    assert first_result.reason in ("preempted", "interrupted"), first_result.message
    second_status, second_result = arm.result(second)
    assert (second_status, second_result.reason) == (GoalStatus.STATUS_SUCCEEDED, "completed")
    assert second_result.actions == 12, second_result.message


def _active_without(arm: ArmHarness, view: str) -> None:
    """Configure and activate while `view` has never published; wait for the model."""
    arm.paused_views.add(view)
    assert arm.transition(Transition.TRANSITION_CONFIGURE), arm.log_text()
    assert arm.transition(Transition.TRANSITION_ACTIVATE)
    wait_for(
        lambda: (v := arm.node_status())
        and v["ready"] == "true"
        and v["inputs_not_arrived"] == f"camera {view}",
        what=f"diagnostics naming camera {view} as not arrived",
    )


def test_a_goal_before_the_first_frame_waits_for_it_then_runs(
    ros_system: Any, gateway: Any, key_file: str
) -> None:
    _, arm = ros_system(**node_parameters(gateway.url, key_file, input_wait_s=30.0))
    _active_without(arm, "wrist_left")
    handle, feedback = arm.send_goal(INSTRUCTION, max_seconds=30.0, max_actions=8)
    assert handle.accepted
    wait_for(lambda: any(f.status == "waiting" for f in list(feedback)), what="waiting feedback")
    arm.paused_views.discard("wrist_left")
    status, result = arm.result(handle)
    assert (status, result.reason) == (GoalStatus.STATUS_SUCCEEDED, "completed"), result.message
    wait_for(lambda: arm.node_status()["inputs_not_arrived"] == "none", what="all inputs in")


def test_an_input_that_never_arrives_ends_the_goal_naming_it(
    ros_system: Any, gateway: Any, key_file: str
) -> None:
    _, arm = ros_system(**node_parameters(gateway.url, key_file, input_wait_s=0.5))
    _active_without(arm, "wrist_left")
    handle, feedback = arm.send_goal(INSTRUCTION, max_seconds=30.0)
    status, result = arm.result(handle)
    assert status == GoalStatus.STATUS_ABORTED, result.message
    assert result.reason == "stale_input" and result.actions == 0
    assert "camera wrist_left never arrived within input_wait_s" in result.message
    assert any(f.status == "waiting" for f in feedback)


def test_a_one_instruction_goal_reports_no_instruction_swap(
    active: tuple[Any, ArmHarness],
) -> None:
    _, arm = active
    handle, _ = arm.send_goal(INSTRUCTION, max_seconds=1.0)
    status, result = arm.result(handle)
    assert result.reason == "timeout", result.message
    assert "instruction swap" not in result.message, result.message
