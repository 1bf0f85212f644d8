"""`ros2 run sequence_ai_ros vlm_planner --ros-args -p task:="put the cup on the blue block"`: an
example planner a lab can copy. Every `replan_period_s` it looks at the node's current frames
(`~/current_frames`) and the arm's joint states, asks a chat model (`sequence_ai.chat`) "what is
the next step, or done?", and sends a changed step as an `act` goal with `handover` (the arm
does not stop between steps). It cancels the running goal when the model says done or the
task's time is up, and retries a failed chat call with backoff; `task_seconds` bounds every
call and pause. However it ends (done, time up, Ctrl-C, SIGTERM, an error) it cancels the
running step's goal and waits for its result before it exits: no goal outlives it.

It speaks only ROS interfaces to the node (the `act` action, the frame service, joint states)
and only the public client API to the service. docs/node.md ("A VLM planner") describes it.
"""

from __future__ import annotations

import math
import re
import signal
import sys
import threading
import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass
from types import FrameType
from typing import Any

import rclpy
from action_msgs.msg import GoalStatus
from rclpy.action.client import ClientGoalHandle
from rclpy.context import Context
from rclpy.node import Node
from rclpy.parameter import Parameter
from rclpy.qos import qos_profile_sensor_data
from rclpy.signals import SignalHandlerOptions
from rclpy.task import Future
from sensor_msgs.msg import JointState

import sequence_ai
from sequence_ai_interfaces.action import Act
from sequence_ai_interfaces.srv import CurrentFrames
from sequence_ai_ros.core.api_key_source import ApiKeyError, read_api_key
from sequence_ai_ros.goals.instruction import shown
from sequence_ai_ros.plumbing.action_client import LockedActionClient
from sequence_ai_ros.plumbing.spin_thread import SpinThread

__all__ = ["PlannerSettings", "VlmPlanner", "clean_text", "main", "prompt", "run_until_stopped"]

DONE = "done"
# A chat or service call that does not answer within this is a failed call (retried).
CALL_TIMEOUT_S = 10.0
MAX_BACKOFF_S = 8.0
# How long the planner waits, as it ends, for the running goal's result after its cancel: the
# node ends a goal within a control period, so this is for a node that no longer answers.
END_TIMEOUT_S = 5.0
# C0, DEL and C1: a terminal acts on them (ESC starts a sequence, BEL rings); a step has no use.
_CONTROLS = re.compile("[\x00-\x1f\x7f-\x9f]")
STATUS_NAMES = {
    GoalStatus.STATUS_SUCCEEDED: "succeeded",
    GoalStatus.STATUS_ABORTED: "aborted",
    GoalStatus.STATUS_CANCELED: "canceled",
}


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
    # Older frames are left out of the prompt: the last ones the node sent may be from before
    # the scene changed (a previous task, a reset), and the next step must not be judged on them.
    max_frame_age_s: float
    # The arm's joints the prompt lists, in this order (a gripper joint is left out).
    joint_names: tuple[str, ...]


def prompt(
    task: str, step: str | None, joints: list[float] | None, views: list[str] | None = None
) -> str:
    """The question for the chat model: the task, the step under way, the arm's joints and the
    view of each image sent with it, in order."""
    lines = [f"Task: {task}"]
    if step is not None:
        lines.append(f"Current step: {step}")
    if joints is not None:
        lines.append("Joint positions: [" + ", ".join(f"{q:.3f}" for q in joints) + "]")
    if views:
        lines.append("Camera views: " + ", ".join(views))
    lines.append("What is the next step, or done?")
    return "\n".join(lines)


def clean_text(text: str) -> str:
    """`text` without control characters (line breaks and tabs become spaces), its runs of
    whitespace one space: what a chat answer may put into a log or a goal."""
    return " ".join(_CONTROLS.sub(lambda m: " " if m.group().isspace() else "", text).split())


