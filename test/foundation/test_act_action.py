"""The generated Act action completes a real ActionServer/ActionClient round trip."""

from __future__ import annotations

import math
import os
import threading
from collections.abc import Iterator
from typing import Any

import pytest
import rclpy
from action_msgs.msg import GoalStatus
from action_msgs.srv import CancelGoal
from rclpy.action import ActionClient, ActionServer, CancelResponse, GoalResponse
from rclpy.action.server import ServerGoalHandle
from rclpy.callback_groups import ReentrantCallbackGroup
from rclpy.context import Context
from rclpy.executors import MultiThreadedExecutor
from rclpy.node import Node
from rclpy.task import Future
from support.ros_domains import ACTION_TESTS, domain
from support.waiting import wait_for

from sequence_ai_interfaces.action import Act

DEADLINE_S = 30.0
# Unique per test process, so parallel runs of the suite cannot answer each other's goals.
DOMAIN_ID = domain(ACTION_TESTS)
ACTION_NAME = f"foundation_act_{os.getpid()}"
COMPLETED_STEPS = 3


class ActServer:
    """A stand-in for the node: plays a fixed number of steps, or runs until cancelled."""

    def __init__(self, node: Node) -> None:
        self.cancel_requested = threading.Event()
        # Set by the client on the last step's feedback: rclpy drops feedback that arrives after
        # the result, so the server finishes only once its last feedback was seen.
        self.last_feedback_seen = threading.Event()
        self.server = ActionServer(
            node,
            Act,
            ACTION_NAME,
            execute_callback=self.execute,
            goal_callback=self.on_goal,
            cancel_callback=self.on_cancel,
            callback_group=ReentrantCallbackGroup(),
        )

    def on_goal(self, goal: Act.Goal) -> GoalResponse:
        return GoalResponse.ACCEPT if goal.max_seconds > 0 else GoalResponse.REJECT

    def on_cancel(self, _goal_handle: ServerGoalHandle) -> CancelResponse:
        self.cancel_requested.set()
        return CancelResponse.ACCEPT

    def execute(self, goal_handle: ServerGoalHandle) -> Act.Result:
        request: Act.Goal = goal_handle.request
        goal_handle.publish_feedback(Act.Feedback(status="starting", warming_eta_s=math.nan))
        actions = 0
        while request.max_actions == 0 or actions < request.max_actions:
            if goal_handle.is_cancel_requested:
                goal_handle.canceled()
                return self.result("interrupted", actions, stopped_early=True)
            actions += 1
            goal_handle.publish_feedback(
                Act.Feedback(status="running", actions=actions, chunks=1, warming_eta_s=math.nan)
            )
            if request.max_actions == 0:
                # An open-ended goal runs until its cancel arrives (bounded by the test deadline).
                if not self.cancel_requested.wait(DEADLINE_S):
                    goal_handle.abort()
                    return self.result("timeout", actions, stopped_early=True)
        if not self.last_feedback_seen.wait(DEADLINE_S):
            goal_handle.abort()
            return self.result("timeout", actions, stopped_early=True)
        goal_handle.succeed()
        return self.result("completed", actions, stopped_early=False)

    @staticmethod
    def result(reason: str, actions: int, *, stopped_early: bool) -> Act.Result:
        return Act.Result(
            reason=reason,
            stopped_early=stopped_early,
            actions=actions,
            chunks=1,
            elapsed_s=0.5,
            underruns=0,
            underrun_s=0.0,
            max_seam_jump=math.nan,
            message="",
        )


def answer_of(future: Future, what: str) -> Any:
    """Block until an rclpy future completes (the executor spins in another thread)."""
    done = threading.Event()
    future.add_done_callback(lambda _future: done.set())
    wait_for(done.is_set, f"{what}: an answer", timeout_s=DEADLINE_S, wake=done)
    return future.result()


