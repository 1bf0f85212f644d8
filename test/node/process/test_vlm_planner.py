"""The VLM planner leaves no goal behind (issue 33 items 3 and 10): stopped by SIGINT or SIGTERM,
or failing, it cancels its running step and waits for the result, so the arm holds before it is
gone; a nested chat answer is retried, not fatal; the task's time bounds every call and pause;
control characters never reach a goal and a long refused step is logged cut."""

from __future__ import annotations

import signal
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from action_msgs.msg import GoalStatus
from rclpy.action import ActionServer, CancelResponse, GoalResponse
from rclpy.callback_groups import ReentrantCallbackGroup
from rclpy.executors import MultiThreadedExecutor
from rclpy.node import Node
from rclpy.parameter import Parameter
from sensor_msgs.msg import CompressedImage
from support.node_harness import node_parameters
from support.planner_support import (
    TASK,
    GoalWatch,
    moving,
    moving_after_the_hold,
    planner_process,
)
from support.waiting import wait_for

import sequence_ai
from sequence_ai_interfaces.action import Act
from sequence_ai_interfaces.srv import CurrentFrames
from sequence_ai_ros import vlm_planner
from sequence_ai_ros.vlm_planner import VlmPlanner, clean_text, run_until_stopped

EXIT_GUARD_S = 30.0
# The fake act server refuses longer instructions, as the node's max_instruction_chars does.
MAX_INSTRUCTION = 4096


def test_a_planner_stopped_by_ctrl_c_mid_goal_cancels_it_and_the_arm_holds_before_it_exits(
    ros_system: Any, gateway: Any, key_file: str, tmp_path: Path
) -> None:
    """SIGINT (Ctrl-C) here; SIGTERM is the fault matrix's planner_killed row (test/safety)."""
    _, arm = ros_system(**node_parameters(gateway.url, key_file))
    arm.configure_and_activate()
    goals = GoalWatch(arm, "act")
    # The first answer is nested past Python's parser: a failed call, retried.
    gateway.inject("nested", model="sim-planner")
    start = arm.command_count()
    log = tmp_path / "planner.log"
    process = planner_process(arm, gateway, key_file, log)
    try:
        wait_for(lambda: goals.with_status(GoalStatus.STATUS_EXECUTING), what="a step's goal")
        wait_for(lambda: len(moving(arm, start)) >= 5, what="the arm moving")
        process.send_signal(signal.SIGINT)
        code = process.wait(timeout=EXIT_GUARD_S)
        exited = arm.command_count()
        text = log.read_text()
        assert code == 0, text
        assert "Traceback" not in text and "nested deeper than" in text, text
        # Ended before the planner exited (it had the result): after the node's hold only the
        # hold again.
        assert "ended: canceled" in text, text
        wait_for(lambda: goals.with_status(GoalStatus.STATUS_CANCELED), what="the canceled goal")
        assert not goals.with_status(GoalStatus.STATUS_EXECUTING)
        wait_for(lambda: arm.command_count() > exited, what="a command after the exit")
        assert moving_after_the_hold(arm, start) == [], text
    finally:
        if process.poll() is None:
            process.kill()
            process.wait(timeout=10)


@pytest.fixture
def spin(ros_context: Any) -> Iterator[Callable[[Node], None]]:
    """`spin(node)`: spun until the test ends, then destroyed."""
    executor = MultiThreadedExecutor(num_threads=3, context=ros_context)
    thread = threading.Thread(target=executor.spin, daemon=True)
    nodes: list[Node] = []

    def add(node: Node) -> None:
        nodes.append(node)
        executor.add_node(node)
        if not thread.is_alive():
            thread.start()

    yield add
    executor.shutdown(timeout_sec=10.0)
    thread.join(timeout=10.0)
    for node in nodes:
        node.destroy_node()


def _planner(ros_context: Any, namespace: str, **values: Any) -> VlmPlanner:
    """A planner for the `act` action (and the node's topics) under `namespace`."""
    overrides = {
        "task": TASK,
        "base_url": "http://127.0.0.1:9",
        "backoff_s": 0.1,
        "act_action": f"{namespace}/act",
        "frames_service": f"{namespace}/sequence_ai/current_frames",
        "joint_states_topic": f"{namespace}/joint_states",
        **values,
    }
    return VlmPlanner(
        context=ros_context, overrides=[Parameter(k, value=v) for k, v in overrides.items()]
    )


