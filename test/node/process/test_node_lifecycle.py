"""Lifecycle through the ChangeState service, and configure refusing a mismatched model."""

from __future__ import annotations

from typing import Any

import pytest
from lifecycle_msgs.msg import Transition
from support.node_harness import node_parameters
from support.waiting import wait_for

# Starts processes or ROS nodes: `-m "not slow"` leaves it out.
pytestmark = pytest.mark.slow


def test_transitions_and_goal_gating(ros_system: Any, gateway: Any, key_file: str) -> None:
    node, arm = ros_system(**node_parameters(gateway.url, key_file))
    assert arm.state() == "unconfigured"
    # Unconfigured: the action server already exists and refuses goals at once.
    handle, _ = arm.send_goal("pick up the cup", max_seconds=2.0)
    assert not handle.accepted
    assert arm.transition(Transition.TRANSITION_CONFIGURE), arm.log_text()
    assert arm.state() == "inactive"

    # Inactive: the action server exists but refuses goals.
    handle, _ = arm.send_goal("pick up the cup", max_seconds=2.0)
    assert not handle.accepted

    assert arm.transition(Transition.TRANSITION_ACTIVATE)
    assert arm.state() == "active"
    wait_for(lambda: node.health.snapshot().ready, what="the model reported ready in diagnostics")

    for bad in (("", 2.0), ("pick up the cup", 0.0), ("pick up the cup", float("nan"))):
        handle, _ = arm.send_goal(*bad)
        assert not handle.accepted, bad

    assert arm.transition(Transition.TRANSITION_DEACTIVATE)
    assert arm.state() == "inactive"
    handle, _ = arm.send_goal("pick up the cup", max_seconds=2.0)
    assert not handle.accepted

    assert arm.transition(Transition.TRANSITION_CLEANUP)
    assert arm.state() == "unconfigured"
    handle, _ = arm.send_goal("pick up the cup", max_seconds=2.0)
    assert not handle.accepted
    # A cleaned-up node configures again from scratch.
    assert arm.transition(Transition.TRANSITION_CONFIGURE)
    assert arm.transition(Transition.TRANSITION_INACTIVE_SHUTDOWN)
    assert arm.state() == "finalized"


def test_configure_fails_on_a_view_mismatch(ros_system: Any, gateway: Any, key_file: str) -> None:
    node, arm = ros_system(
        **node_parameters(
            gateway.url,
            key_file,
            camera_views=["exterior_1", "exterior_2"],
            camera_topics=["cameras/exterior_1/image_raw", "cameras/exterior_2/image_raw"],
        )
    )
    assert not arm.transition(Transition.TRANSITION_CONFIGURE)
    assert arm.state() == "unconfigured"
    message = wait_for(
        lambda: "configure failed" in arm.log_text() and arm.log_text(),
        what="the configure failure in /rosout",
    )
    assert "camera_views" in message and "missing ['wrist_left']" in message
    assert "unknown ['exterior_2']" in message
    wait_for(
        lambda: any(
            s.level == s.ERROR and "camera_views" in s.message
            for array in list(arm.diagnostics)
            for s in array.status
        ),
        what="the configure failure in /diagnostics",
    )


def test_configure_fails_on_a_state_layout_mismatch(
    ros_system: Any, gateway: Any, key_file: str
) -> None:
    _, arm = ros_system(**node_parameters(gateway.url, key_file, gripper_joint=""))
    assert not arm.transition(Transition.TRANSITION_CONFIGURE)
    message = wait_for(
        lambda: "configure failed" in arm.log_text() and arm.log_text(),
        what="the configure failure in /rosout",
    )
    assert "gripper_joint" in message and "gripper: 1" in message


def test_configure_fails_without_a_readable_key(ros_system: Any, gateway: Any) -> None:
    _, arm = ros_system(**node_parameters(gateway.url, "/nonexistent/sequences.key"))
    assert not arm.transition(Transition.TRANSITION_CONFIGURE)
    message = wait_for(
        lambda: "configure failed" in arm.log_text() and arm.log_text(),
        what="the configure failure in /rosout",
    )
    assert "api_key_file" in message


def test_a_cold_model_warms_up_in_the_background(
    ros_system: Any, gateway_factory: Any, tmp_path: Any
) -> None:
    gateway = gateway_factory(cold_start_s=3.0)
    key_file = tmp_path / "cold.key"
    key_file.write_text(gateway.api_key, encoding="utf-8")
    key_file.chmod(0o600)
    _, arm = ros_system(**node_parameters(gateway.url, str(key_file)))
    assert arm.transition(Transition.TRANSITION_CONFIGURE)
    assert arm.transition(Transition.TRANSITION_ACTIVATE)
    warming = wait_for(
        lambda: (v := arm.node_status()) and v["ready"] == "false" and v,
        what="diagnostics showing the model warming",
    )
    assert float(warming["warming_eta_s"]) > 0.0

    # A goal sent while the model loads waits for it, reporting the ETA, then runs.
    wait_for(
        lambda: (v := arm.node_status()) and "never received" not in v.values(),
        what="camera and joint inputs",
    )
    handle, feedback = arm.send_goal("pick up the cup", max_seconds=30.0, max_actions=8)
    assert handle.accepted
    status, result = arm.result(handle)
    assert result.reason == "completed", result.message
    waiting = [f for f in feedback if f.status == "waiting"]
    assert waiting and all(f.warming_eta_s >= 0.0 for f in waiting)
    wait_for(lambda: arm.node_status()["ready"] == "true", what="the model ready")


def test_an_unreachable_service_shows_in_diagnostics_until_it_returns(
    ros_system: Any, gateway: Any, key_file: str
) -> None:
    _, arm = ros_system(**node_parameters(gateway.url, key_file))
    assert arm.transition(Transition.TRANSITION_CONFIGURE)
    gateway.kill()
    assert arm.transition(Transition.TRANSITION_ACTIVATE)

    def status_message() -> str:
        for array in reversed(list(arm.diagnostics)):
            for status in array.status:
                if status.name == arm.node_status_name:
                    return status.message
        return ""

    wait_for(
        lambda: "readiness check failing: Unavailable" in status_message(),
        what="the readiness failure in /diagnostics",
    )
    gateway.restart()
    wait_for(lambda: (v := arm.node_status()) and v["ready"] == "true", what="the model ready")
    assert "readiness" not in status_message()
