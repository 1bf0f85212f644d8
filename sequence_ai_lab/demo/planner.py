"""Play planner for a `sequence_ai` node: lifecycle bring-up, parameters and `act` goals.

One helper for the demo, the launcher, the benchmarks and the tests. `LifecycleClient`,
`ParameterClient` and `ActClient` work on any node whose executor another thread spins;
`Planner` is such a node with its own rclpy context and spinning thread. Every wait blocks on
an rclpy future's done callback, never in a sleep loop.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

import yaml
from action_msgs.msg import GoalStatus
from action_msgs.srv import CancelGoal
from lifecycle_msgs.msg import Transition
from lifecycle_msgs.srv import ChangeState, GetState
from rcl_interfaces.msg import Parameter as ParameterMsg
from rcl_interfaces.msg import ParameterType, ParameterValue, SetParametersResult
from rcl_interfaces.srv import GetParameters, ListParameters, SetParameters
from rclpy.action.client import ClientGoalHandle
from rclpy.client import Client
from rclpy.context import Context
from rclpy.node import Node
from rclpy.parameter import Parameter
from rclpy.task import Future

from sequence_ai_interfaces.action import Act
from sequence_ai_ros.plumbing.action_client import LockedActionClient
from sequence_ai_ros.plumbing.spin_thread import SpinThread

DEADLINE_S = 30.0
# Sent by label: a label names the transition of the node's current state, where a bare id
# may be one that state lacks (rclpy raised on those, ros2/rclpy#1209).
TRANSITIONS = ("configure", "activate", "deactivate", "cleanup", "shutdown")
# lifecycle_msgs/Transition ids → their labels (the three shutdown ids share one label).
LABELS = {
    Transition.TRANSITION_CONFIGURE: "configure",
    Transition.TRANSITION_CLEANUP: "cleanup",
    Transition.TRANSITION_ACTIVATE: "activate",
    Transition.TRANSITION_DEACTIVATE: "deactivate",
    Transition.TRANSITION_UNCONFIGURED_SHUTDOWN: "shutdown",
    Transition.TRANSITION_INACTIVE_SHUTDOWN: "shutdown",
    Transition.TRANSITION_ACTIVE_SHUTDOWN: "shutdown",
}
STATUS_NAMES = {
    GoalStatus.STATUS_SUCCEEDED: "succeeded",
    GoalStatus.STATUS_ABORTED: "aborted",
    GoalStatus.STATUS_CANCELED: "canceled",
}


class PlannerError(RuntimeError):
    """A service or action did not appear or answer in time, or a transition failed."""


def wait_future(future: Future, timeout_s: float, what: str) -> Any:
    """The future's result once its done callback fires; PlannerError after `timeout_s`."""
    done = threading.Event()
    future.add_done_callback(lambda _future: done.set())
    if not done.wait(timeout_s):
        raise PlannerError(f"no answer within {timeout_s:g} s: {what}")
    return future.result()


def call(
    client: Client, request: Any, timeout_s: float = DEADLINE_S, resend_s: float = 0.0
) -> Any:
    """Call a service; with `resend_s`, repeat an idempotent request until one is answered.

    A server can see a request before its reply writer has discovered this client (most often
    with a freshly started process), and that first reply is then lost.
    """
    if not client.wait_for_service(timeout_sec=timeout_s):
        raise PlannerError(f"service {client.srv_name} did not appear within {timeout_s:g} s")
    deadline = time.monotonic() + timeout_s
    while True:
        left = deadline - time.monotonic()
        wait = left if resend_s <= 0 else min(resend_s, left)
        try:
            return wait_future(client.call_async(request), max(wait, 0.01), client.srv_name)
        except PlannerError:
            if resend_s <= 0 or time.monotonic() >= deadline:
                raise