def test_a_planner_that_fails_mid_goal_cancels_it_before_run_until_stopped_returns(
    ros_system: Any,
    gateway: Any,
    key_file: str,
    ros_context: Any,
    spin: Any,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    _, arm = ros_system(**node_parameters(gateway.url, key_file))
    arm.configure_and_activate()
    goals = GoalWatch(arm, "act")
    answers = iter(["reach above the cup"])
    start = arm.command_count()

    def chat(*_args: Any, **_kwargs: Any) -> Any:
        step = next(answers, None)
        if step is None:
            wait_for(lambda: len(moving(arm, start)) >= 5, what="the arm moving")
            raise RuntimeError("a bug in the planner")
        return sequence_ai.ChatReply("c", "m", "assistant", step, "stop")

    monkeypatch.setattr(vlm_planner.sequence_ai, "chat", chat)
    monkeypatch.setenv("SEQUENCES_API_KEY", "unused")
    planner = _planner(ros_context, arm.get_namespace(), replan_period_s=0.2)
    spin(planner)
    assert run_until_stopped(planner) == 1
    returned = arm.command_count()
    wait_for(lambda: goals.with_status(GoalStatus.STATUS_CANCELED), what="the canceled goal")
    wait_for(lambda: arm.command_count() > returned, what="a command after the return")
    assert moving_after_the_hold(arm, start) == []


class FakeAct(Node):
    """An `act` server that runs each goal until it is canceled; refuses long instructions."""

    def __init__(self, context: Any, namespace: str, ending: int = 0) -> None:
        super().__init__("fake_act", namespace=namespace, context=context)
        self.instructions: list[str] = []
        # The first `ending` goals end on their own at once (as a goal's timeout would).
        self._ending = ending
        # Reentrant: a running goal's execute blocks while its cancel comes in.
        self._server = ActionServer(
            self,
            Act,
            "act",
            execute_callback=self._execute,
            goal_callback=self._goal,
            cancel_callback=lambda _request: CancelResponse.ACCEPT,
            callback_group=ReentrantCallbackGroup(),
        )

    def _goal(self, goal: Act.Goal) -> GoalResponse:
        self.instructions.append(goal.instruction)
        if len(goal.instruction) > MAX_INSTRUCTION:
            return GoalResponse.REJECT
        return GoalResponse.ACCEPT

    def _execute(self, handle: Any) -> Act.Result:
        if self._ending > 0:
            self._ending -= 1
            handle.succeed()
            return Act.Result(reason="timeout")
        wait_for(lambda: handle.is_cancel_requested, timeout_s=EXIT_GUARD_S, what="a cancel")
        handle.canceled()
        return Act.Result(reason="interrupted")

    def destroy_node(self) -> None:
        self._server.destroy()
        super().destroy_node()


def _run(planner: VlmPlanner) -> int:
    """`planner.run` in a thread, with a guard against a hang."""
    codes: list[int] = []
    thread = threading.Thread(target=lambda: codes.append(planner.run(threading.Event())))
    thread.start()
    thread.join(EXIT_GUARD_S)
    assert not thread.is_alive(), "the planner overran its task time by far"
    return codes[0]


def test_task_seconds_bounds_every_chat_call_and_backoff(
    ros_context: Any, spin: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    spin(FakeAct(ros_context, "/bounded"))
    timeouts: list[float] = []

    def stalled_chat(*_args: Any, timeout_s: float, **_kwargs: Any) -> Any:
        # A service that never answers: the call ends at its timeout.
        timeouts.append(timeout_s)
        threading.Event().wait(timeout_s)
        raise sequence_ai.Unavailable(f"timed out after {timeout_s:g}s")

    monkeypatch.setattr(vlm_planner.sequence_ai, "chat", stalled_chat)
    monkeypatch.setenv("SEQUENCES_API_KEY", "unused")
    # A backoff far past the task's time: the wait is cut to what is left.
    planner = _planner(ros_context, "/bounded", task_seconds=1.5, backoff_s=60.0)
    spin(planner)
    assert _run(planner) == 1
    assert planner.outcome == "task time (1.5 s) is up"
    assert timeouts and all(t <= 1.5 for t in timeouts), timeouts


def test_control_characters_never_reach_a_goal_and_a_long_refused_step_is_logged_cut(
    ros_context: Any, spin: Any, monkeypatch: pytest.MonkeyPatch, capfd: pytest.CaptureFixture
) -> None:
    server = FakeAct(ros_context, "/controls")
    spin(server)
    long_step = "x" * 1_000_000
    answers = iter(["\x1b[2J\x07reach above\r\nthe cup\x9b", long_step, "done"])

    def chat(*_args: Any, **_kwargs: Any) -> Any:
        return sequence_ai.ChatReply("c", "m", "assistant", next(answers), "stop")

    monkeypatch.setattr(vlm_planner.sequence_ai, "chat", chat)
    monkeypatch.setenv("SEQUENCES_API_KEY", "unused")
    planner = _planner(ros_context, "/controls", replan_period_s=0.05)
    spin(planner)
    assert _run(planner) == 0
    assert server.instructions == ["[2Jreach above the cup", long_step]
    logged = capfd.readouterr().err
    assert "(1000000 characters)" in logged and "x" * 200 not in logged, logged[-2000:]
    assert "\x1b" not in logged and "\x07" not in logged


def test_a_step_whose_goal_ended_on_its_own_is_sent_again(
    ros_context: Any, spin: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    server = FakeAct(ros_context, "/again", ending=1)
    spin(server)

    def chat(*_args: Any, **_kwargs: Any) -> Any:
        answer = "reach above the cup" if len(server.instructions) < 2 else "done"
        return sequence_ai.ChatReply("c", "m", "assistant", answer, "stop")

    monkeypatch.setattr(vlm_planner.sequence_ai, "chat", chat)
    monkeypatch.setenv("SEQUENCES_API_KEY", "unused")
    planner = _planner(ros_context, "/again", replan_period_s=0.05)
    spin(planner)
    assert _run(planner) == 0
    assert server.instructions == ["reach above the cup"] * 2


@pytest.mark.parametrize(
    ("text", "cleaned"),
    [
        ("grasp the cup", "grasp the cup"),
        ("\x1b[31mgrasp\x1b[0m the cup\x07", "[31mgrasp[0m the cup"),
        ("lift\tthe\ncup\r\n", "lift the cup"),
        ("".join(map(chr, range(0x20))) + "a\x7f" + "".join(map(chr, range(0x80, 0xA0))), "a"),
    ],
)
def test_clean_text_drops_every_c0_and_c1_control(text: str, cleaned: str) -> None:
    assert clean_text(text) == cleaned


class FakeFrames(Node):
    """The node's ~/current_frames under `namespace`: one exterior_1 frame `age_s` old."""

    def __init__(self, context: Any, namespace: str, age_s: float) -> None:
        super().__init__("frames", namespace=namespace, context=context)
        self.age_s = age_s
        self.create_service(CurrentFrames, "sequence_ai/current_frames", self._answer)

    def _answer(self, _request: Any, response: Any) -> Any:
        frame = CompressedImage(format="jpeg", data=b"\xff\xd8\xff\xd9")
        frame.header.frame_id = "exterior_1"
        response.frames.append(frame)
        response.age_s = self.age_s
        return response


def test_frames_older_than_max_frame_age_stay_out_of_the_prompt_and_a_reopened_planner_runs_again(
    ros_context: Any, spin: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    spin(FakeAct(ros_context, "/frames"))
    # The node's last frames are from before a reset: the first step is asked from the text.
    frames = FakeFrames(ros_context, "/frames", age_s=30.0)
    spin(frames)
    prompts: list[str] = []

    def chat(_model: str, messages: Any, **_kwargs: Any) -> Any:
        prompts.append(messages[0]["content"][0]["text"])
        answer = "reach above the cup" if len(prompts) % 2 else "done"
        return sequence_ai.ChatReply("c", "m", "assistant", answer, "stop")

    monkeypatch.setattr(vlm_planner.sequence_ai, "chat", chat)
    monkeypatch.setenv("SEQUENCES_API_KEY", "unused")
    planner = _planner(ros_context, "/frames", replan_period_s=0.05)
    spin(planner)
    wait_for(planner._frames.service_is_ready, what="the frames service")
    assert _run(planner) == 0
    assert prompts and all("Camera views" not in p for p in prompts), prompts
    # Fresh frames go into the next run's prompt, once the planner is reopened.
    frames.age_s = 0.5
    prompts.clear()
    planner.reopen()
    assert _run(planner) == 0 and planner.outcome == "the model says done"
    assert len(prompts) == 2 and all("Camera views: exterior_1" in p for p in prompts), prompts
