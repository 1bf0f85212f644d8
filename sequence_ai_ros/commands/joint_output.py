"""The output stage of the arm gate: arm and gripper commands in the controller's message type.

Only `sequence_ai_ros.safety.gate.ArmGate` holds a `CommandPublisher`; everything that commands
the arm goes through the gate's checks first.
"""

from __future__ import annotations

import threading
import time
from collections import deque
from collections.abc import Callable, Sequence

from builtin_interfaces.msg import Duration
from rclpy.duration import Duration as RosDuration
from rclpy.lifecycle import LifecycleNode
from rclpy.qos import QoSDurabilityPolicy, QoSHistoryPolicy, QoSProfile, QoSReliabilityPolicy
from sensor_msgs.msg import JointState
from std_msgs.msg import Float64MultiArray
from trajectory_msgs.msg import JointTrajectory, JointTrajectoryPoint

from sequence_ai_ros.commands.chunk_trajectory import ChunkTrajectory
from sequence_ai_ros.commands.kinds import (
    FLOAT64_MULTI_ARRAY,
    JOINT_STATE,
    JOINT_TRAJECTORY,
    Interface,
)

# Controllers subscribe reliable; depth 1 because only the newest command matters.
COMMAND_QOS = QoSProfile(
    history=QoSHistoryPolicy.KEEP_LAST,
    depth=1,
    reliability=QoSReliabilityPolicy.RELIABLE,
    durability=QoSDurabilityPolicy.VOLATILE,
)

_MESSAGE_TYPES = {
    FLOAT64_MULTI_ARRAY: Float64MultiArray,
    JOINT_TRAJECTORY: JointTrajectory,
    JOINT_STATE: JointState,
}


def _duration(seconds: float) -> Duration:
    whole = int(seconds)
    return Duration(sec=whole, nanosec=int(round((seconds - whole) * 1e9)))


class CommandPublisher:
    """Publishes joint commands in the configured message type and counts the command rate.

    `period_s` is the catalogue's control period, fixed at configure: a JointTrajectory point
    is reached one period after its message, whatever a response says about its own rate.
    """

    def __init__(
        self,
        node: LifecycleNode,
        *,
        joint_names: Sequence[str],
        interface: Interface,
        command_topic: str,
        command_type: str,
        gripper_topic: str,
        period_s: float,
        on_publish: Callable[[str, object], None] | None = None,
    ) -> None:
        self._node = node
        # Told every message published ("arm" or "gripper"): the episode recorder.
        self._on_publish = on_publish
        self._joint_names = list(joint_names)
        self._interface = Interface(interface)
        self._command_type = command_type
        self._period_s = period_s
        self._arm = node.create_lifecycle_publisher(
            _MESSAGE_TYPES[command_type], command_topic, COMMAND_QOS
        )
        self._gripper = (
            node.create_lifecycle_publisher(Float64MultiArray, gripper_topic, COMMAND_QOS)
            if gripper_topic
            else None
        )
        # Lock order 7: nothing of ours is taken under it.
        self._lock = threading.Lock()
        self._sent: deque[float] = deque(maxlen=256)

    @property
    def interface(self) -> Interface:
        return self._interface

    def publish_arm(self, values: Sequence[float]) -> None:
        """One arm command: positions or velocities in joint_names order."""
        values = [float(v) for v in values[: len(self._joint_names)]]
        msg = self._message(values)
        self._arm.publish(msg)
        self._count()
        self._published("arm", msg)

    def publish_trajectory(self, trajectory: ChunkTrajectory) -> None:
        """One JointTrajectory with every point of `plan`, stamped in ROS time (a zero stamp,
        "now", for an immediate plan)."""
        msg = JointTrajectory(joint_names=self._joint_names)
        if not trajectory.immediate:
            # The plan's times are monotonic; the controller reads the stamp on the ROS clock.
            offset = trajectory.start_s - time.monotonic()
            stamp = self._node.get_clock().now() + RosDuration(nanoseconds=round(offset * 1e9))
            msg.header.stamp = stamp.to_msg()
        msg.points = [
            JointTrajectoryPoint(
                positions=list(positions),
                velocities=list(velocities),
                time_from_start=_duration(offset_s),
            )
            for offset_s, positions, velocities in zip(
                trajectory.times_s, trajectory.positions, trajectory.velocities
            )
        ]
        self._arm.publish(msg)
        self._count()
        self._published("arm", msg)

    def publish_gripper(self, values: Sequence[float]) -> None:
        """Every gripper value of a row, in the model's order, in one message."""
        if self._gripper is not None:
            msg = Float64MultiArray(data=[float(v) for v in values])
            self._gripper.publish(msg)
            self._published("gripper", msg)

    def _published(self, group: str, msg: object) -> None:
        if self._on_publish is not None:
            self._on_publish(group, msg)

    def command_rate_hz(self, window_s: float = 2.0) -> float:
        """Arm commands per second over the last `window_s`."""
        now = time.monotonic()
        with self._lock:
            recent = [t for t in self._sent if now - t <= window_s]
        return len(recent) / window_s

    def _count(self) -> None:
        with self._lock:
            self._sent.append(time.monotonic())

    def destroy(self) -> None:
        self._node.destroy_lifecycle_publisher(self._arm)
        if self._gripper is not None:
            self._node.destroy_lifecycle_publisher(self._gripper)

    def _message(self, values: list[float]) -> Float64MultiArray | JointTrajectory | JointState:
        if self._command_type == FLOAT64_MULTI_ARRAY:
            return Float64MultiArray(data=values)
        velocity = self._interface is Interface.VELOCITY
        if self._command_type == JOINT_TRAJECTORY:
            # A zero header stamp means "start now"; one point reached after one control period.
            point = JointTrajectoryPoint(time_from_start=_duration(self._period_s))
            if velocity:
                point.velocities = values
            else:
                point.positions = values
            return JointTrajectory(joint_names=self._joint_names, points=[point])
        msg = JointState(name=self._joint_names)
        msg.header.stamp = self._node.get_clock().now().to_msg()
        if velocity:
            msg.velocity = values
        else:
            msg.position = values
        return msg
