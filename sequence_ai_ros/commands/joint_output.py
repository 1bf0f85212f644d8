"""The output stage of the arm gate: arm and gripper commands in the controller's message type.

Only `sequence_ai_ros.safety.gate.ArmGate` holds a `CommandPublisher`; everything that commands
the arm goes through the gate's checks first.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence

from builtin_interfaces.msg import Duration
from rclpy.duration import Duration as RosDuration
from rclpy.lifecycle import LifecycleNode
from sensor_msgs.msg import JointState
from std_msgs.msg import Float64MultiArray
from trajectory_msgs.msg import JointTrajectory, JointTrajectoryPoint

from sequence_ai_ros.commands.output_stage import OutputStage
from sequence_ai_ros.core.chunk_trajectory import ChunkTrajectory
from sequence_ai_ros.core.command_kinds import (
    FLOAT64_MULTI_ARRAY,
    JOINT_STATE,
    JOINT_TRAJECTORY,
    Interface,
)

_MESSAGE_TYPES = {
    FLOAT64_MULTI_ARRAY: Float64MultiArray,
    JOINT_TRAJECTORY: JointTrajectory,
    JOINT_STATE: JointState,
}


def _duration(seconds: float) -> Duration:
    whole = int(seconds)
    return Duration(sec=whole, nanosec=int(round((seconds - whole) * 1e9)))


class CommandPublisher(OutputStage):
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
        super().__init__(
            node,
            arm_type=_MESSAGE_TYPES[command_type],
            arm_topic=command_topic,
            gripper_topic=gripper_topic,
            on_publish=on_publish,
        )
        self._joint_names = list(joint_names)
        self._interface = Interface(interface)
        self._command_type = command_type
        self._period_s = period_s

    @property
    def interface(self) -> Interface:
        return self._interface

    def publish_arm(self, values: Sequence[float]) -> None:
        """One arm command: positions or velocities in joint_names order."""
        values = [float(v) for v in values[: len(self._joint_names)]]
        self._send_arm(self._message(values))

    def publish_trajectory(self, trajectory: ChunkTrajectory) -> None:
        """One JointTrajectory with every point of `trajectory`, stamped in ROS time (a zero
        stamp, "now", for an immediate one)."""
        msg = JointTrajectory(joint_names=self._joint_names)
        if not trajectory.immediate:
            # The trajectory's times are monotonic; the controller reads the stamp on the ROS clock.
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
        self._send_arm(msg)

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
