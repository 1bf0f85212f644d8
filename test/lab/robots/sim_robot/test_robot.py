"""`sim_robot` over real rclpy: joint states, commands on the ros2_control topics (forward
command controllers and the joint_trajectory_controller-like player), cameras."""

from __future__ import annotations

import io
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import numpy as np
import pytest
from support.ros_domains import SIM_ROBOT_TESTS, domain
from support.waiting import wait_for

rclpy = pytest.importorskip("rclpy")

from rclpy.context import Context  # noqa: E402
from rclpy.executors import SingleThreadedExecutor  # noqa: E402
from rclpy.node import Node  # noqa: E402
from rclpy.parameter import Parameter  # noqa: E402
from rclpy.qos import qos_profile_sensor_data  # noqa: E402
from sensor_msgs.msg import CompressedImage, Image, JointState  # noqa: E402
from std_msgs.msg import Float64MultiArray  # noqa: E402
from trajectory_msgs.msg import JointTrajectory, JointTrajectoryPoint  # noqa: E402

from sequence_ai_lab.robots.shared.arm import HOME, JOINT_NAMES, UPPER_LIMITS  # noqa: E402
from sequence_ai_lab.robots.sim_robot.robot import (  # noqa: E402
    REFERENCE_TOPIC,
    TRAJECTORY_TOPIC,
    SimRobot,
)

DOMAIN_ID = domain(SIM_ROBOT_TESTS)
DEADLINE_S = 20.0


class Probe:
    """A second node that records what sim_robot publishes and sends it commands."""

    def __init__(self, context: Context) -> None:
        self.node = Node("sim_probe", context=context)
        self.lock = threading.Lock()
        self.joints: list[JointState] = []
        self.images: dict[str, list[Image]] = {"exterior_1": [], "wrist_left": []}
        self.compressed: list[CompressedImage] = []
        self.node.create_subscription(JointState, "joint_states", self._on_joints, 50)
        for view in self.images:
            self.node.create_subscription(
                Image, f"cameras/{view}/image_raw", self._on_image(view), qos_profile_sensor_data
            )
        self.node.create_subscription(
            CompressedImage,
            "cameras/exterior_2/image_raw/compressed",
            self._on_compressed,
            qos_profile_sensor_data,
        )
        self.positions = self.node.create_publisher(
            Float64MultiArray, "forward_position_controller/commands", 10
        )
        self.velocities = self.node.create_publisher(
            Float64MultiArray, "forward_velocity_controller/commands", 10
        )
        self.gripper = self.node.create_publisher(
            Float64MultiArray, "gripper_controller/commands", 10
        )
        self.trajectories = self.node.create_publisher(JointTrajectory, TRAJECTORY_TOPIC, 10)
        self.references: list[JointState] = []
        self.node.create_subscription(JointState, REFERENCE_TOPIC, self._on_reference, 50)

    def _on_reference(self, msg: JointState) -> None:
        with self.lock:
            self.references.append(msg)

    def _on_joints(self, msg: JointState) -> None:
        with self.lock:
            self.joints.append(msg)

    def _on_image(self, view: str) -> Callable[[Image], None]:
        def store(msg: Image) -> None:
            with self.lock:
                self.images[view].append(msg)

        return store

    def _on_compressed(self, msg: CompressedImage) -> None:
        with self.lock:
            self.compressed.append(msg)

    def latest_joints(self) -> np.ndarray:
        with self.lock:
            return np.array(self.joints[-1].position)

    def at(self, target: np.ndarray, atol: float) -> bool:
        return bool(np.allclose(np.array(self.joints[-1].position[:7]), target, atol=atol))

    def holds_at(self, what: str, target: np.ndarray, atol: float) -> None:
        """Wait until the arm is at `target`, then check it stays there for 20 joint states."""
        self.wait_for(what, lambda: self.at(target, atol))
        count = len(self.joints)
        self.wait_for("more joint states", lambda: len(self.joints) >= count + 20)
        np.testing.assert_allclose(self.latest_joints()[:7], target, atol=atol)

    def resend_until(
        self, what: str, send: Callable[[], None], condition: Callable[[], bool]
    ) -> None:
        """Publish until `condition` holds: a reliable message can race discovery."""
        deadline = time.monotonic() + DEADLINE_S
        while time.monotonic() < deadline:
            send()
            with self.lock:
                if condition():
                    return
            time.sleep(0.05)
        pytest.fail(f"timed out waiting for {what}")

    def wait_for(self, what: str, condition: Callable[[], bool]) -> None:
        """``condition`` looks at what the probe received, so it runs under the probe's lock."""
        wait_for(lambda: self._holds(condition), what, timeout_s=DEADLINE_S)

    def _holds(self, condition: Callable[[], bool]) -> bool:
        with self.lock:
            return condition()


