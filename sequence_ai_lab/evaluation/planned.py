"""A task sent through the VLM planner (`evaluate --planner CHAT_MODEL`): its steps go out as
`act` goals, each handed over to the next, until the chat model says done, the task's time is
up, or the evaluator stops it (the world judged success). A trial's figures are its goals'
together: `combined` adds their counts and keeps the reason that decides the verdict.
"""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Sequence

from rclpy.action.client import ClientGoalHandle
from rclpy.parameter import Parameter
from rclpy.task import Future

from sequence_ai_interfaces.action import Act
from sequence_ai_lab.demo.planner import Planner

# Act result reasons that are a fault of the run, not a verdict on the task.
FAULT_REASONS = ("stale_input", "validate")


class PlannedTask:
    """One VLM planner node for a whole evaluation (on the evaluator's own context), run once
    per trial; each run's step results are collected for its trial."""

    def __init__(
        self, host: Planner, *, task: str, chat_model: str, node_path: str, base_url: str,
        step_seconds: float, task_seconds: float,
    ) -> None:
        from sequence_ai_ros.vlm_planner import VlmPlanner

        prefix = node_path.rsplit("/", 1)[0]
        self.task_seconds = task_seconds
        overrides = [
            Parameter("task", value=task),
            Parameter("chat_model", value=chat_model),
            Parameter("act_action", value=f"{prefix}/act"),
            Parameter("frames_service", value=f"{node_path}/current_frames"),
            Parameter("base_url", value=base_url),
            Parameter("step_seconds", value=float(step_seconds)),
            Parameter("task_seconds", value=float(task_seconds)),
            Parameter("joint_states_topic", value=f"{prefix}/joint_states"),
        ]
        # Lock order: a leaf (nothing is taken under it).
        self._lock = threading.Lock()
        # Under _lock: the result futures of this run's steps, in the order they were sent.
        self._results: list[Future] = []
        self.planner = VlmPlanner(context=host.context, overrides=overrides,
                                  on_step=self._on_step)
        # Destroyed with the evaluator's own node, once nothing spins them.
        host.add_node(self.planner)

    def _on_step(self, _step: str, handle: ClientGoalHandle) -> None:
        result = handle.get_result_async()
        with self._lock:
            self._results.append(result)

    def run(self, stop: threading.Event) -> int:
        """One trial's planning, from the first step to its end (the planner's exit code); the
        running step's goal is canceled and its end awaited before it returns."""
        with self._lock:
            self._results = []
        self.planner.reopen()
        return self.planner.run(stop)

    @property
    def outcome(self) -> str:
        return self.planner.outcome

    def results(self, timeout_s: float) -> list[Act.Result]:
        """The results of this run's steps, waiting up to `timeout_s` for the last ones."""
        with self._lock:
            futures = list(self._results)
        deadline = time.monotonic() + timeout_s
        for future in futures:
            left_s = deadline - time.monotonic()
            if not future.done() and left_s > 0:
                done = threading.Event()
                future.add_done_callback(lambda _f, done=done: done.set())
                done.wait(left_s)
        return [f.result().result for f in futures if f.done() and f.result() is not None]


def combined(results: Sequence[Act.Result], elapsed_s: float) -> Act.Result:
    """The trial's result from its steps': counts added, `elapsed_s` the trial's own, and the
    reason of the first fault, else of the last step."""
    total = Act.Result()
    if not results:
        total.reason = "no step was sent"
        total.elapsed_s = elapsed_s
        return total
    deciding = next((r for r in results if is_fault(r.reason)), results[-1])
    total.reason, total.message = deciding.reason, deciding.message
    total.stopped_early = deciding.stopped_early
    for name in ("actions", "chunks", "underruns", "requests", "discarded", "rows_beyond_horizon"):
        setattr(total, name, sum(int(getattr(r, name)) for r in results))
    for name in ("underrun_s", "no_fresh_command_s"):
        setattr(total, name, sum(float(getattr(r, name)) for r in results))
    jumps = [float(r.max_seam_jump) for r in results if math.isfinite(r.max_seam_jump)]
    total.max_seam_jump = max(jumps) if jumps else math.nan
    total.elapsed_s = elapsed_s
    total.requests_per_s = total.speed_min = total.speed_mean = math.nan
    total.instruction_lag_s = math.nan
    return total


def is_fault(reason: str) -> bool:
    """An act result's reason that is a fault of the run (the trial fails for it)."""
    return reason in FAULT_REASONS or reason.startswith("raised:")
