"""`ros2 run sequence_ai_ros vlm_planner --ros-args -p task:="put the cup on the blue block"`: an
example planner a lab can copy. Every `replan_period_s` it looks at the node's current frames
(`~/current_frames`) and the arm's joint states, asks a chat model (`sequence_ai.chat`) "what is
the next step, or done?", and sends a changed step as an `act` goal with `handover` (the arm
does not stop between steps). It cancels the running goal when the model says done or the
task's time is up, and retries a failed chat call with backoff.

It speaks only ROS interfaces to the node (the `act` action, the frame service, joint states)
and only the public client API to the service. docs/node.md ("A VLM planner") describes it.
"""

from __future__ import annotations

import math
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import rclpy
from action_msgs.msg import GoalStatus
from rclpy.action import ActionClient
from rclpy.action.client import ClientGoalHandle
from rclpy.context import Context
from rclpy.executors import MultiThreadedExecutor
from rclpy.node import Node
from rclpy.parameter import Parameter
from rclpy.task import Future
from sensor_msgs.msg import JointState

import sequence_ai
from sequence_ai_interfaces.action import Act
from sequence_ai_interfaces.srv import CurrentFrames
from sequence_ai_ros.bringup.api_key_source import read_api_key

__all__ = ["PlannerSettings", "VlmPlanner", "main", "prompt"]

DONE = "done"
# A chat or service call that does not answer within this is a failed call (retried).
CALL_TIMEOUT_S = 10.0
MAX_BACKOFF_S = 8.0


@dataclass(frozen=True)
class PlannerSettings:
    """The planner's parameters."""

    task: str
    act_action: str
    frames_service: str
    chat_model: str
    replan_period_s: float
    task_seconds: float
    step_seconds: float
    base_url: str
    api_key_file: str
    joint_states_topic: str
    backoff_s: float
    # The arm's joints the prompt lists, in this order (a gripper joint is left out).
    joint_names: tuple[str, ...]


def prompt(task: str, step: str | None, joints: list[float] | None) -> str:
    """The question for the chat model: the task, the step under way, the arm's joints."""
    lines = [f"Task: {task}"]
    if step is not None:
        lines.append(f"Current step: {step}")
    if joints is not None:
        lines.append("Joint positions: [" + ", ".join(f"{q:.3f}" for q in joints) + "]")
    lines.append("What is the next step, or done?")
    return "\n".join(lines)


def _wait(future: Future, timeout_s: float) -> Any:
    """The future's result, or None if it is not done within `timeout_s`."""
    done = threading.Event()
    future.add_done_callback(lambda _f: done.set())
    if not done.wait(timeout_s):
        return None
    return future.result()


# Told each step sent (its text and goal handle), and each feedback of a step's goal.
StepCallback = Callable[[str, ClientGoalHandle], object]
FeedbackCallback = Callable[[str, Act.Feedback], object]


