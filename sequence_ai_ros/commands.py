"""Arm and gripper command publishers for the three controller message types, and the hold."""

from __future__ import annotations

import threading
import time
from collections import deque
from collections.abc import Sequence

from builtin_interfaces.msg import Duration
from rclpy.lifecycle import LifecycleNode
from rclpy.qos import QoSDurabilityPolicy, QoSHistoryPolicy, QoSProfile, QoSReliabilityPolicy
from sensor_msgs.msg import JointState
from std_msgs.msg import Float64MultiArray
from trajectory_msgs.msg import JointTrajectory, JointTrajectoryPoint

from sequence_ai_ros.parameters import FLOAT64_MULTI_ARRAY, JOINT_STATE, JOINT_TRAJECTORY

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
    """Publishes joint commands in the configured message type and counts the command rate."""

    def __init__(
        self,
        node: LifecycleNode,
        *,
        joint_names: Sequence[str],
        interface: str,
        command_topic: str,
        command_type: str,
        gripper_topic: str,
    ) -> None:
        self._node = node
        self._joint_names = list(joint_names)
        self._interface = interface
        self._command_type = command_type
        self._arm = node.create_lifecycle_publisher(
            _MESSAGE_TYPES[command_type], command_topic, COMMAND_QOS
        )
        self._gripper = (
            node.create_lifecycle_publisher(Float64MultiArray, gripper_topic, COMMAND_QOS)
            if gripper_topic
            else None
        )
        self._lock = threading.Lock()
        self._sent: deque[float] = deque(maxlen=256)

    @property
    def interface(self) -> str:
        return self._interface

    def publish_arm(self, values: Sequence[float], period_s: float) -> None:
        """One arm command: positions or velocities in joint_names order."""
        values = [float(v) for v in values[: len(self._joint_names)]]
        self._arm.publish(self._message(values, period_s))
        with self._lock:
            self._sent.append(time.monotonic())

    def publish_gripper(self, value: float) -> None:
        if self._gripper is not None:
            self._gripper.publish(Float64MultiArray(data=[float(value)]))

    def hold(self, measured: Sequence[float] | None, period_s: float) -> bool:
        """Command the arm to stay where it is; False if a position hold has no measurement.

        Position interface: the last measured joints (not the last target, which the arm may
        not have reached). Velocity interface: zeros. The gripper keeps its last command.
        """
        if self._interface == "velocity":
            self.publish_arm([0.0] * len(self._joint_names), period_s)
            return True
        if measured is None:
            return False
        self.publish_arm(measured, period_s)
        return True

    def command_rate_hz(self, window_s: float = 2.0) -> float:
        """Arm commands per second over the last `window_s`."""
        now = time.monotonic()
        with self._lock:
            recent = [t for t in self._sent if now - t <= window_s]
        return len(recent) / window_s

    def destroy(self) -> None:
        self._node.destroy_lifecycle_publisher(self._arm)
        if self._gripper is not None:
            self._node.destroy_lifecycle_publisher(self._gripper)

    def _message(
        self, values: list[float], period_s: float
    ) -> Float64MultiArray | JointTrajectory | JointState:
        if self._command_type == FLOAT64_MULTI_ARRAY:
            return Float64MultiArray(data=values)
        velocity = self._interface == "velocity"
        if self._command_type == JOINT_TRAJECTORY:
            # A zero header stamp means "start now"; one point reached after one control period.
            point = JointTrajectoryPoint(time_from_start=_duration(period_s))
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
