"""A test arm around the node: joint states and cameras in, commands recorded, every client."""

from __future__ import annotations

import io
import threading
import time
from dataclasses import dataclass
from typing import Any

import numpy as np
from diagnostic_msgs.msg import DiagnosticArray
from lifecycle_msgs.msg import Transition
from rcl_interfaces.msg import Log, ParameterValue, SetParametersResult
from rclpy.context import Context
from rclpy.node import Node
from rclpy.qos import qos_profile_sensor_data
from sensor_msgs.msg import CompressedImage, Image, JointState
from std_msgs.msg import Float64MultiArray
from trajectory_msgs.msg import JointTrajectory

from sequence_ai_interfaces.action import Act
from sequence_ai_lab.demo.planner import ActClient, LifecycleClient, ParameterClient, SentGoal
from sequence_ai_lab.robots.sim_robot.trajectory import (
    Replacement,
    Trajectory,
    TrajectoryController,
    TrajectoryPoint,
    TrajectoryRejected,
)
from support.waiting import wait_for

JOINTS = [f"panda_joint{i}" for i in range(1, 8)]
GRIPPER = "panda_finger_joint1"
# Franka's usual ready pose, well inside the limits.
READY_POSE = [0.0, -0.785, 0.0, -2.356, 0.0, 1.571, 0.785]
# The test arm settles a little off every target (like a real arm under gravity), so a hold
# at the measured joints differs from every target the policy sent.
SAG = 0.01
DEADLINE_S = 30.0
TRAJECTORY_TOPIC = "joint_trajectory_controller/joint_trajectory"


def node_parameters(base_url: str, key_file: str, **changes: Any) -> dict[str, Any]:
    """The DROID configuration against a local gateway, driving sim-droid-reach: pi05-droid's
    row and rows that move to a target hashed from the instruction (the simulated pi05-droid
    looks at the frames, and this arm's cameras show a gradient, not a scene)."""
    values: dict[str, Any] = {
        "model": "sim-droid-reach",
        "base_url": base_url,
        "api_key_file": key_file,
        "camera_views": ["exterior_1", "wrist_left"],
        "camera_topics": ["cameras/exterior_1/image_raw", "cameras/wrist_left/image_raw"],
        "camera_transports": ["raw", "raw"],
        "joint_names": JOINTS,
        "gripper_joint": GRIPPER,
        "max_state_age_s": 1.0,
        "max_image_age_s": 1.0,
    }
    values.update(changes)
    return values


@dataclass(frozen=True)
class Command:
    """One arm command the test arm received, with the joint state it had at that moment."""

    received_s: float
    values: tuple[float, ...]
    measured: tuple[float, ...]


@dataclass(frozen=True)
class ReceivedTrajectory:
    """One JointTrajectory the test arm received (chunk mode), with the arm's state then."""

    received_s: float
    # header.stamp in ROS seconds; 0 means "now".
    stamp_s: float
    times_s: tuple[float, ...]
    positions: tuple[tuple[float, ...], ...]
    velocities: tuple[tuple[float, ...], ...]
    measured: tuple[float, ...]

    @property
    def is_stop(self) -> bool:
        """What the node stops with: one point, now, at rest."""
        return (
            self.stamp_s == 0.0 and len(self.positions) == 1 and self.times_s == (0.0,)
            and not any(self.velocities[0])
        )