def _wait(future: Future, timeout_s: float) -> Any:
    """The future's result, or None if it is not done within `timeout_s`."""
    if future.done():
        # A done future's callback would be a task of its executor, which may have stopped.
        return future.result()
    done = threading.Event()
    future.add_done_callback(lambda _f: done.set())
    if not done.wait(max(timeout_s, 0.0)):
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
        self._act = LockedActionClient(self, Act, self.settings.act_action)
        self._frames = self.create_client(CurrentFrames, self.settings.frames_service)
        # Lock order: a leaf (nothing is taken under it).
        self._lock = threading.Lock()
        # Under _lock: the arm's latest joint positions.
        self._joints: list[float] | None = None
        # Best effort takes joint states from reliable and best-effort publishers alike.
        self.create_subscription(
            JointState, self.settings.joint_states_topic, self._on_joints, qos_profile_sensor_data
        )
        # Held while a step is sent and its acceptance awaited, and by close(): a step is
        # either sent before close() takes over its goal, or never. Lock order: _closing, then
        # _sending.
        self._closing = threading.Lock()
        self._sending = threading.Lock()
        # Under _closing: what the first close() found (None: not closed yet).
        self._close_result: bool | None = None
        # Under _sending: no step is sent once closed; the running step's goal and its result.
        self._closed = False
        self._goal: ClientGoalHandle | None = None
        self._result: Future | None = None
        self._goal_step = ""
        # Under _sending: a send whose acceptance did not come in time (it may still).
        self._unanswered: Future | None = None
        # Why run() ended, in words (for a program that embeds the planner).
        self.outcome = ""

    def _declare(self) -> PlannerSettings:
        defaults: dict[str, Any] = {
            "task": "",
            "act_action": "act",
            "frames_service": "sequence_ai/current_frames",
            "chat_model": "sim-planner",
            "replan_period_s": 1.0,
            "task_seconds": 120.0,
            "step_seconds": 60.0,
            "base_url": "",
            "api_key_file": "",
            "joint_states_topic": "joint_states",
            "backoff_s": 0.5,
            "max_frame_age_s": 2.0,
            "joint_names": [f"panda_joint{i}" for i in range(1, 8)],
        }
        values = {k: self.declare_parameter(k, v).value for k, v in defaults.items()}
        values["joint_names"] = tuple(values["joint_names"])
        settings = PlannerSettings(**values)
        if not settings.task.strip():
            raise ValueError('task is ""; expected the task, e.g. -p task:="pick up the cup"')
        for name in ("replan_period_s", "task_seconds", "step_seconds", "backoff_s",
                     "max_frame_age_s"):
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
        """Plan until done (0), the task's time is up (1) or `stop` is set (1); the running
        step's goal is canceled and its end awaited (`close`) before it returns."""
        code = 1
        try:
            code = self._plan(stop)
        finally:
            ended = self.close()
        return code if ended else 1

    def _plan(self, stop: threading.Event) -> int:
        settings = self.settings
        try:
            api_key = read_api_key(settings.api_key_file)
        except ApiKeyError as exc:
            return self._finish(str(exc), 1)
        deadline = time.monotonic() + settings.task_seconds

        def left() -> float:
            return deadline - time.monotonic()

        if not self._act.wait_for_server(timeout_sec=min(CALL_TIMEOUT_S, left())):
            return self._finish(f"no act action server at {settings.act_action}", 1)
        step: str | None = None
        backoff = settings.backoff_s
        while not stop.is_set():
            if left() <= 0:
                return self._finish(f"task time ({settings.task_seconds:g} s) is up", 1)
            try:
                answer = self._ask(step, api_key, deadline)
            except sequence_ai.SequencesError as exc:
                pause = max(min(backoff, left()), 0.0)
                self.get_logger().warning(
                    f"chat failed ({shown(clean_text(str(exc)))}); again in {pause:.2g} s"
                )
                stop.wait(pause)
                backoff = min(backoff * 2, MAX_BACKOFF_S)
                continue
            backoff = settings.backoff_s
            if answer.lower() == DONE:
                return self._finish("the model says done", 0)
            # A step whose goal ended on its own (timeout, a stale input) goes out again while
            # the model still asks for it: the planner never waits on a goal that is gone.
            if answer and (answer != step or self._step_ended()):
                if self._send(answer, handover=step is not None):
                    step = answer
            stop.wait(max(min(settings.replan_period_s, left()), 0.0))
        return self._finish("stopped", 1)

    def _step_ended(self) -> bool:
        with self._sending:
            return self._result is not None and self._result.done()

    def _finish(self, outcome: str, code: int) -> int:
        self.outcome = outcome
        if code == 0:
            self.get_logger().info(outcome)
        else:
            self.get_logger().warning(outcome)
        return code

    def _ask(self, step: str | None, api_key: str | None, deadline: float) -> str:
        """The model's answer, cleaned; its calls end by `deadline` (the task's)."""
        with self._lock:
            joints = self._joints
        frames = self._current_frames(min(CALL_TIMEOUT_S, deadline - time.monotonic()))
        views = [f.header.frame_id for f in frames]
        content: list[dict[str, object]] = [
            {"type": "text", "text": prompt(self.settings.task, step, joints, views)}
        ]
        content += [sequence_ai.image_block(bytes(f.data)) for f in frames]
        timeout_s = min(CALL_TIMEOUT_S, deadline - time.monotonic())
        if timeout_s <= 0:
            raise sequence_ai.Unavailable("the task's time ran out before the chat call")
        reply = sequence_ai.chat(
            self.settings.chat_model,
            [{"role": "user", "content": content}],
            api_key=api_key,
            base_url=self.settings.base_url or None,
            timeout_s=timeout_s,
        )
        return clean_text(reply.text)

    def _current_frames(self, timeout_s: float) -> list[Any]:
        """The frames the node last sent the model, if younger than `max_frame_age_s` (none
        before a goal's first request: the first step is then asked for from the text)."""
        if timeout_s <= 0 or not self._frames.service_is_ready():
            return []
        response = _wait(self._frames.call_async(CurrentFrames.Request()), timeout_s)
        if response is None or not response.age_s <= self.settings.max_frame_age_s:
            return []
        return list(response.frames)

    def _send(self, step: str, *, handover: bool) -> bool:
        goal = Act.Goal(instruction=step, max_seconds=self.settings.step_seconds, handover=handover)
        on_feedback = self._on_feedback

        def feedback(msg: Any) -> None:
            if on_feedback is not None:
                on_feedback(step, msg.feedback)

        with self._sending:
            if self._closed:
                return False
            sent = self._act.send_goal_async(goal, feedback_callback=feedback)
            handle = _wait(sent, CALL_TIMEOUT_S)
            if handle is None:
                self._unanswered = sent
                self.get_logger().warning(
                    f"step {shown(step)}: no answer from {self.settings.act_action} within "
                    f"{CALL_TIMEOUT_S:g} s"
                )
                return False
            if not handle.accepted:
                self.get_logger().warning(f"step {shown(step)} was not accepted")
                return False
            self._goal, self._result, self._goal_step = handle, handle.get_result_async(), step
        self.get_logger().info(f"step: {shown(step)}" + (" (hand-over)" if handover else ""))
        if self._on_step is not None:
            self._on_step(step, handle)
        return True

    def reopen(self) -> None:
        """After a run() has returned: plan again from the first step (an evaluation runs one
        planner per trial). Not while a run or a close is under way."""
        with self._closing, self._sending:
            self._closed = False
            self._close_result = None
            self.outcome = ""

    def close(self, timeout_s: float = END_TIMEOUT_S) -> bool:
        """Send no more steps; cancel the running step's goal and wait up to `timeout_s` for
        its result. True when no goal of this planner is left running (or none was). A second
        call (another thread's) returns once the first has."""
        if not self._closing.acquire(timeout=CALL_TIMEOUT_S + 2 * timeout_s):
            self.get_logger().error("the planner's close did not end: its goal may still run")
            return False
        try:
            if self._close_result is None:
                self._close_result = self._close(timeout_s)
            return self._close_result
        finally:
            self._closing.release()

    def _close(self, timeout_s: float) -> bool:
        # A send under way holds the lock for at most its acceptance wait.
        if not self._sending.acquire(timeout=CALL_TIMEOUT_S + timeout_s):
            self.get_logger().error("a step's send did not end: its goal may still run")
            return False
        try:
            self._closed = True
            goal, result, step, unanswered = (
                self._goal,
                self._result,
                self._goal_step,
                self._unanswered,
            )
            self._goal = self._result = self._unanswered = None
        finally:
            self._sending.release()
        deadline = time.monotonic() + timeout_s
        ended = True
        if unanswered is not None:
            # Accepted after the planner stopped waiting: a goal it must end too.
            late = _wait(unanswered, timeout_s)
            if late is not None and late.accepted:
                ended = self._end(late, late.get_result_async(), "a late-accepted step", deadline)
        if goal is not None and result is not None:
            ended = self._end(goal, result, step, deadline) and ended
        return ended

    def _end(self, goal: ClientGoalHandle, result: Future, step: str, deadline: float) -> bool:
        if not result.done():
            # The result says how the goal ended; the cancel's own answer adds nothing.
            goal.cancel_goal_async()
        response = _wait(result, deadline - time.monotonic())
        if response is None:
            self.get_logger().error(
                f"step {shown(step)}: its goal did not end within {END_TIMEOUT_S:g} s of the "
                "cancel; the node may still be moving the arm"
            )
            return False
        status = STATUS_NAMES.get(response.status, f"status {response.status}")
        self.get_logger().info(f"step {shown(step)} ended: {status}, {response.result.reason}")
        return True

    def destroy_node(self) -> None:
        # The action client is not one of the entities Node.destroy_node() destroys.
        self._act.destroy()
        super().destroy_node()