# These tests are about the arm and its topics; small frames keep the renderer out of the way,
# and the kinematic arm is exactly where its commands put it (test_world_node.py runs physics).
SMALL_CAMERAS: dict[str, object] = {
    "image_width": 128,
    "image_height": 72,
    "render_scale": 2,
    "physics": "kinematic",
}


@contextmanager
def running_sim(**parameters: object) -> Iterator[Probe]:
    context = Context()
    rclpy.init(context=context, domain_id=DOMAIN_ID)
    robot = SimRobot(
        context=context,
        parameter_overrides=[Parameter(name, value=value) for name, value in parameters.items()],
    )
    probe = Probe(context)
    executor = SingleThreadedExecutor(context=context)
    executor.add_node(robot)
    executor.add_node(probe.node)
    spinner = threading.Thread(target=executor.spin, daemon=True)
    spinner.start()
    try:
        yield probe
    finally:
        executor.shutdown()
        spinner.join(timeout=5)
        robot.destroy_node()
        probe.node.destroy_node()
        rclpy.shutdown(context=context)


@pytest.fixture
def sim() -> Iterator[Probe]:
    with running_sim(**SMALL_CAMERAS, image_transport="both") as probe:
        yield probe


def send(publisher: Any, values: list[float]) -> None:
    publisher.publish(Float64MultiArray(data=[float(v) for v in values]))


@pytest.mark.slow
def test_publishes_joint_states_with_the_franka_names_at_home(sim: Probe) -> None:
    sim.wait_for("joint states", lambda: len(sim.joints) >= 5)
    msg = sim.joints[-1]
    assert list(msg.name) == [*JOINT_NAMES, "panda_finger_joint1"]
    np.testing.assert_allclose(msg.position[:7], HOME)
    assert msg.position[7] == 0.0


@pytest.mark.slow
def test_follows_position_commands_and_holds_after_them(sim: Probe) -> None:
    target = HOME + np.array([0.4, 0.2, -0.3, 0.3, 0.2, -0.2, 0.5])
    sim.wait_for("joint states", lambda: len(sim.joints) >= 1)
    # Reliable commands can race discovery: resend until the arm is seen moving.
    deadline = time.monotonic() + DEADLINE_S
    while time.monotonic() < deadline and np.allclose(sim.latest_joints()[:7], HOME):
        send(sim.positions, list(target))
        time.sleep(0.05)
    sim.holds_at("the arm to reach the target", target, atol=1e-3)


@pytest.mark.slow
def test_integrates_velocity_commands_clamped_to_the_limits(sim: Probe) -> None:
    sim.wait_for("joint states", lambda: len(sim.joints) >= 1)

    def at_upper_limit() -> bool:
        return bool(np.allclose(np.array(sim.joints[-1].position[:7]), UPPER_LIMITS, atol=1e-6))

    deadline = time.monotonic() + DEADLINE_S
    while time.monotonic() < deadline:
        send(sim.velocities, [2.0] * 7)
        with sim.lock:
            if at_upper_limit():
                break
        time.sleep(0.02)
    sim.wait_for("the arm to stop at its upper limits", at_upper_limit)


@pytest.mark.slow
def test_gripper_command_closes_the_gripper(sim: Probe) -> None:
    sim.wait_for("joint states", lambda: len(sim.joints) >= 1)
    deadline = time.monotonic() + DEADLINE_S
    while time.monotonic() < deadline and sim.latest_joints()[7] == 0.0:
        send(sim.gripper, [1.0])
        time.sleep(0.05)
    sim.wait_for("a closed gripper", lambda: sim.joints[-1].position[7] == pytest.approx(1.0))


@pytest.mark.slow
def test_cameras_publish_rgb8_frames_that_change_when_the_arm_moves(sim: Probe) -> None:
    sim.wait_for("camera frames", lambda: all(len(v) >= 2 for v in sim.images.values()))
    first = {view: frames[-1] for view, frames in sim.images.items()}
    for msg in first.values():
        assert (msg.width, msg.height, msg.encoding, msg.step) == (128, 72, "rgb8", 128 * 3)
        assert len(msg.data) == 128 * 72 * 3
    target = HOME + np.array([0.8, 0.3, 0.0, 0.5, 0.0, -0.4, 0.0])
    deadline = time.monotonic() + DEADLINE_S
    while time.monotonic() < deadline and not np.allclose(sim.latest_joints()[:7], target):
        send(sim.positions, list(target))
        time.sleep(0.05)
    count = {view: len(frames) for view, frames in sim.images.items()}
    sim.wait_for(
        "frames after the move",
        lambda: all(len(sim.images[view]) > count[view] for view in count),
    )
    for view, msg in first.items():
        assert bytes(sim.images[view][-1].data) != bytes(msg.data), f"{view} did not change"