def parameter_value(text: str) -> ParameterValue:
    """The value `ros2 param set NODE NAME TEXT` sends: TEXT read as YAML, typed by what it is."""
    try:
        value = yaml.safe_load(text)
    except yaml.YAMLError:
        value = text
    if isinstance(value, list) and value:
        kinds = {type(v) for v in value}
        if len(kinds) == 1 and kinds <= {bool, int, float, str}:
            return Parameter("value", value=value).get_parameter_value()
    if isinstance(value, (bool, int, float)):
        return Parameter("value", value=value).get_parameter_value()
    if isinstance(value, str):
        return ParameterValue(type=ParameterType.PARAMETER_STRING, string_value=value)
    return ParameterValue(type=ParameterType.PARAMETER_STRING, string_value=text)


class LifecycleClient:
    """Lifecycle transitions and state of the node `target` (fully qualified name)."""

    def __init__(self, node: Node, target: str) -> None:
        self.target = target
        self._change = node.create_client(ChangeState, f"{target}/change_state")
        self._get = node.create_client(GetState, f"{target}/get_state")
        self._answered = False

    def transition(self, transition: str | int, timeout_s: float = DEADLINE_S) -> bool:
        """Ask for one transition ('configure', … or its id), sent by label; True when the
        node made it."""
        label = LABELS.get(transition) if isinstance(transition, int) else transition
        if label not in TRANSITIONS:
            raise PlannerError(
                f"transition {transition!r} is not a lifecycle transition; expected one of "
                f"{', '.join(TRANSITIONS)} or its lifecycle_msgs/Transition id"
            )
        if not self._answered:
            # A transition cannot be re-sent if its reply is lost to a node that has not yet
            # discovered this client; an answered (re-sendable) state query first makes sure
            # it has.
            self.state(timeout_s)
        request = ChangeState.Request(transition=Transition(label=label))
        return bool(call(self._change, request, timeout_s).success)

    def state(self, timeout_s: float = DEADLINE_S) -> str:
        reply = call(self._get, GetState.Request(), timeout_s, resend_s=1.0)
        self._answered = True
        return str(reply.current_state.label)

    def bring_up(self, timeout_s: float = DEADLINE_S) -> None:
        """Configure, then activate; PlannerError naming the transition that failed."""
        for name in ("configure", "activate"):
            if not self.transition(name, timeout_s):
                raise PlannerError(f"{name} of {self.target} failed: see the node's log")


class ParameterClient:
    """The parameter services of the node `target`, as `ros2 param` uses them."""

    def __init__(self, node: Node, target: str) -> None:
        self.target = target
        self._set = node.create_client(SetParameters, f"{target}/set_parameters")
        self._get = node.create_client(GetParameters, f"{target}/get_parameters")
        self._list = node.create_client(ListParameters, f"{target}/list_parameters")

    def set_values(self, values: dict[str, ParameterValue]) -> list[SetParametersResult]:
        """One SetParameters call; one result per parameter, in order."""
        request = SetParameters.Request(
            parameters=[ParameterMsg(name=name, value=value) for name, value in values.items()]
        )
        return list(call(self._set, request).results)

    def set(self, **values: Any) -> list[SetParametersResult]:
        """Python values, typed as rclpy types them."""
        return self.set_values(
            {name: Parameter(name, value=v).get_parameter_value() for name, v in values.items()}
        )

    def set_text(self, name: str, text: str) -> SetParametersResult:
        """Exactly what `ros2 param set <target> <name> <text>` sends."""
        (result,) = self.set_values({name: parameter_value(text)})
        return result

    def values(self) -> dict[str, ParameterValue]:
        names = call(self._list, ListParameters.Request(), resend_s=1.0).result.names
        reply = call(self._get, GetParameters.Request(names=list(names)), resend_s=1.0)
        return dict(zip(names, reply.values, strict=True))