class _Interrupted(BaseException):
    """SIGINT or SIGTERM, raised in the main thread while it waits for the planning thread."""


def _interrupt(signum: int, _frame: FrameType | None) -> None:
    # Later signals are ignored: the goal's cancel and its result are awaited, bounded.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    raise _Interrupted(signum)


def run_until_stopped(planner: VlmPlanner) -> int:
    """Plan in a thread of its own until the plan ends, SIGINT or SIGTERM (0: a clean stop), or
    an error (1); in every case the running goal is canceled and its end awaited. Call from
    the main thread (it takes SIGINT and SIGTERM over for the while)."""
    stop = threading.Event()
    codes: list[int] = []

    def plan() -> None:
        try:
            codes.append(planner.run(stop))
        except Exception as exc:  # noqa: BLE001 - any failure ends in close() and exit 1
            if not stop.is_set():
                planner.get_logger().error(
                    f"the planner failed: {type(exc).__name__}: {shown(clean_text(str(exc)))}"
                )
                traceback.print_exc()
            codes.append(1)

    worker = threading.Thread(target=plan, name="vlm_planner-plan", daemon=True)
    previous = {s: signal.signal(s, _interrupt) for s in (signal.SIGINT, signal.SIGTERM)}
    try:
        worker.start()
        # Only joins here: the handler's exception lands in no lock this thread holds.
        worker.join()
        return codes[0] if codes else 1
    except _Interrupted as interrupted:
        stop.set()
        name = signal.Signals(interrupted.args[0]).name
        planner.get_logger().info(f"{name}: ending the running step")
        # The planning thread may be inside a chat call: close() does not wait for it.
        return 0 if planner.close() else 1
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)


def main(argv: list[str] | None = None) -> int:
    # rclpy's own handlers would shut the context down at once, and with it the cancel the
    # running goal still needs; run_until_stopped answers SIGINT and SIGTERM instead.
    rclpy.init(
        args=argv if argv is not None else sys.argv,
        signal_handler_options=SignalHandlerOptions.NO,
    )
    planner: VlmPlanner | None = None
    spin = SpinThread("vlm_planner")
    code = 0
    try:
        planner = VlmPlanner()
        spin.add_node(planner)
        code = run_until_stopped(planner)
    except ValueError as exc:
        print(f"vlm_planner: {exc}", file=sys.stderr)
        code = 2
    except (KeyboardInterrupt, _Interrupted):
        # Before the planning began, or as run_until_stopped handed the signals back.
        code = 0 if planner is None or planner.close() else 1
    finally:
        # The process ends: a signal now would only cut the teardown short.
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        spin.stop()
        if planner is not None:
            planner.destroy_node()
        rclpy.try_shutdown()
    return code


if __name__ == "__main__":
    sys.exit(main())