@pytest.fixture
def ros(monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[Node, ActServer]]:
    """A private rclpy context with a server node and a client node spun by one executor."""
    monkeypatch.setenv("ROS_AUTOMATIC_DISCOVERY_RANGE", "LOCALHOST")
    monkeypatch.setenv("ROS_LOCALHOST_ONLY", "1")
    context = Context()
    rclpy.init(context=context, domain_id=DOMAIN_ID)
    server_node = Node("foundation_act_server", context=context)
    client_node = Node("foundation_act_client", context=context)
    server = ActServer(server_node)
    executor = MultiThreadedExecutor(num_threads=4, context=context)
    executor.add_node(server_node)
    executor.add_node(client_node)
    spinner = threading.Thread(target=executor.spin, daemon=True)
    spinner.start()
    try:
        yield client_node, server
    finally:
        executor.shutdown(timeout_sec=DEADLINE_S)
        spinner.join(DEADLINE_S)
        server.server.destroy()
        server_node.destroy_node()
        client_node.destroy_node()
        context.try_shutdown()


def connected_client(node: Node) -> ActionClient:
    client = ActionClient(node, Act, ACTION_NAME, callback_group=ReentrantCallbackGroup())
    assert client.wait_for_server(timeout_sec=DEADLINE_S), f"no {ACTION_NAME} server appeared"
    return client


@pytest.mark.slow
def test_goal_completes_with_feedback_and_result(ros: tuple[Node, ActServer]) -> None:
    node, server = ros
    client = connected_client(node)
    feedback: list[Act.Feedback] = []

    def on_feedback(msg: Any) -> None:
        feedback.append(msg.feedback)
        if msg.feedback.actions == COMPLETED_STEPS:
            server.last_feedback_seen.set()

    goal = Act.Goal(instruction="put the cup in the sink", max_seconds=5.0,
                    max_actions=COMPLETED_STEPS)
    handle = answer_of(client.send_goal_async(goal, feedback_callback=on_feedback), "send goal")
    assert handle.accepted
    answer = answer_of(handle.get_result_async(), "goal result")

    assert answer.status == GoalStatus.STATUS_SUCCEEDED
    assert answer.result.reason == "completed"
    assert not answer.result.stopped_early
    assert answer.result.actions == COMPLETED_STEPS
    assert math.isnan(answer.result.max_seam_jump)
    assert feedback[-1].status == "running"
    assert feedback[-1].actions == COMPLETED_STEPS
    assert {f.status for f in feedback} <= {"starting", "running"}
    assert [f.actions for f in feedback] == sorted(f.actions for f in feedback)
    assert all(math.isnan(f.warming_eta_s) for f in feedback)
    client.destroy()


@pytest.mark.slow
def test_goal_without_a_time_budget_is_rejected(ros: tuple[Node, ActServer]) -> None:
    node, _server = ros
    client = connected_client(node)
    handle = answer_of(client.send_goal_async(Act.Goal(instruction="wave", max_seconds=0.0)),
                      "send goal")
    assert not handle.accepted
    client.destroy()


@pytest.mark.slow
def test_cancel_stops_a_running_goal(ros: tuple[Node, ActServer]) -> None:
    node, server = ros
    client = connected_client(node)
    running = threading.Event()

    def on_feedback(msg: Any) -> None:
        if msg.feedback.status == "running":
            running.set()

    handle = answer_of(
        client.send_goal_async(Act.Goal(instruction="wave", max_seconds=60.0),
                               feedback_callback=on_feedback),
        "send goal",
    )
    assert handle.accepted
    assert running.wait(DEADLINE_S), "the goal never reported running"

    cancel = answer_of(handle.cancel_goal_async(), "cancel")
    assert cancel.return_code == CancelGoal.Response.ERROR_NONE
    assert [bytes(g.goal_id.uuid) for g in cancel.goals_canceling] == [bytes(handle.goal_id.uuid)]
    answer = answer_of(handle.get_result_async(), "cancelled goal result")

    assert server.cancel_requested.is_set()
    assert answer.status == GoalStatus.STATUS_CANCELED
    assert answer.result.reason == "interrupted"
    assert answer.result.stopped_early
    client.destroy()
