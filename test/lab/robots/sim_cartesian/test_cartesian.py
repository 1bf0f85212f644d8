"""`sim_cartesian` over real rclpy: ee_pose, joint states and the front camera published; a
twist stream and a pose target move the hand; a command in another frame is ignored."""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager

import numpy as np
import pytest
from support.ros_domains import SIM_ROBOT_TESTS, domain
from support.waiting import wait_for

rclpy = pytest.importorskip("rclpy")

from geometry_msgs.msg import PoseStamped, TwistStamped  # noqa: E402
from rclpy.context import Context  # noqa: E402
from rclpy.executors import SingleThreadedExecutor  # noqa: E402
from rclpy.node import Node  # noqa: E402
from rclpy.parameter import Parameter  # noqa: E402
from rclpy.qos import qos_profile_sensor_data  # noqa: E402
from sensor_msgs.msg import Image, JointState  # noqa: E402

from sequence_ai_lab.robots.sim_cartesian.cartesian import (  # noqa: E402
    CAMERA_TOPIC,
    TARGET_TOPIC,
    TWIST_TOPIC,
    SimCartesian,
)

DOMAIN_ID = domain(SIM_ROBOT_TESTS)
DEADLINE_S = 20.0
READY_TCP = np.array([0.307, 0.0, 0.487])


class Probe:
    """Records sim_cartesian's outputs and sends it commands."""

    def __init__(self, context: Context) -> None:
        self.node = Node("cartesian_probe", context=context)
        self.lock = threading.Lock()
        self.poses: list[PoseStamped] = []
        self.joints: list[JointState] = []
        self.images: list[Image] = []
        self.node.create_subscription(PoseStamped, "ee_pose", self._store(self.poses), 50)
        self.node.create_subscription(JointState, "joint_states", self._store(self.joints), 50)
        self.node.create_subscription(
            Image, CAMERA_TOPIC, self._store(self.images), qos_profile_sensor_data
        )
        self.twists = self.node.create_publisher(TwistStamped, TWIST_TOPIC, 10)
        self.targets = self.node.create_publisher(PoseStamped, TARGET_TOPIC, 10)
        self.sim: SimCartesian | None = None

    def _store(self, into: list) -> Callable[[object], None]:
        def store(msg: object) -> None:
            with self.lock:
                into.append(msg)

        return store

    def position(self) -> np.ndarray:
        with self.lock:
            p = self.poses[-1].pose.position
        return np.array([p.x, p.y, p.z])

    def wait_for(self, what: str, condition: Callable[[], bool]) -> None:
        def holds() -> bool:
            with self.lock:
                return condition()

        wait_for(holds, what, timeout_s=DEADLINE_S)

    def send_until(self, what: str, send: Callable[[], None], done: Callable[[], bool]) -> None:
        """Publish at about 25 Hz (a fresh command each time, as the node does) until `done`."""
        deadline = time.monotonic() + DEADLINE_S
        while time.monotonic() < deadline:
            send()
            if done():
                return
            time.sleep(0.04)  # the command stream's period, not a wait for a result
        pytest.fail(f"timed out waiting for {what}")


@contextmanager
def running_sim() -> Iterator[Probe]:
    context = Context()
    rclpy.init(context=context, domain_id=DOMAIN_ID)
    sim = SimCartesian(context=context)
    probe = Probe(context)
    probe.sim = sim
    executor = SingleThreadedExecutor(context=context)
    executor.add_node(sim)
    executor.add_node(probe.node)
    spinner = threading.Thread(target=executor.spin, daemon=True)
    spinner.start()
    try:
        yield probe
    finally:
        executor.shutdown()
        spinner.join(timeout=5)
        sim.destroy_node()
        probe.node.destroy_node()
        rclpy.shutdown(context=context)


def twist(frame: str, vx: float) -> TwistStamped:
    msg = TwistStamped()
    msg.header.frame_id = frame
    msg.twist.linear.x = vx
    return msg


@pytest.mark.slow
def test_publishes_the_ready_pose_joint_states_and_the_front_camera():
    with running_sim() as probe:
        probe.wait_for("ee_pose, joint_states and a frame",
                       lambda: probe.poses and probe.joints and probe.images)
        pose = probe.poses[-1]
        assert pose.header.frame_id == "panda_link0"
        np.testing.assert_allclose(probe.position(), READY_TCP, atol=0.003)
        q = pose.pose.orientation
        assert math.isclose(abs(q.x), 1.0, abs_tol=0.01)  # pointing down: roll = pi
        joints = probe.joints[-1]
        assert list(joints.name)[-1] == "panda_finger_joint1" and len(joints.position) == 8
        image = probe.images[-1]
        assert (image.width, image.height, image.encoding) == (256, 256, "rgb8")
        assert len(image.data) == 256 * 256 * 3


@pytest.mark.slow
def test_a_twist_stream_moves_the_hand_a_foreign_frame_or_nan_is_ignored():
    with running_sim() as probe:
        probe.wait_for("ee_pose", lambda: bool(probe.poses))
        start = probe.position()
        # A command in another frame is refused (no tf here to transform it) and counted.
        assert probe.sim is not None
        probe.send_until(
            "a twist in panda_hand_tcp refused",
            lambda: probe.twists.publish(twist("panda_hand_tcp", 1.0)),
            lambda: probe.sim.arm.refused > 0,
        )
        refused = probe.sim.arm.refused
        probe.send_until(
            "a non-finite twist refused",
            lambda: probe.twists.publish(twist("panda_link0", math.nan)),
            lambda: probe.sim.arm.refused > refused,
        )
        np.testing.assert_allclose(probe.position(), start, atol=1e-4)
        probe.send_until(
            "the hand to move 3 cm forward",
            lambda: probe.twists.publish(twist("panda_link0", 0.5)),
            lambda: probe.position()[0] > start[0] + 0.03,
        )
        moved = probe.position() - start
        assert abs(moved[1]) < 0.005 and abs(moved[2]) < 0.005


@pytest.mark.slow
def test_a_pose_target_is_approached():
    with running_sim() as probe:
        probe.wait_for("ee_pose", lambda: bool(probe.poses))
        goal = PoseStamped()
        goal.header.frame_id = "panda_link0"
        goal.pose.position.x, goal.pose.position.y, goal.pose.position.z = 0.45, 0.1, 0.35
        goal.pose.orientation.x, goal.pose.orientation.w = 1.0, 0.0
        probe.send_until(
            "the hand at the pose target",
            lambda: probe.targets.publish(goal),
            lambda: np.linalg.norm(probe.position() - [0.45, 0.1, 0.35]) < 0.005,
        )


@pytest.mark.slow
@pytest.mark.parametrize(("name", "value", "message"), [
    ("initial_positions", [0.0] * 6, "initial_positions"),
    ("target_marker", [0.5, 0.0], "target_marker"),
    ("servo_command_type", "twist", "servo_command_type"),
])
def test_a_bad_parameter_stops_the_start_naming_it(name, value, message):
    context = Context()
    rclpy.init(context=context, domain_id=DOMAIN_ID)
    try:
        with pytest.raises(ValueError, match=message):
            SimCartesian(context=context, parameter_overrides=[Parameter(name, value=value)])
    finally:
        rclpy.shutdown(context=context)
