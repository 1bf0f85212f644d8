"""The operator's services at a real robot: ~/ready and ~/verdict are taken only while a trial
waits for them, and the verdict reaches the trial with its reason."""

from __future__ import annotations

import os
import threading
from collections.abc import Iterator
from typing import Any

import pytest
from support.ros_domains import EVALUATION_TESTS, domain
from support.waiting import wait_for

pytest.importorskip("rclpy")
pytestmark = pytest.mark.slow  # starts ROS nodes

import rclpy  # noqa: E402
from rclpy.context import Context  # noqa: E402
from rclpy.executors import MultiThreadedExecutor  # noqa: E402
from rclpy.node import Node  # noqa: E402
from std_srvs.srv import Trigger  # noqa: E402

from sequence_ai_interfaces.srv import Verdict  # noqa: E402
from sequence_ai_lab.demo.planner import call  # noqa: E402
from sequence_ai_lab.evaluation.world import OperatorDesk  # noqa: E402


@pytest.fixture
def desk_and_operator() -> Iterator[tuple[OperatorDesk, Node]]:
    context = Context()
    rclpy.init(args=[], context=context, domain_id=domain(EVALUATION_TESTS))
    namespace = f"/desk_{os.getpid()}"
    evaluator = Node("sequence_ai_evaluate", namespace=namespace, context=context)
    operator = Node("operator", namespace=namespace, context=context)
    desk = OperatorDesk(evaluator)
    executor = MultiThreadedExecutor(num_threads=2, context=context)
    executor.add_node(evaluator)
    executor.add_node(operator)
    spinner = threading.Thread(target=executor.spin, daemon=True)
    spinner.start()
    yield desk, operator
    executor.shutdown(timeout_sec=5.0)
    spinner.join(timeout=5.0)
    evaluator.destroy_node()
    operator.destroy_node()
    rclpy.try_shutdown(context=context)


def _in_thread(target: Any) -> tuple[threading.Thread, list[Any]]:
    got: list[Any] = []
    thread = threading.Thread(target=lambda: got.append(target()), daemon=True)
    thread.start()
    return thread, got


def test_a_verdict_is_refused_unless_a_trial_waits_and_then_reaches_it_with_its_reason(
    desk_and_operator: tuple[OperatorDesk, Node],
) -> None:
    desk, operator = desk_and_operator
    client = operator.create_client(Verdict, desk.verdict_service)
    verdict = Verdict.Request(success=False, reason="cup slipped at lift")
    early = call(client, verdict)
    assert not early.accepted and "no trial is waiting" in early.message
    thread, got = _in_thread(lambda: desk.wait_verdict(30.0))
    wait_for(lambda: call(client, verdict).accepted, "the desk to take the verdict")
    thread.join(timeout=30.0)
    assert got == [(False, "cup slipped at lift")]
    # Taken once: the next call finds no trial waiting.
    assert not call(client, verdict).accepted


def test_ready_starts_the_trial_only_while_it_waits_for_the_scene(
    desk_and_operator: tuple[OperatorDesk, Node],
) -> None:
    desk, operator = desk_and_operator
    client = operator.create_client(Trigger, desk.ready_service)
    assert not call(client, Trigger.Request()).success
    thread, got = _in_thread(lambda: desk.wait_ready(30.0))
    wait_for(lambda: call(client, Trigger.Request()).success, "the desk to take ready")
    thread.join(timeout=30.0)
    assert got == [True]