class SentGoal:
    """One `act` goal as a planner sees it: accepted or not, feedback, result, cancel."""

    def __init__(self, handle: ClientGoalHandle, feedback: list[Act.Feedback]) -> None:
        self.handle = handle
        self.feedback = feedback  # appended by the spinning thread; read a copy
        # Asked for at once, as a planner does: the server keeps a result only for a while.
        self._result = handle.get_result_async() if handle.accepted else None

    @property
    def accepted(self) -> bool:
        return bool(self.handle.accepted)

    def done(self) -> bool:
        """The goal has ended and its result is here."""
        return self._result is not None and self._result.done()

    def result(self, timeout_s: float = DEADLINE_S * 2) -> tuple[int, Act.Result]:
        """(goal status, result) once the goal has ended."""
        if self._result is None:
            raise PlannerError("the goal was rejected: it has no result")
        response = wait_future(self._result, timeout_s, "the goal's result")
        return int(response.status), response.result

    def cancel(self, timeout_s: float = DEADLINE_S) -> CancelGoal.Response:
        return wait_future(self.handle.cancel_goal_async(), timeout_s, "the cancel response")


class ActClient:
    """Sends `act` goals to the action `name` (e.g. `/robot2/act`)."""

    def __init__(self, node: Node, name: str) -> None:
        self.name = name
        self._client = LockedActionClient(node, Act, name)
        self._destroyed = False

    def wait_for_server(self, timeout_s: float = DEADLINE_S) -> None:
        if not self._client.wait_for_server(timeout_sec=timeout_s):
            raise PlannerError(f"action {self.name} did not appear within {timeout_s:g} s")

    def send(
        self,
        instruction: str,
        max_seconds: float,
        max_actions: int = 0,
        *,
        on_feedback: Callable[[Act.Feedback], Any] | None = None,
        timeout_s: float = DEADLINE_S,
        handover: bool = False,
    ) -> SentGoal:
        """Send a goal and wait for its acceptance or rejection; `handover`: take over the
        running goal's motion instead of preempting it."""
        self.wait_for_server(timeout_s)
        feedback: list[Act.Feedback] = []

        def received(msg: Any) -> None:
            feedback.append(msg.feedback)
            if on_feedback is not None:
                on_feedback(msg.feedback)

        goal = Act.Goal(
            instruction=instruction, max_seconds=float(max_seconds), max_actions=max_actions,
            handover=handover,
        )
        sent = self._client.send_goal_async(goal, feedback_callback=received)
        handle = wait_future(sent, timeout_s, f"goal response for {instruction!r}")
        return SentGoal(handle, feedback)

    def destroy(self) -> None:
        """Once; call it while no executor spins the node (`Planner.close` does)."""
        if not self._destroyed:
            self._destroyed = True
            self._client.destroy()


class Planner:
    """A node of its own (own context, own spinning thread) that plays planner.

    For the demo, the launcher and the benchmarks; tests put the clients on their own node.
    """

    def __init__(
        self, name: str = "sequence_ai_planner", namespace: str = "/", threads: int = 2
    ) -> None:
        import rclpy

        self.context = Context()
        # No arguments: a caller's own command line is not ROS remappings.
        rclpy.init(args=[], context=self.context)
        self.node = Node(name, namespace=namespace, context=self.context)
        self._spin = SpinThread(name, threads, self.context)
        self._spin.add_node(self.node)
        # Destroyed at close(), once nothing spins them: an entity destroyed under a spinning
        # executor fails its pending callbacks ("cannot use Destroyable ...").
        self._acts: list[ActClient] = []
        self._guests: list[Node] = []

    def lifecycle(self, target: str) -> LifecycleClient:
        return LifecycleClient(self.node, target)

    def parameters(self, target: str) -> ParameterClient:
        return ParameterClient(self.node, target)

    def act(self, name: str = "act") -> ActClient:
        client = ActClient(self.node, name)
        self._acts.append(client)
        return client

    def add_node(self, node: Node) -> None:
        """Spin `node` (of this context) too; close() destroys it."""
        self._guests.append(node)
        self._spin.add_node(node)

    def close(self) -> None:
        import rclpy

        self._spin.stop()
        for client in self._acts:
            client.destroy()
        for node in self._guests:
            node.destroy_node()
        self.node.destroy_node()
        rclpy.try_shutdown(context=self.context)
