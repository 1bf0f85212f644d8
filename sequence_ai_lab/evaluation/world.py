"""The world a trial runs in, over ROS: the physics world's ~/reset, ~/task_state, ~/perturb and
parameters (layout_seed, time_mode, task) — or, on a real robot, an operator who resets the
scene and gives the verdict through the evaluator's own ~/ready and ~/verdict services."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

from rclpy.node import Node
from std_srvs.srv import Trigger

from sequence_ai_interfaces.msg import TaskState
from sequence_ai_interfaces.srv import Perturb, Verdict
from sequence_ai_lab.demo.planner import ParameterClient, PlannerError, call

SERVICE_TIMEOUT_S = 30.0


class WorldError(RuntimeError):
    """The world refused or did not answer; the message says what and why."""


class WorldMissing(WorldError):
    """No world answers at the path given: nothing to evaluate in."""


class World:
    """A simulated world's services and task state, seen from the evaluator's node.

    `_lock` guards `_latest`; the task-state callback (the executor's thread) notifies
    `_changed`, on which the trial's thread waits.
    """

    def __init__(self, node: Node, path: str) -> None:
        self.path = path.rstrip("/")
        self._reset = node.create_client(Trigger, f"{self.path}/reset")
        self._perturb = node.create_client(Perturb, f"{self.path}/perturb")
        self._parameters = ParameterClient(node, self.path)
        # Lock order: a leaf (nothing is taken under it).
        self._lock = threading.Lock()
        self._changed = threading.Condition(self._lock)
        self._latest: TaskState | None = None
        node.create_subscription(TaskState, f"{self.path}/task_state", self._on_state, 10)

    def check_present(self, timeout_s: float) -> None:
        """WorldMissing unless the world offers ~/reset within `timeout_s`."""
        if not self._reset.wait_for_service(timeout_sec=timeout_s):
            raise WorldMissing(
                f"no {self.path}/reset within {timeout_s:g} s: is a world with the trial "
                "interface running (the physics world's sim_robot, or --world NODE; --world none "
                "at a real robot)?"
            )

    def _on_state(self, state: TaskState) -> None:
        with self._changed:
            self._latest = state
            self._changed.notify_all()

    def latest(self) -> TaskState | None:
        with self._lock:
            return self._latest

    def wait_state(
        self, accept: Callable[[TaskState], bool], timeout_s: float, what: str
    ) -> TaskState:
        """The first task state `accept` takes (the latest one included)."""
        deadline = time.monotonic() + timeout_s
        with self._changed:
            while self._latest is None or not accept(self._latest):
                left = deadline - time.monotonic()
                if left <= 0:
                    raise WorldError(
                        f"{self.path}/task_state: no state with {what} within {timeout_s:g} s"
                    )
                self._changed.wait(left)
            return self._latest

    def wait_next(self, timeout_s: float) -> TaskState | None:
        """The next task state after now, or None when none came within `timeout_s`."""
        with self._changed:
            before = self._latest
            self._changed.wait_for(lambda: self._latest is not before, timeout_s)
            return self._latest if self._latest is not before else None

    def set(self, **values: object) -> None:
        """Set world parameters (layout_seed, time_mode, task); WorldError if refused."""
        try:
            outcomes = self._parameters.set(**values)
        except PlannerError as exc:
            raise WorldError(f"{self.path} parameters: {exc}") from None
        for name, outcome in zip(values, outcomes):
            if not outcome.successful:
                raise WorldError(f"{self.path} refused {name}={values[name]!r}: {outcome.reason}")

    def reset(self) -> str:
        """A new trial with the next layout; the world's message (it names the seed)."""
        try:
            reply = call(self._reset, Trigger.Request(), SERVICE_TIMEOUT_S)
        except PlannerError as exc:
            raise WorldError(f"{self.path}/reset: {exc}") from None
        if not reply.success:
            raise WorldError(f"{self.path}/reset refused: {reply.message}")
        return str(reply.message)

    def perturb(self, what: str, offset: tuple[float, float, float], at_s: float) -> str:
        request = Perturb.Request(object=what, offset=list(offset), at_s=at_s)
        try:
            reply = call(self._perturb, request, SERVICE_TIMEOUT_S)
        except PlannerError as exc:
            raise WorldError(f"{self.path}/perturb: {exc}") from None
        if not reply.accepted:
            raise WorldError(f"{self.path}/perturb refused: {reply.message}")
        return str(reply.message)


class OperatorDesk:
    """The evaluator's ~/ready (std_srvs/Trigger: "the scene is reset") and ~/verdict
    (Verdict: "the trial succeeded or not, and why") for an operator at a real robot.

    A call is accepted only while a trial waits for it; the executor's thread answers, the
    trial's thread waits. `_lock` guards the waiting flags and the verdict.
    """

    def __init__(self, node: Node) -> None:
        # Lock order: a leaf (nothing is taken under it).
        self._lock = threading.Lock()
        self._ready = threading.Event()
        self._verdict_given = threading.Event()
        self._want_ready = False
        self._want_verdict = False
        self._verdict: tuple[bool, str] = (False, "")
        name = node.get_fully_qualified_name()
        self.ready_service = f"{name}/ready"
        self.verdict_service = f"{name}/verdict"
        node.create_service(Trigger, "~/ready", self._on_ready)
        node.create_service(Verdict, "~/verdict", self._on_verdict)

    def _on_ready(self, _request: Trigger.Request, response: Trigger.Response) -> (
        Trigger.Response
    ):
        with self._lock:
            response.success = self._want_ready
            response.message = "starting the trial" if self._want_ready else (
                "no trial is waiting for the scene")
            if self._want_ready:
                self._want_ready = False
                self._ready.set()
        return response

    def _on_verdict(self, request: Verdict.Request, response: Verdict.Response) -> (
        Verdict.Response
    ):
        with self._lock:
            response.accepted = self._want_verdict
            response.message = "recorded" if self._want_verdict else (
                "no trial is waiting for a verdict")
            if self._want_verdict:
                self._want_verdict = False
                self._verdict = (bool(request.success), str(request.reason))
                self._verdict_given.set()
        return response

    def wait_ready(self, timeout_s: float | None = None) -> bool:
        with self._lock:
            self._ready.clear()
            self._want_ready = True
        got = self._ready.wait(timeout_s)
        with self._lock:
            self._want_ready = False
        return got

    def wait_verdict(self, timeout_s: float | None = None) -> tuple[bool, str] | None:
        with self._lock:
            self._verdict_given.clear()
            self._want_verdict = True
        got = self._verdict_given.wait(timeout_s)
        with self._lock:
            self._want_verdict = False
            return self._verdict if got else None
