"""The arm gate's output stage in Cartesian space (issue 21): an ee_delta command as a
`geometry_msgs/TwistStamped` (MoveIt Servo's `delta_twist_cmds`), an ee_absolute command as a
`geometry_msgs/PoseStamped` (a Cartesian controller's target, e.g. FZI's `target_frame`), both
stamped now in `command_frame`, and the gripper as `std_msgs/Float64MultiArray`.

Only the arm gate holds one (as `CommandPublisher` for joints; both are `OutputStage`s): every
command it publishes passed cartesian_space.py's rules first.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from geometry_msgs.msg import PoseStamped, TwistStamped
from rclpy.lifecycle import LifecycleNode

from sequence_ai_ros.commands.output_stage import OutputStage
from sequence_ai_ros.core import pose_math
from sequence_ai_ros.core.chunk_trajectory import ChunkTrajectory
from sequence_ai_ros.core.command_kinds import EE_DELTA, Interface
from sequence_ai_ros.core.node_config import NodeConfig
from sequence_ai_ros.safety.cartesian_space import WIDTH


class CartesianCommands(OutputStage):
    """Publishes the end effector's commands: twists (ee_delta) or pose targets (ee_absolute).

    Its interface is velocity for twists (a hold, a pause are zero twists, as for a velocity
    arm) and position for pose targets (a hold is a pose)."""

    def __init__(
        self,
        node: LifecycleNode,
        *,
        space: str,
        topic: str,
        command_frame: str,
        gripper_topic: str,
        on_publish: Callable[[str, object], None] | None = None,
    ) -> None:
        self._twist = space == EE_DELTA
        self._frame = command_frame
        super().__init__(
            node,
            arm_type=TwistStamped if self._twist else PoseStamped,
            arm_topic=topic,
            gripper_topic=gripper_topic,
            on_publish=on_publish,
        )

    @property
    def interface(self) -> Interface:
        return Interface.VELOCITY if self._twist else Interface.POSITION

    def publish_arm(self, values: Sequence[float]) -> None:
        """One command: a twist [vx, vy, vz, wx, wy, wz] or a pose [x, y, z, roll, pitch, yaw]."""
        self._send_arm(self.message([float(v) for v in values[:WIDTH]]))

    def message(self, values: list[float]) -> TwistStamped | PoseStamped:
        msg: TwistStamped | PoseStamped = TwistStamped() if self._twist else PoseStamped()
        msg.header.stamp = self._node.get_clock().now().to_msg()
        msg.header.frame_id = self._frame
        if isinstance(msg, TwistStamped):
            linear, angular = msg.twist.linear, msg.twist.angular
            linear.x, linear.y, linear.z = values[0:3]
            angular.x, angular.y, angular.z = values[3:6]
            return msg
        (x, y, z), (qx, qy, qz, qw) = pose_math.pose_vector_to_pose(values)
        position, orientation = msg.pose.position, msg.pose.orientation
        position.x, position.y, position.z = x, y, z
        orientation.x, orientation.y, orientation.z, orientation.w = qx, qy, qz, qw
        return msg

    def publish_trajectory(self, trajectory: ChunkTrajectory) -> None:
        raise RuntimeError("Cartesian commands play in step mode; a chunk trajectory has no pose")


class DryRunCartesian(CartesianCommands):
    """A dry run's sink for Cartesian commands: the twists or pose targets on `~/planned`, the
    gripper on `~/planned_gripper`. The plan is not integrated into a pose: an observation
    during a dry goal reports the measured pose."""

    def restart(self) -> None:
        """A dry goal begins (nothing to reset: no planned pose is kept)."""

    def pose(self, measured: Sequence[float]) -> list[float]:
        """The joints an observation reports: the measured ones (an ee row has none)."""
        return list(measured)


def cartesian_output(
    node: LifecycleNode, config: NodeConfig, space: str,
    on_publish: Callable[[str, object], None] | None,
) -> CartesianCommands:
    """The arm gate's output for an ee model: twist_topic or pose_target_topic."""
    return CartesianCommands(
        node,
        space=space,
        topic=config.twist_topic if space == EE_DELTA else config.pose_target_topic,
        command_frame=config.command_frame or config.base_frame,
        gripper_topic=config.gripper_command_topic,
        on_publish=on_publish,
    )
