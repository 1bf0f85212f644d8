"""`sim_robot` with its physics world, in a process of its own: ~/reset starts the next layout
with the arm home, `layout_seed` set live picks the next one, ~/perturb moves the cup,
frozen time advances only with commands, ~/task_state follows the trial."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from support.ros_domains import SIM_ROBOT_TESTS, domain
from support.sim_process import simulator
from support.waiting import wait_for

rclpy = pytest.importorskip("rclpy")
pytest.importorskip("mujoco")

from rcl_interfaces.srv import SetParameters  # noqa: E402
from rclpy.client import Client  # noqa: E402
from rclpy.context import Context  # noqa: E402
from rclpy.executors import SingleThreadedExecutor  # noqa: E402
from rclpy.node import Node  # noqa: E402
from rclpy.parameter import Parameter  # noqa: E402
from sensor_msgs.msg import JointState  # noqa: E402
from std_msgs.msg import Float64MultiArray  # noqa: E402
from std_srvs.srv import Trigger  # noqa: E402

from sequence_ai_interfaces.msg import TaskState  # noqa: E402
from sequence_ai_interfaces.srv import Perturb  # noqa: E402
from sequence_ai_lab.robots.shared.arm import HOME  # noqa: E402
from sequence_ai_lab.robots.shared.scene import layout  # noqa: E402

# Starts processes or ROS nodes: `-m "not slow"` leaves it out.
pytestmark = pytest.mark.slow

DOMAIN_ID = domain(SIM_ROBOT_TESTS)
NAMESPACE = "/world"
DEADLINE_S = 30.0


class Probe:
    """Listens to joint states and the task state; calls the services."""

    def __init__(self, context: Context) -> None:
        self.node = Node("world_probe", namespace=NAMESPACE, context=context)
        self.lock = threading.Lock()
        self.joints: list[JointState] = []
        self.tasks: list[TaskState] = []
        self.node.create_subscription(JointState, "joint_states", self._keep(self.joints), 50)
        self.node.create_subscription(TaskState, "sim_robot/task_state", self._keep(self.tasks), 50)
        self.positions = self.node.create_publisher(
            Float64MultiArray, "forward_position_controller/commands", 10
        )
        self.reset = self.node.create_client(Trigger, "sim_robot/reset")
        self.parameters = self.node.create_client(SetParameters, "sim_robot/set_parameters")
        self.perturb = self.node.create_client(Perturb, "sim_robot/perturb")

    def _keep(self, into: list[Any]) -> Callable[[Any], None]:
        def keep(msg: Any) -> None:
            with self.lock:
                into.append(msg)

        return keep

    def last_task(self) -> TaskState | None:
        with self.lock:
            return self.tasks[-1] if self.tasks else None

    def last_q(self) -> np.ndarray | None:
        with self.lock:
            return np.array(self.joints[-1].position[:7]) if self.joints else None

    def call(self, client: Client, request: Any) -> Any:
        assert client.wait_for_service(timeout_sec=DEADLINE_S)
        future = client.call_async(request)
        wait_for(future.done, "the service's response", timeout_s=DEADLINE_S)
        return future.result()


@pytest.fixture
def world_probe(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Probe]:
    monkeypatch.setenv("ROS_DOMAIN_ID", str(DOMAIN_ID))
    # One small camera: the world, its services and its topics are under test, not the frames.
    cameras = {"views": "[exterior_1]", "image_width": "128", "image_height": "72"}
    robot = "sequence_ai_lab.robots.sim_robot.robot"
    with simulator(robot, NAMESPACE, tmp_path / "sim.log", cameras):
        context = Context()
        rclpy.init(context=context, domain_id=DOMAIN_ID)
        probe = Probe(context)
        executor = SingleThreadedExecutor(context=context)
        executor.add_node(probe.node)
        spinner = threading.Thread(target=executor.spin, daemon=True)
        spinner.start()
        try:
            yield probe
        finally:
            executor.shutdown()
            spinner.join(timeout=5)
            probe.node.destroy_node()
            rclpy.shutdown(context=context)


def test_reset_brings_the_arm_home_and_the_next_layout_and_task_state_follows(
    world_probe: Probe,
) -> None:
    probe = world_probe
    wait_for(lambda: probe.last_task() is not None, "~/task_state", timeout_s=DEADLINE_S)
    first = probe.last_task()
    assert first is not None
    assert (first.task, first.seed, first.trial, first.success) == ("pick up the cup", 0, 1, False)
    quantities = dict(zip(first.names, first.values))
    assert {"cup_height", "cup_block_distance", "cup_upright", "grasped"} <= set(quantities)
    assert abs(quantities["cup_height"]) < 0.005 and quantities["cup_upright"] == 1.0
    cup, block = np.array(layout(0).cup[:2]), np.array(layout(0).block[:2])
    assert quantities["cup_block_distance"] == pytest.approx(np.linalg.norm(cup - block), abs=0.005)

    # Move the arm away, then reset: home again, the next seed's layout, a new trial.
    moved = HOME + np.array([0.3, 0.0, 0.0, 0.2, 0.0, 0.0, 0.0])
    probe.positions.publish(Float64MultiArray(data=moved.tolist()))

    def arm_moved() -> bool:
        q = probe.last_q()
        return q is not None and bool(np.linalg.norm(q - HOME) > 0.1)

    wait_for(arm_moved, "the arm to move", timeout_s=DEADLINE_S)
    response = probe.call(probe.reset, Trigger.Request())
    assert response.success and "layout seed 1" in response.message

    def home_in_trial(trial: int, seed: int) -> bool:
        task, q = probe.last_task(), probe.last_q()
        return (
            task is not None and task.trial == trial and task.seed == seed
            and q is not None and bool(np.allclose(q, HOME, atol=0.01))
        )  # fmt: skip

    wait_for(lambda: home_in_trial(2, 1), "trial 2 with seed 1, the arm home", timeout_s=DEADLINE_S)

    # layout_seed set live: the next reset takes exactly that seed, and the task set with it.
    request = SetParameters.Request(
        parameters=[
            Parameter("layout_seed", value=42).to_parameter_msg(),
            Parameter("task", value="put the cup on the blue block").to_parameter_msg(),
        ]
    )
    results = probe.call(probe.parameters, request).results
    assert all(r.successful for r in results), [r.reason for r in results]
    assert probe.call(probe.reset, Trigger.Request()).success
    wait_for(lambda: home_in_trial(3, 42), "trial 3 with seed 42", timeout_s=DEADLINE_S)
    state = probe.last_task()
    assert state is not None and state.task == "put the cup on the blue block"
    cup, block = np.array(layout(42).cup[:2]), np.array(layout(42).block[:2])
    distance = dict(zip(state.names, state.values))["cup_block_distance"]
    assert distance == pytest.approx(np.linalg.norm(cup - block), abs=0.005)

    # ~/perturb moves the cup now: the distance to the block follows.
    moved_cup = cup + [0.05, 0.0]
    request = Perturb.Request(object="cup", offset=[0.05, 0.0, 0.0], at_s=0.0)
    response = probe.call(probe.perturb, request)
    assert response.accepted, response.message

    def distance_is(expected: float) -> bool:
        state = probe.last_task()
        values = dict(zip(state.names, state.values)) if state is not None else {}
        return abs(values.get("cup_block_distance", -1.0) - expected) < 0.005

    wait_for(
        lambda: distance_is(float(np.linalg.norm(moved_cup - block))),
        "the moved cup on ~/task_state",
        timeout_s=DEADLINE_S,
    )
    refused = probe.call(probe.perturb, Perturb.Request(object="table", at_s=0.0))
    assert not refused.accepted and "object: got 'table'" in refused.message
    # The issue 41 reproduction: an offset off the table is refused naming the workspace, and
    # the world's trial stays sound (no MuJoCo reset behind the reply).
    far = Perturb.Request(object="cup", offset=[2.0e10, 0.0, 0.0], at_s=0.0)
    refused = probe.call(probe.perturb, far)
    assert not refused.accepted and "table's workspace, x in [0.2, 0.9] m" in refused.message
    state = probe.last_task()
    assert state is not None and dict(zip(state.names, state.values))["fault"] == 0.0

    # Frozen time: the world waits for commands, each arm command one control period (1/15 s).
    request = SetParameters.Request(
        parameters=[Parameter("time_mode", value="frozen").to_parameter_msg()]
    )
    assert all(r.successful for r in probe.call(probe.parameters, request).results)
    with probe.lock:
        seen = len(probe.tasks)
    wait_for(lambda: len(probe.tasks) >= seen + 3, "task states", timeout_s=DEADLINE_S)
    frozen_at = probe.last_task().trial_s
    with probe.lock:
        seen = len(probe.tasks)
    wait_for(lambda: len(probe.tasks) >= seen + 5, "more task states", timeout_s=DEADLINE_S)
    assert probe.last_task().trial_s == frozen_at  # the wall clock ran, the world did not
    for _ in range(3):
        probe.positions.publish(Float64MultiArray(data=HOME.tolist()))
    wait_for(
        lambda: abs(probe.last_task().trial_s - (frozen_at + 3 / 15)) < 1e-6,
        "three control periods of world time",
        timeout_s=DEADLINE_S,
    )

    # A value the world cannot take is refused with the reason, the running one kept.
    bad = SetParameters.Request(parameters=[Parameter("task", value="dance").to_parameter_msg()])
    (result,) = probe.call(probe.parameters, bad).results
    assert not result.successful and "task='dance' is refused" in result.reason


def test_sim_robot_offers_the_gains_the_physics_has() -> None:
    from sequence_ai_lab.robots.sim_robot.parameters import SPECS
    from sequence_ai_lab.robots.sim_robot.physics import ARM_GAINS

    assert set(SPECS["arm_gains"].choices or ()) == set(ARM_GAINS)
