"""A fine-tuned model drives the node: its id in the ``model`` parameter configures (the tuned
row is the base's) and a goal runs on it, with no deployment step."""

from __future__ import annotations

from typing import Any

import pytest
from lifecycle_msgs.msg import Transition
from support.node_harness import node_parameters
from support.waiting import wait_for

import sequence_ai
from sequence_ai_ros.core.node_config import NodeConfig
from sequence_ai_ros.params.model_fit import controller_for, fit_problems
from sequence_ai_ros.params.spec_table import SPECS

# Starts processes or ROS nodes: `-m "not slow"` leaves it out.
pytestmark = pytest.mark.slow


def test_a_tuned_model_configures_and_runs_a_goal(
    ros_system: Any, gateway_factory: Any, tmp_path: Any
) -> None:
    gateway = gateway_factory(train_executor="sim", train_seconds=0.0)
    job = sequence_ai.train("pi05-droid", "s3://lab/kitchen", api_key=gateway.api_key,
                            base_url=gateway.url)
    tuned = job.wait(timeout=30.0, poll_interval=0.02, max_poll_interval=0.1).model_id
    key_file = tmp_path / "tuned.key"
    key_file.write_text(gateway.api_key, encoding="utf-8")
    key_file.chmod(0o600)

    parameters = node_parameters(gateway.url, str(key_file), model=tuned)
    row = {m.id: m for m in sequence_ai.models(base_url=gateway.url)}[tuned]
    config = NodeConfig.from_values({**{n: s.default for n, s in SPECS.items()}, **parameters})
    assert fit_problems(config, row) == []
    assert controller_for(config, row)[0] == "joint_position"

    node, arm = ros_system(**parameters)
    assert arm.transition(Transition.TRANSITION_CONFIGURE), arm.log_text()
    assert arm.transition(Transition.TRANSITION_ACTIVATE)
    assert node.health.snapshot().model == job.id
    wait_for(
        lambda: (v := arm.node_status()) and "never received" not in v.values(),
        what="camera and joint inputs",
    )
    handle, _ = arm.send_goal("pick up the cup", max_seconds=30.0, max_actions=8)
    assert handle.accepted
    _, result = arm.result(handle)
    assert result.reason == "completed", result.message