class VlmPlanner(Node):
    """Plans a task step by step over the node's `act` action. `context`, `overrides` and the
    callbacks let a program embed it (the demo does)."""

    def __init__(
        self,
        *,
        context: Context | None = None,
        overrides: list[Parameter] | None = None,
        on_step: StepCallback | None = None,
        on_feedback: FeedbackCallback | None = None,
    ) -> None:
        super().__init__("vlm_planner", context=context, parameter_overrides=overrides or [])
        self._on_step = on_step
        self._on_feedback = on_feedback
        self.settings = self._declare()
        self._act = ActionClient(self, Act, self.settings.act_action)
        self._frames = self.create_client(CurrentFrames, self.settings.frames_service)
        # Lock order: a leaf (nothing is taken under it).
        self._lock = threading.Lock()
        # Under _lock: the arm's latest joint positions.
        self._joints: list[float] | None = None
        self.create_subscription(
            JointState, self.settings.joint_states_topic, self._on_joints, 10
        )
        self._goal: ClientGoalHandle | None = None

    def _declare(self) -> PlannerSettings:
        defaults: dict[str, Any] = {
            "task": "", "act_action": "act", "frames_service": "sequence_ai/current_frames",
            "chat_model": "sim-planner",
            "replan_period_s": 1.0, "task_seconds": 120.0, "step_seconds": 60.0,
            "base_url": "", "api_key_file": "", "joint_states_topic": "joint_states",
            "backoff_s": 0.5, "joint_names": [f"panda_joint{i}" for i in range(1, 8)],
        }
        values = {k: self.declare_parameter(k, v).value for k, v in defaults.items()}
        values["joint_names"] = tuple(values["joint_names"])
        settings = PlannerSettings(**values)
        if not settings.task.strip():
            raise ValueError('task is ""; expected the task, e.g. -p task:="pick up the cup"')
        for name in ("replan_period_s", "task_seconds", "step_seconds", "backoff_s"):
            value = getattr(settings, name)
            if not (math.isfinite(value) and value > 0):
                raise ValueError(f"{name} is {value}; expected a finite number of seconds > 0")
        return settings

    def _on_joints(self, msg: JointState) -> None:
        index = {name: i for i, name in enumerate(msg.name)}
        if not all(name in index for name in self.settings.joint_names):
            return
        joints = [float(msg.position[index[name]]) for name in self.settings.joint_names]
        with self._lock:
            self._joints = joints

    def run(self, stop: threading.Event) -> int:
        """Plan until done (0), the task's time is up (1) or `stop` is set (1)."""
        settings = self.settings
        api_key = read_api_key(settings.api_key_file)
        if not self._act.wait_for_server(timeout_sec=CALL_TIMEOUT_S):
            self.get_logger().error(f"no act action server at {settings.act_action}")
            return 1
        deadline = time.monotonic() + settings.task_seconds
        step: str | None = None
        backoff = settings.backoff_s
        while not stop.is_set():
            if time.monotonic() >= deadline:
                self.get_logger().warning(f"task time ({settings.task_seconds:g} s) is up")
                self._cancel()
                return 1
            try:
                answer = self._ask(step, api_key)
            except sequence_ai.SequencesError as exc:
                self.get_logger().warning(f"chat failed ({exc}); again in {backoff:g} s")
                stop.wait(backoff)
                backoff = min(backoff * 2, MAX_BACKOFF_S)
                continue
            backoff = settings.backoff_s
            if answer.lower() == DONE:
                self.get_logger().info("the model says done")
                self._cancel()
                return 0
            if answer and answer != step:
                if self._send(answer, handover=step is not None):
                    step = answer
            stop.wait(settings.replan_period_s)
        self._cancel()
        return 1

    def _ask(self, step: str | None, api_key: str | None) -> str:
        with self._lock:
            joints = self._joints
        content: list[dict[str, object]] = [
            {"type": "text", "text": prompt(self.settings.task, step, joints)}
        ]
        content += [sequence_ai.image_block(bytes(f.data)) for f in self._current_frames()]
        reply = sequence_ai.chat(
            self.settings.chat_model, [{"role": "user", "content": content}],
            api_key=api_key, base_url=self.settings.base_url or None, timeout_s=CALL_TIMEOUT_S,
        )
        return reply.text.strip()

    def _current_frames(self) -> list[Any]:
        """The frames the node's next request will build on (none before its first)."""
        if not self._frames.service_is_ready():
            return []
        response = _wait(self._frames.call_async(CurrentFrames.Request()), CALL_TIMEOUT_S)
        return [] if response is None else list(response.frames)

    def _send(self, step: str, *, handover: bool) -> bool:
        goal = Act.Goal(
            instruction=step, max_seconds=self.settings.step_seconds, handover=handover
        )
        on_feedback = self._on_feedback

        def feedback(msg: Any) -> None:
            if on_feedback is not None:
                on_feedback(step, msg.feedback)

        sent = self._act.send_goal_async(goal, feedback_callback=feedback)
        handle = _wait(sent, CALL_TIMEOUT_S)
        if handle is None or not handle.accepted:
            self.get_logger().warning(f"step {step!r} was not accepted")
            return False
        self._goal = handle
        self.get_logger().info(f"step: {step}" + (" (hand-over)" if handover else ""))
        if self._on_step is not None:
            self._on_step(step, handle)
        return True

    def _cancel(self) -> None:
        goal, self._goal = self._goal, None
        if goal is None:
            return
        status = getattr(goal, "status", GoalStatus.STATUS_UNKNOWN)
        if status in (GoalStatus.STATUS_ACCEPTED, GoalStatus.STATUS_EXECUTING,
                      GoalStatus.STATUS_UNKNOWN):
            _wait(goal.cancel_goal_async(), CALL_TIMEOUT_S)


def main(argv: list[str] | None = None) -> int:
    rclpy.init(args=argv if argv is not None else sys.argv)
    try:
        planner = VlmPlanner()
    except ValueError as exc:
        print(f"vlm_planner: {exc}", file=sys.stderr)
        rclpy.try_shutdown()
        return 2
    executor = MultiThreadedExecutor(num_threads=2)
    executor.add_node(planner)
    spinner = threading.Thread(target=executor.spin, name="vlm_planner-spin", daemon=True)
    spinner.start()
    stop = threading.Event()
    try:
        return planner.run(stop)
    except KeyboardInterrupt:
        stop.set()
        return 1
    finally:
        executor.shutdown()
        planner.destroy_node()
        rclpy.try_shutdown()


if __name__ == "__main__":
    sys.exit(main())
