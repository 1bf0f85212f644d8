"""Messages a new user meets first: the no-key configure error, the late-camera advice, the
deactivate transition in the log."""

from __future__ import annotations

from typing import Any

import pytest
from lifecycle_msgs.msg import Transition
from support.node_harness import node_parameters
from support.waiting import wait_for

from sequence_ai_ros.inputs.observation_cache import late_image_advice

# Starts processes or ROS nodes: `-m "not slow"` leaves it out.
pytestmark = pytest.mark.slow


def test_without_a_key_configure_names_the_variable_and_the_parameter(
    ros_system: Any, gateway: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("SEQUENCES_API_KEY", raising=False)
    node, arm = ros_system(**node_parameters(gateway.url, ""))
    assert not arm.transition(Transition.TRANSITION_CONFIGURE)
    problem = node.health.snapshot().problem
    assert "SEQUENCES_API_KEY" in problem and "api_key_file" in problem
    assert "api_key=" not in problem
    # Whole in `ros2 topic echo /diagnostics`, which cuts strings at 128 characters.
    status = wait_for(
        lambda: next((s for a in list(arm.diagnostics) for s in a.status
                      if "SEQUENCES_API_KEY" in s.message), None),
        what="the problem on /diagnostics",
    )
    assert len(status.message) <= 128, status.message


@pytest.mark.parametrize(
    ("environ", "words", "not_words"),
    [
        ({}, "give the camera driver and this node the large-frames", "already in use"),
        ({"FASTRTPS_DEFAULT_PROFILES_FILE": "/x/share/config/fastdds_large_frames.xml"},
         "already in use: lower the camera load", "give the camera driver"),
        ({"FASTDDS_DEFAULT_PROFILES_FILE": "/etc/site.xml"}, "(/etc/site.xml) carries large",
         "already in use"),
    ],
    ids=["none", "large-frames", "another"],
)
def test_the_late_camera_advice_fits_the_transport_in_use(
    environ: dict[str, str], words: str, not_words: str
) -> None:
    advice = late_image_advice(environ)
    assert words in advice and not_words not in advice


def test_deactivating_is_logged(ros_system: Any, gateway: Any, key_file: str) -> None:
    _, arm = ros_system(**node_parameters(gateway.url, key_file))
    arm.configure_and_activate()
    assert arm.transition(Transition.TRANSITION_DEACTIVATE)
    wait_for(lambda: "inactive: act goals are rejected" in arm.log_text(), what="the log line")
