"""A light Cartesian test arm for the node (issue 21): publishes `ee_pose` and a `front`
camera, records the TwistStamped / PoseStamped / gripper commands it gets, and moves its pose
like Servo (a unitless twist times the scales for one period) or to a pose target."""

from __future__ import annotations

import math
import threading
from dataclasses import dataclass

from geometry_msgs.msg import PoseStamped, TwistStamped
from rclpy.context import Context
from rclpy.node import Node
from rclpy.qos import qos_profile_sensor_data
from sensor_msgs.msg import Image, JointState
from std_msgs.msg import Float64MultiArray

from sequence_ai_ros.core import pose_math

BASE_FRAME = "panda_link0"
TWIST_TOPIC = "servo_node/delta_twist_cmds"
POSE_TOPIC = "cartesian_motion_controller/target_frame"
# Inside the simulated arm's workspace, the hand pointing down.
START = (0.5, 0.0, 0.4)
DOWN = (1.0, 0.0, 0.0, 0.0)


@dataclass(frozen=True)
class Twist:
    frame_id: str
    stamp_s: float
    values: tuple[float, ...]

    @property
    def is_zero(self) -> bool:
        return not any(self.values)


@dataclass(frozen=True)
class Target:
    frame_id: str
    vector: tuple[float, ...]
    quaternion: tuple[float, float, float, float]


class EeArm(Node):
    """The robot side of an ee model: pose out, twists or pose targets in."""

    def __init__(self, namespace: str, context: Context, *, period_s: float = 1 / 25,
                 linear_scale: float = 0.4, sag_m: float = 0.0) -> None:
        super().__init__("test_ee_arm", namespace=namespace, context=context)
        self._lock = threading.Lock()
        self._period_s = period_s
        self._scale = linear_scale
        # Like node_harness's SAG: settling this far below each pose target (gravity) makes a
        # hold at the measured pose differ from every target the policy sent.
        self._sag_m = sag_m
        self.position = list(START)
        self.settled: list[tuple[float, float, float]] = [START]
        self.orientation = DOWN
        self.publish_pose = True
        # False: commands are recorded but the arm stays where it is (a hung driver).
        self.follow = True
        self.twists: list[Twist] = []
        self.targets: list[Target] = []
        self.gripper: list[list[float]] = []
        self._pose_pub = self.create_publisher(PoseStamped, "ee_pose", qos_profile_sensor_data)
        self._joints = self.create_publisher(JointState, "joint_states", qos_profile_sensor_data)
        self._camera = self.create_publisher(
            Image, "cameras/front/image_raw", qos_profile_sensor_data
        )
        self._frame = Image(height=64, width=64, encoding="rgb8", step=64 * 3)
        self._frame.data = bytes(64 * 64 * 3)
        self.create_subscription(TwistStamped, TWIST_TOPIC, self._on_twist, 100)
        self.create_subscription(PoseStamped, POSE_TOPIC, self._on_target, 100)
        self.create_subscription(
            Float64MultiArray, "gripper_controller/commands",
            lambda msg: self._keep(self.gripper, list(msg.data)), 100,
        )
        self.create_timer(0.02, self._publish_state)
        self.create_timer(1 / 15, self._publish_frame)

    def _keep(self, kept: list, item: object) -> None:
        with self._lock:
            kept.append(item)

    def _publish_state(self) -> None:
        # The gripper's joint state goes on when the pose stops: only the pose is the fault.
        self._joints.publish(JointState(name=["panda_finger_joint1"], position=[0.0]))
        with self._lock:
            if not self.publish_pose:
                return
            position, orientation = list(self.position), self.orientation
        msg = PoseStamped()
        msg.header.stamp = self.get_clock().now().to_msg()
        msg.header.frame_id = BASE_FRAME
        msg.pose.position.x, msg.pose.position.y, msg.pose.position.z = position
        q = msg.pose.orientation
        q.x, q.y, q.z, q.w = orientation
        self._pose_pub.publish(msg)

    def _publish_frame(self) -> None:
        self._frame.header.stamp = self.get_clock().now().to_msg()
        self._camera.publish(self._frame)

    def _on_twist(self, msg: TwistStamped) -> None:
        linear, angular = msg.twist.linear, msg.twist.angular
        values = (linear.x, linear.y, linear.z, angular.x, angular.y, angular.z)
        stamp = msg.header.stamp.sec + msg.header.stamp.nanosec * 1e-9
        with self._lock:
            self.twists.append(Twist(msg.header.frame_id, stamp, values))
            if not self.follow:
                return
            # Like Servo with unitless commands: one period of the scaled twist.
            self.position = [
                p + v * self._scale * self._period_s for p, v in zip(self.position, values[:3])
            ]

    def _on_target(self, msg: PoseStamped) -> None:
        p, q = msg.pose.position, msg.pose.orientation
        quaternion = (q.x, q.y, q.z, q.w)
        vector = pose_math.pose_to_vector((p.x, p.y, p.z), quaternion)
        with self._lock:
            self.targets.append(Target(msg.header.frame_id, tuple(vector), quaternion))
            if not self.follow:
                return
            # A stiff Cartesian controller: at the target at once (less the sag)...
            self.position = [p.x, p.y, p.z - self._sag_m]
            self.orientation = quaternion
            self.settled.append((p.x, p.y, p.z - self._sag_m))
        # ... and its state broadcaster says so then, not up to a pose period later.
        self._publish_state()

    def twists_seen(self) -> list[Twist]:
        with self._lock:
            return list(self.twists)

    def targets_seen(self) -> list[Target]:
        with self._lock:
            return list(self.targets)

    def is_hold(self, target: Target) -> bool:
        """A pose target at a pose the arm settled at: the node's hold (with a sag, no policy
        target is one)."""
        with self._lock:
            settled = list(self.settled)
        return any(math.dist(target.vector[:3], pose) < 1e-6 for pose in settled)

    def moved_m(self) -> float:
        with self._lock:
            return math.dist(self.position, START)