@pytest.mark.slow
def test_compressed_variant_is_a_decodable_jpeg(sim: Probe) -> None:
    pil = pytest.importorskip("PIL.Image")
    sim.wait_for("a compressed frame", lambda: len(sim.compressed) >= 1)
    msg = sim.compressed[-1]
    assert "jpeg" in msg.format
    decoded = pil.open(io.BytesIO(bytes(msg.data)))
    assert decoded.size == (128, 72)


def trajectory_msg(
    start_ns: int, points: list[tuple[float, np.ndarray]], names: list[str] | None = None
) -> JointTrajectory:
    names = list(JOINT_NAMES) if names is None else names
    order = [list(JOINT_NAMES).index(n) for n in names]
    msg = JointTrajectory(joint_names=names)
    msg.header.stamp.sec, msg.header.stamp.nanosec = divmod(start_ns, 1_000_000_000)
    for t, q in points:
        p = JointTrajectoryPoint(positions=[float(q[i]) for i in order])
        p.time_from_start.sec, p.time_from_start.nanosec = divmod(round(t * 1e9), 1_000_000_000)
        msg.points.append(p)
    return msg


def stamp_ns(msg: JointState) -> int:
    return msg.header.stamp.sec * 1_000_000_000 + msg.header.stamp.nanosec


@pytest.fixture
def splicing_sim() -> Iterator[Probe]:
    with running_sim(**SMALL_CAMERAS, trajectory_replacement="splice") as probe:
        yield probe


@pytest.mark.slow
def test_plays_a_stamped_trajectory_from_its_start_time_and_holds_its_last_point(
    splicing_sim: Probe,
) -> None:
    # Splicing, as later controllers do: the arm keeps its state until the stamp. (Humble's
    # leaves at once for the first point: test/lab/robots/sim_robot/test_trajectory.py covers that.)
    sim = splicing_sim
    sim.wait_for("joint states", lambda: len(sim.joints) >= 1)
    middle = HOME + np.array([0.2, 0.1, 0.0, 0.1, 0.0, 0.0, 0.1])
    target = HOME + np.array([0.4, 0.2, 0.0, 0.2, 0.0, 0.0, 0.2])
    start = sim.node.get_clock().now().nanoseconds + 1_000_000_000
    # Joints in another order than the arm's: they are matched by name. The same stamped
    # trajectory received twice plays the same, so resending it is harmless.
    msg = trajectory_msg(start, [(0.3, middle), (0.6, target)], list(reversed(JOINT_NAMES)))
    sim.resend_until(
        "the controller's reference",
        lambda: sim.trajectories.publish(msg),
        lambda: bool(sim.references),
    )
    sim.holds_at("the arm at the last point", target, atol=1e-6)
    with sim.lock:
        joints = list(sim.joints)
        references = list(sim.references)
    # Until the stamped start the arm held where it was; it moved only once the stamp was due.
    for msg in joints:
        if stamp_ns(msg) < start:
            np.testing.assert_allclose(msg.position[:7], HOME, atol=1e-9)
    assert any(np.allclose(m.position[:7], middle, atol=0.05) for m in joints)
    # The desired state was published as the controller's reference while it drove the arm.
    assert references and list(references[-1].name) == list(JOINT_NAMES)
    np.testing.assert_allclose(references[-1].position, target, atol=1e-6)
    np.testing.assert_allclose(references[-1].velocity, np.zeros(7), atol=1e-9)


@pytest.mark.slow
def test_refused_trajectories_do_not_move_the_arm(sim: Probe) -> None:
    sim.wait_for("joint states", lambda: len(sim.joints) >= 1)
    away = HOME - np.array([0.5, 0, 0, 0, 0, 0, 0])
    target = HOME + np.array([0.3, 0, 0, 0, 0, 0, 0])

    def publish() -> None:
        # Partial (six joints), in the past, empty: each refused; then a good one, in order.
        now = sim.node.get_clock().now().nanoseconds
        for msg in (
            trajectory_msg(0, [(0.2, away)], list(JOINT_NAMES[:6])),
            trajectory_msg(now - 5_000_000_000, [(0.2, away)]),
            trajectory_msg(0, []),
            trajectory_msg(0, [(0.3, target)]),
        ):
            sim.trajectories.publish(msg)

    sim.resend_until("the arm moving", publish, lambda: sim.joints[-1].position[0] > HOME[0] + 1e-3)
    sim.wait_for("the arm at the good trajectory's point", lambda: sim.at(target, atol=1e-6))
    with sim.lock:
        first_joint = [m.position[0] for m in sim.joints]
    assert min(first_joint) >= HOME[0] - 1e-9, "the arm moved toward a refused trajectory"


