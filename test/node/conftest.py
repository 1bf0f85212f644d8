"""ROS test settings: loopback discovery and a domain of our own, set before rclpy starts."""

from __future__ import annotations

import itertools
import os
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from support.ros_domains import NODE_TESTS, domain

# The node tests' domain, in this run's block (test/support/ros_domains.py).
ROS_TEST_DOMAIN_ID = domain(NODE_TESTS)

# Set at collection, before any fixture starts rclpy; node processes inherit them.
os.environ["ROS_AUTOMATIC_DISCOVERY_RANGE"] = "LOCALHOST"
os.environ["ROS_LOCALHOST_ONLY"] = "1"
os.environ["ROS_DOMAIN_ID"] = str(ROS_TEST_DOMAIN_ID)

_namespaces = itertools.count()


@pytest.fixture(scope="session")
def ros_context() -> Iterator[Any]:
    """One rclpy context for the node tests, on the test domain."""
    import rclpy
    from rclpy.context import Context

    context = Context()
    rclpy.init(context=context, domain_id=ROS_TEST_DOMAIN_ID)
    yield context
    rclpy.shutdown(context=context)


@pytest.fixture
def key_file(tmp_path: Path, gateway: Any) -> str:
    """The gateway's API key in a file, as a deployment passes it."""
    path = tmp_path / "sequences.key"
    path.write_text(gateway.api_key + "\n", encoding="utf-8")
    path.chmod(0o600)
    return str(path)


@pytest.fixture
def ros_system(ros_context: Any) -> Iterator[Callable[..., tuple[Any, Any]]]:
    """`ros_system(**parameters)` → (node, arm).

    Like `main()`, each node is spun by a `SingleThreadedExecutor` of its own; the test arms
    share a multi-threaded one. Each call gets its own namespace, so nodes of earlier tests
    never answer.
    """
    from rclpy.executors import MultiThreadedExecutor, SingleThreadedExecutor
    from rclpy.parameter import Parameter
    from support.node_harness import ArmHarness

    from sequence_ai_ros.node import SequenceAiNode

    arms = MultiThreadedExecutor(num_threads=4, context=ros_context)
    started: list[tuple[Any, Any, threading.Thread]] = []
    arm_nodes: list[Any] = []
    arm_spinner = threading.Thread(target=arms.spin, daemon=True)

    def start(**values: Any) -> tuple[Any, Any]:
        namespace = f"/robot{next(_namespaces)}"
        node = SequenceAiNode(
            namespace=namespace,
            context=ros_context,
            parameter_overrides=[Parameter(k, value=v) for k, v in values.items()],
        )
        executor = SingleThreadedExecutor(context=ros_context)
        executor.add_node(node)
        spinner = threading.Thread(target=executor.spin, daemon=True)
        spinner.start()
        started.append((node, executor, spinner))
        arm = ArmHarness(namespace, ros_context)
        arms.add_node(arm)
        arm_nodes.append(arm)
        if not arm_spinner.is_alive():
            arm_spinner.start()
        return node, arm

    yield start
    for node, _, _ in started:
        node.shut_down_now()
    for node, executor, spinner in started:
        # Nothing may spin a node while it is destroyed.
        executor.shutdown(timeout_sec=10.0)
        spinner.join(timeout=10.0)
        node.destroy_node()
    arms.shutdown(timeout_sec=10.0)
    arm_spinner.join(timeout=10.0)
    for arm in arm_nodes:
        arm.destroy_node()
