"""A stand-in for the physics world's trial interface (docs/evaluation.md, WORLD_CONTRACT):
~/reset, ~/task_state, ~/perturb and the layout_seed, time_mode and task parameters, judging
success from the arm commands it hears, so a trial can fail.

Success: `commands_to_succeed` arm commands heard within the trial (a goal plays 15 a second;
an idle node republishes its hold once a second, and a dry run sends the arm nothing).
`fail_reset_seeds` makes ~/reset refuse those seeds (a forced fault).
Run: python -c "from support.task_world import main; main()" --ros-args ...
"""

from __future__ import annotations

import math
import threading
import time

from rclpy.node import Node
from rclpy.parameter import Parameter
from std_msgs.msg import Float64MultiArray
from std_srvs.srv import Trigger

from sequence_ai_interfaces.msg import TaskState
from sequence_ai_interfaces.srv import Perturb
from sequence_ai_lab.robots.shared.process import spin_until_signal

STATE_HZ = 20.0
# In frozen time the world advances one control period (pi05-droid's 15 Hz) per command.
FROZEN_PERIOD_S = 1.0 / 15.0


class TaskWorld(Node):
    """Trials counted from the arm's commands. `_lock` guards the trial's fields, written by
    the command callback and the services, read by the state timer (one executor thread in
    practice; the lock keeps that an implementation detail)."""

    def __init__(self) -> None:
        super().__init__("task_world")
        self.declare_parameter("layout_seed", 0)
        self.declare_parameter("time_mode", "realtime")
        self.declare_parameter("task", "pick up the cup")
        self.declare_parameter("commands_to_succeed", 30)
        self.declare_parameter("fail_reset_seeds", [-1])
        self.declare_parameter("command_topic", "forward_position_controller/commands")
        self._lock = threading.Lock()
        self._seed = -1
        # Every set of layout_seed (even to the value it had) is the next reset's seed.
        self._pending: int | None = int(self.get_parameter("layout_seed").value)
        self.add_post_set_parameters_callback(self._on_set)
        self._trial = 0
        self._started = time.monotonic()
        self._commands = 0
        self._travel = 0.0
        self._last: list[float] | None = None
        self._success_s = math.nan
        self._perturbations: list[str] = []
        self._publisher = self.create_publisher(TaskState, "~/task_state", 10)
        self.create_service(Trigger, "~/reset", self._on_reset)
        self.create_service(Perturb, "~/perturb", self._on_perturb)
        self.create_subscription(
            Float64MultiArray, str(self.get_parameter("command_topic").value), self._on_command,
            50,
        )
        self.create_timer(1.0 / STATE_HZ, self._publish)

    def _on_set(self, parameters: list[Parameter]) -> None:
        for parameter in parameters:
            if parameter.name == "layout_seed":
                with self._lock:
                    self._pending = int(parameter.value)

    def _trial_s(self) -> float:
        if self.get_parameter("time_mode").value == "frozen":
            return self._commands * FROZEN_PERIOD_S
        return time.monotonic() - self._started

    def _on_reset(self, _request: Trigger.Request, response: Trigger.Response) -> (
        Trigger.Response
    ):
        with self._lock:
            seed = self._pending if self._pending is not None else self._seed + 1
            self._pending = None
            if seed in list(self.get_parameter("fail_reset_seeds").value):
                response.success = False
                response.message = f"seed {seed}: layout cannot be placed (forced fault)"
                self._seed = seed
                return response
            self._seed, self._trial = seed, self._trial + 1
            self._started = time.monotonic()
            self._commands, self._travel, self._last = 0, 0.0, None
            self._success_s = math.nan
        response.success = True
        response.message = f"trial {self._trial}: seed {seed}"
        return response

    def _on_perturb(self, request: Perturb.Request, response: Perturb.Response) -> (
        Perturb.Response
    ):
        with self._lock:
            self._perturbations.append(f"{request.object}@{request.at_s:g}")
        response.accepted = request.object in ("cup", "block")
        response.message = f"{request.object} moved by {list(request.offset)} at {request.at_s:g} s"
        return response

    def _on_command(self, msg: Float64MultiArray) -> None:
        target = list(msg.data)
        with self._lock:
            self._commands += 1
            if self._last is not None and len(self._last) == len(target):
                self._travel += sum(abs(a - b) for a, b in zip(target, self._last))
            self._last = target
            needed = int(self.get_parameter("commands_to_succeed").value)
            if self._commands >= needed and math.isnan(self._success_s) and self._trial:
                self._success_s = self._trial_s()

    def _publish(self) -> None:
        with self._lock:
            state = TaskState(
                task=str(self.get_parameter("task").value), seed=max(self._seed, 0),
                trial=self._trial, trial_s=self._trial_s(),
                success=not math.isnan(self._success_s), success_s=self._success_s,
                names=["travel_rad", "commands"], values=[self._travel, float(self._commands)],
            )
        state.header.stamp = self.get_clock().now().to_msg()
        self._publisher.publish(state)


def main(args: list[str] | None = None) -> None:
    spin_until_signal(TaskWorld, args)