@pytest.mark.slow
def test_a_forward_command_takes_the_arm_from_a_running_trajectory(sim: Probe) -> None:
    sim.wait_for("joint states", lambda: len(sim.joints) >= 1)
    far = HOME + np.array([1.0, 0, 0, 0, 0, 0, 0])
    sim.resend_until(
        "the arm moving",
        lambda: sim.trajectories.publish(trajectory_msg(0, [(20.0, far)])),
        lambda: sim.joints[-1].position[0] > HOME[0] + 1e-3,
    )
    target = HOME + np.array([0.0, 0.1, 0, 0, 0, 0, 0])
    # Two topics keep no order between them: resend until no trajectory message is in flight.
    sim.resend_until(
        "the arm at the forward command's target",
        lambda: send(sim.positions, list(target)),
        lambda: sim.at(target, atol=1e-6),
    )
    sim.holds_at("the arm to stay there", target, atol=1e-6)


@pytest.mark.slow
def test_premade_frames_cost_no_rendering_and_stay_the_same_as_the_arm_moves() -> None:
    pil = pytest.importorskip("PIL.Image")
    with running_sim(
        image_width=128, image_height=72, render_scale=2, image_transport="both",
        camera_frames="premade", fps=30.0, views=["exterior_1", "exterior_2", "wrist_left"],
    ) as sim:  # fmt: skip
        sim.wait_for("camera frames", lambda: all(len(v) >= 2 for v in sim.images.values()))
        sim.wait_for("a compressed frame", lambda: len(sim.compressed) >= 1)
        first = {view: bytes(frames[-1].data) for view, frames in sim.images.items()}
        target = HOME + np.array([0.8, 0.3, 0.0, 0.5, 0.0, -0.4, 0.0])
        sim.resend_until(
            "the arm at the target",
            lambda: send(sim.positions, list(target)),
            lambda: sim.at(target, atol=1e-6),
        )
        count = {view: len(frames) for view, frames in sim.images.items()}
        sim.wait_for(
            "frames after the move",
            lambda: all(len(sim.images[view]) > count[view] for view in count),
        )
        with sim.lock:
            for view, frames in sim.images.items():
                assert bytes(frames[-1].data) == first[view]
                # Each frame is stamped when it is published, premade or not.
                assert stamp_ns(frames[-1]) > stamp_ns(frames[0])
            jpeg = bytes(sim.compressed[-1].data)
        assert pil.open(io.BytesIO(jpeg)).size == (128, 72)


@pytest.mark.slow
@pytest.mark.parametrize(
    ("name", "value", "words"),
    [
        ("fps", 30, ["fps=30 (an integer) is refused", "a double"]),
        ("camera_frames", "painted", ["camera_frames='painted'", "one of: rendered, premade"]),
        ("views", ["top"], ["views=['top']", "each one of: exterior_1, exterior_2, wrist_left"]),
        ("initial_positions", [0.0, 1.0], ["initial_positions", "7 joint positions"]),
    ],
    ids=["type", "choice", "list choice", "length"],
)
def test_a_refused_parameter_stops_the_start_naming_it(
    name: str, value: object, words: list[str]
) -> None:
    context = Context()
    rclpy.init(context=context, domain_id=DOMAIN_ID)
    try:
        with pytest.raises(ValueError) as refused:
            SimRobot(context=context, parameter_overrides=[Parameter(name, value=value)])
    finally:
        rclpy.shutdown(context=context)
    for word in words:
        assert word in str(refused.value), refused.value


@pytest.mark.slow
def test_the_parameters_describe_themselves_read_only() -> None:
    context = Context()
    rclpy.init(context=context, domain_id=DOMAIN_ID)
    try:
        robot = SimRobot(context=context, parameter_overrides=[
            Parameter(name, value=value) for name, value in SMALL_CAMERAS.items()
        ])  # fmt: skip
        (fps,) = robot.describe_parameters(["fps"])
        assert fps.read_only and "in [0.1, 60.0]" in fps.additional_constraints
        robot.destroy_node()
    finally:
        rclpy.shutdown(context=context)
