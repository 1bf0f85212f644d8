"""Shared test setup: the local gateway fixtures ``gateway`` and ``gateway_factory``, and the
``slow`` mark of every test that starts a ROS node through the shared rclpy contexts."""

from __future__ import annotations

import os
import sys

import pytest
from support.workspace import workspace_environment

pytest_plugins = ("support.gateway_fixture",)

# The session fixtures that start rclpy (test/node/conftest.py, test/safety/conftest.py): a test
# using one, directly or through another fixture, starts a ROS node.
ROS_CONTEXTS = ("ros_context", "safety_ros_context")


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if any(name in getattr(item, "fixturenames", ()) for name in ROS_CONTEXTS):
            item.add_marker(pytest.mark.slow)


def pytest_configure(config: pytest.Config) -> None:
    """README's bare `.venv/bin/python -m pytest test` starts again in the built workspace."""
    env = workspace_environment()
    if env is None:
        return
    capture = config.pluginmanager.getplugin("capturemanager")
    if capture is not None:
        capture.suspend_global_capture(in_=True)  # the restarted run writes to the terminal
    os.execve(sys.executable, [sys.executable, *sys.orig_argv[1:]], env)
