"""`make demo`'s default planner: the VLM planner (`sequence_ai_ros.vlm_planner`) plans the task
step by step over the node's `act` action with hand-overs; each step it sends becomes one goal
of the demo's records, so the picture marks each step."""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable
from typing import Any

from rclpy.action.client import ClientGoalHandle
from rclpy.parameter import Parameter

from sequence_ai_interfaces.action import Act
from sequence_ai_ros.core.api_key_source import API_KEY_ENV
from sequence_ai_ros.params.launch import SIM_KEY_ENV, node_path

__all__ = ["run_vlm", "vlm_verdict"]

# The task's whole budget, in --max-seconds (each step's own max_seconds): the default task's
# four steps take about 7 s each whatever max_seconds is, so a short --max-seconds still has
# time for all of them.
TASK_BUDGETS = 5.0


def run_vlm(demo: Any, new_goal: Callable[[int, str], Any], grace_s: float) -> int:
    """Run the VLM planner on `demo.args.task` to its end; its exit code (0: the model said
    done). `new_goal(number, step)` is the demo's record of a step's goal; `grace_s` bounds
    the wait for the last result."""
    from sequence_ai_ros.vlm_planner import VlmPlanner

    assert demo.planner is not None
    args = demo.args
    target = node_path(args.namespace)
    base_url = demo.planner.parameters(target).values()["base_url"].string_value
    # The launch's gateway was given this key (run.main); the planner's client reads it here.
    os.environ[API_KEY_ENV] = os.environ[SIM_KEY_ENV]
    namespace = args.namespace.strip("/")
    lock = threading.Lock()

    def on_step(step: str, handle: ClientGoalHandle) -> None:
        now = time.monotonic()
        joints = demo.recording.latest_joints()
        with lock:
            if demo.goals and demo.goals[-1].result is None:
                demo.goals[-1].end_t, demo.goals[-1].end_q = now, joints
            goal = new_goal(len(demo.goals) + 1, step)
            goal.sent_t, goal.start_q, goal.accepted = now, joints, True
            demo.goals.append(goal)
        demo.status.end()
        print(f"step {goal.number}: {step!r}" + (" (hand-over)" if goal.number > 1 else ""))
        if goal.number > 1 and demo.goals[-2].instruction == step:
            print("  (sent again: its goal ended before the arm got there and the model still "
                  "asks for it; a longer --max-seconds lets a step finish)")
        handle.get_result_async().add_done_callback(
            lambda future: demo._finish(
                goal, future.result().status, future.result().result, keep_end=True
            )
        )

    def on_feedback(step: str, feedback: Act.Feedback) -> None:
        with lock:
            goal = next((g for g in reversed(demo.goals) if g.instruction == step), None)
        if goal is not None:
            goal.on_feedback(time.monotonic(), feedback)

    overrides = [
        Parameter("task", value=args.task),
        Parameter("act_action", value=f"/{namespace}/act" if namespace else "/act"),
        Parameter("frames_service", value=f"{target}/current_frames"),
        Parameter("base_url", value=base_url),
        Parameter("step_seconds", value=float(args.max_seconds)),
        Parameter("task_seconds", value=float(args.max_seconds) * TASK_BUDGETS),
        Parameter("joint_states_topic", value=f"/{namespace}/joint_states" if namespace
                  else "joint_states"),
    ]
    planner = VlmPlanner(
        context=demo.planner.context, overrides=overrides, on_step=on_step,
        on_feedback=on_feedback,
    )
    # Destroyed with the demo's own node, once nothing spins them.
    demo.planner.add_node(planner)
    stop = threading.Event()
    code: list[int] = []
    thread = threading.Thread(
        target=lambda: code.append(planner.run(stop)), name="vlm_planner", daemon=True
    )
    print(f"VLM planner on {args.task!r}")
    thread.start()
    try:
        while thread.is_alive():
            with lock:
                current = demo.goals[-1] if demo.goals else None
            if current is not None:
                demo._show(current)
            demo._check_processes()
            thread.join(0.1)
        demo.status.end()
        demo._wait(
            "the last step's result",
            lambda: all(g.result is not None for g in demo.goals),
            grace_s,
        )
    finally:
        stop.set()
        # An interrupted demo too leaves no step's goal running.
        planner.close()
        thread.join(grace_s)
    demo.planner_outcome = planner.outcome
    return code[0] if code else 1


def vlm_verdict(demo: Any) -> str:
    """Why the model did not do the task as planned, plainly; "" when it said done after at
    least two steps, each handed over to the next. In sim_robot's physics world a model can fail
    its task: that is the model's outcome, printed, not the demo's exit status."""
    goals = demo.goals
    if demo.planned != 0:
        why = demo.planner_outcome or "the planner did not finish"
        hint = ""
        if "task time" in why:
            hint = (
                f" after {len(goals)} step(s); each step's goal may run --max-seconds "
                f"{demo.args.max_seconds:g}, the task {TASK_BUDGETS:g} times that: a longer "
                "--max-seconds gives the arm time to reach each step"
            )
        return f"the model did not say done: {why}{hint}"
    if len(goals) < 2:
        return f"the model said done after {len(goals)} step(s); expected at least two"
    if not all(g.result is not None for g in goals):
        return "a step's goal has no result"
    # A step sent again after its goal ended (a short --max-seconds) is said when it happens.
    late = [
        g for g, after in zip(goals, goals[1:])
        if g.result.reason != "handed_over" and after.instruction != g.instruction
    ]
    if late:
        return (
            f"step {late[0].number} ({late[0].instruction!r}) ended {late[0].result.reason} "
            "before the next step took over"
        )
    return ""