class ArmHarness(Node):
    """A state-following arm with cameras, plus lifecycle, action and parameter clients."""

    def __init__(self, namespace: str, context: Context, node_name: str = "sequence_ai") -> None:
        super().__init__("test_arm", namespace=namespace, context=context)
        self._lock = threading.Lock()
        self.positions = list(READY_POSE)
        # Every joint state the arm has been in: a hold commands one of these exactly.
        self._states: list[tuple[float, ...]] = [tuple(READY_POSE)]
        self.gripper = 0.0
        self.commands: list[Command] = []
        self.trajectories: list[ReceivedTrajectory] = []
        # Trajectories the controller refused, why.
        self.rejected: list[str] = []
        # The joint_trajectory_controller on the trajectory topic, as Humble's plays it.
        self._controller = TrajectoryController(JOINTS, replacement=Replacement.RESTART)
        self.gripper_commands: list[float] = []
        self.diagnostics: list[DiagnosticArray] = []
        self.logs: list[str] = []
        self.paused_views: set[str] = set()
        self.publish_joints = True
        self._joint_pub = self.create_publisher(JointState, "joint_states", qos_profile_sensor_data)
        self._cameras = {
            view: self.create_publisher(
                Image, f"cameras/{view}/image_raw", qos_profile_sensor_data
            )
            for view in ("exterior_1", "exterior_2", "wrist_left")
        }
        self._frame = self._make_frame(320, 180)
        # image_transport's "compressed" topics, for nodes configured with that transport.
        self._compressed = {
            view: self.create_publisher(
                CompressedImage, f"cameras/{view}/image_raw/compressed", qos_profile_sensor_data
            )
            for view in ("exterior_1", "exterior_2", "wrist_left")
        }
        self._jpeg = self._make_jpeg(self._frame)
        self.create_subscription(
            Float64MultiArray, "forward_position_controller/commands", self._on_command, 10
        )
        self.create_subscription(
            Float64MultiArray, "gripper_controller/commands", self._on_gripper, 10
        )
        self.create_subscription(JointTrajectory, TRAJECTORY_TOPIC, self._on_trajectory, 10)
        self.create_subscription(DiagnosticArray, "/diagnostics", self._on_diagnostics, 10)
        self.create_subscription(Log, "/rosout", self._on_log, 100)
        self.create_timer(0.02, self._publish_joint_state)
        self.create_timer(1.0 / 15.0, self._publish_images)
        target = f"{namespace}/{node_name}"
        self.node_status_name = f"{target}: sequence_ai policy"
        self.lifecycle = LifecycleClient(self, target)
        self.parameters = ParameterClient(self, target)
        self.act = ActClient(self, f"{namespace}/act")

    # ----- the simulated arm -----

    @staticmethod
    def _make_frame(width: int, height: int) -> Image:
        pixels = np.zeros((height, width, 3), dtype=np.uint8)
        pixels[:, :, 0] = np.arange(width, dtype=np.uint8)[None, :]
        pixels[:, :, 1] = np.arange(height, dtype=np.uint8)[:, None]
        msg = Image(height=height, width=width, encoding="rgb8", step=width * 3)
        msg.data = pixels.tobytes()
        return msg

    @staticmethod
    def _make_jpeg(frame: Image) -> CompressedImage:
        from PIL import Image as PILImage

        pixels = np.frombuffer(frame.data, dtype=np.uint8).reshape(frame.height, frame.width, 3)
        encoded = io.BytesIO()
        PILImage.fromarray(pixels).save(encoded, format="JPEG", quality=90)
        msg = CompressedImage(format="rgb8; jpeg compressed bgr8")
        msg.data = encoded.getvalue()
        return msg

    def _now_s(self) -> float:
        return self.get_clock().now().nanoseconds * 1e-9

    def _publish_joint_state(self) -> None:
        with self._lock:
            # A trajectory drives the arm: it is where the controller's desired state is.
            desired = self._controller.sample(self._now_s())
            if desired is not None:
                self.positions = desired.positions.tolist()
                self._states.append(tuple(self.positions))
            if not self.publish_joints:
                return
            positions = list(self.positions) + [self.gripper]
        msg = JointState(name=JOINTS + [GRIPPER], position=positions)
        msg.header.stamp = self.get_clock().now().to_msg()
        self._joint_pub.publish(msg)

    def _publish_images(self) -> None:
        stamp = self.get_clock().now().to_msg()
        for view, publisher in self._cameras.items():
            if view not in self.paused_views:
                self._frame.header.stamp = stamp
                publisher.publish(self._frame)
                self._jpeg.header.stamp = stamp
                self._compressed[view].publish(self._jpeg)

    def _on_command(self, msg: Float64MultiArray) -> None:
        with self._lock:
            self._controller.stop()
            measured = tuple(self.positions)
            self.commands.append(Command(time.monotonic(), tuple(msg.data), measured))
            self.positions = [v + SAG for v in msg.data]
            self._states.append(tuple(self.positions))

    def _on_trajectory(self, msg: JointTrajectory) -> None:
        stamp = msg.header.stamp.sec + msg.header.stamp.nanosec * 1e-9
        times = tuple(p.time_from_start.sec + p.time_from_start.nanosec * 1e-9 for p in msg.points)
        order = [list(msg.joint_names).index(joint) for joint in JOINTS]
        positions = tuple(tuple(p.positions[i] for i in order) for p in msg.points)
        velocities = tuple(
            tuple(p.velocities[i] for i in order) if len(p.velocities) else () for p in msg.points
        )
        with self._lock:
            measured = tuple(self.positions)
            self.trajectories.append(ReceivedTrajectory(
                time.monotonic(), stamp, times, positions, velocities, measured
            ))
            now = self._now_s()
            playing = self._controller.sample(now)
            velocity = playing.velocities if playing is not None else np.zeros(len(JOINTS))
            try:
                self._controller.receive(
                    Trajectory(JOINTS, stamp, [
                        TrajectoryPoint(t, list(q), list(v))
                        for t, q, v in zip(times, positions, velocities)
                    ]),
                    now, np.array(measured), velocity,
                )
            except TrajectoryRejected as exc:
                # As joint_trajectory_controller does (a trajectory delivered after its last
                # point, on a loaded machine): refused, the running one goes on. Raised here it
                # would end this arm's executor, and every reply it was to deliver with it.
                self.rejected.append(str(exc))

    def _on_gripper(self, msg: Float64MultiArray) -> None:
        with self._lock:
            self.gripper_commands.append(msg.data[0])
            self.gripper = msg.data[0]

    def _on_diagnostics(self, msg: DiagnosticArray) -> None:
        with self._lock:
            self.diagnostics.append(msg)

    def _on_log(self, msg: Log) -> None:
        with self._lock:
            self.logs.append(f"{msg.name}: {msg.msg}")

    def move_joint(self, index: int, delta: float) -> None:
        """Move one joint as an outside force would (a push, another controller); the arm
        reports the new pose from its next joint state on."""
        with self._lock:
            self.positions[index] += delta
            self._states.append(tuple(self.positions))

    def command_count(self) -> int:
        with self._lock:
            return len(self.commands)

    def trajectories_since(self, index: int) -> list[ReceivedTrajectory]:
        with self._lock:
            return list(self.trajectories[index:])

    def stops(self, start: int = 0) -> list[ReceivedTrajectory]:
        """The node's stops among the trajectories from `start`, each counted once: the same
        stop sent again (an idle node republishes its hold) is not a new one."""
        events: list[ReceivedTrajectory] = []
        before = self.trajectories_since(start - 1)[:1] if start else []
        previous = before[0] if before else None
        for received in self.trajectories_since(start):
            again = (
                previous is not None and previous.is_stop
                and previous.positions == received.positions
            )
            if received.is_stop and not again:
                events.append(received)
            previous = received
        return events

    def was_measured(self, positions: tuple[float, ...]) -> bool:
        """True when the arm reported exactly these joint positions at some time."""
        with self._lock:
            states = list(self._states)
        return any(np.allclose(positions, s, atol=1e-9) for s in states)

    def commands_since(self, index: int) -> list[Command]:
        with self._lock:
            return list(self.commands[index:])

    def log_text(self) -> str:
        with self._lock:
            return "\n".join(self.logs)

    def holds(self, start: int = 0) -> list[Command]:
        """Commands equal to a joint state the arm reported: the node's holds.

        Policy targets never equal one, because the arm settles SAG away from each target.
        """
        with self._lock:
            states = list(self._states)
            commands = list(self.commands[start:])
        return [
            c for c in commands if any(np.allclose(c.values, s, atol=1e-9) for s in states)
        ]

    # ----- the planner's side (sequence_ai_lab.demo.planner) -----

    def transition(self, transition_id: int) -> bool:
        return self.lifecycle.transition(transition_id)

    def state(self) -> str:
        return self.lifecycle.state()

    def configure_and_activate(self) -> None:
        """Configure and activate, then wait until diagnostics show a ready model and inputs."""
        assert self.transition(Transition.TRANSITION_CONFIGURE), self.log_text()
        self.activate()

    def activate(self) -> None:
        """Activate a configured node, then wait for a ready model and fresh inputs."""
        assert self.transition(Transition.TRANSITION_ACTIVATE)
        try:
            wait_for(self._ready_with_inputs, what="a ready model and fresh inputs")
        except AssertionError as exc:
            raise AssertionError(f"{exc}; last diagnostics: {self.node_status()}") from None

    def node_status(self) -> dict[str, str] | None:
        """Key/values of the node's newest diagnostic status, if any arrived."""
        with self._lock:
            arrays = list(self.diagnostics)
        for array in reversed(arrays):
            for status in array.status:
                if status.name == self.node_status_name:
                    return {kv.key: kv.value for kv in status.values}
        return None

    def _ready_with_inputs(self) -> bool:
        values = self.node_status()
        if not values or values.get("ready") != "true":
            return False
        ages = [v for k, v in values.items() if k.endswith("_age_s")]
        # Every camera the node subscribes to, and joint states.
        return len(ages) >= 2 and all(v != "never received" for v in ages)

    def set_parameters(self, **values: Any) -> list[SetParametersResult]:
        return self.parameters.set(**values)

    def all_parameter_values(self) -> dict[str, ParameterValue]:
        return self.parameters.values()

    def send_goal(
        self, instruction: str, max_seconds: float, max_actions: int = 0, *,
        handover: bool = False,
    ) -> tuple[SentGoal, list[Act.Feedback]]:
        """Send a goal; returns (goal, feedback list). The goal says accepted or not."""
        goal = self.act.send(instruction, max_seconds, max_actions, handover=handover)
        return goal, goal.feedback

    def result(self, goal: SentGoal, timeout_s: float = DEADLINE_S * 2) -> tuple[int, Act.Result]:
        """(status, Act.Result) of an accepted goal."""
        return goal.result(timeout_s)
