"""`sim_cartesian`: a simulated Panda commanded in Cartesian space, as MoveIt Servo and a
Cartesian motion controller would drive a real one, with one `front` camera.

    ros2 run sequence_ai_ros sim_cartesian
    ros2 run sequence_ai_ros sim_cartesian --ros-args -p servo_command_type:=speed_units

Subscribes `servo_node/delta_twist_cmds` (TwistStamped in base_frame: `unitless` components in
[-1, 1] scaled by linear_scale / rotational_scale, or `speed_units` m/s and rad/s as they are),
`cartesian_motion_controller/target_frame` (PoseStamped in base_frame, approached at
target_linear_speed / target_angular_speed) and `gripper_controller/commands` (one value, 0 open
.. 1 closed). Joints follow the hand TCP by a damped least-squares IK step within the Panda's
limits; a command older than incoming_command_timeout stops the arm (Servo's rule). Non-finite
or out-of-range commands are ignored and counted. Publishes `ee_pose` (PoseStamped of
ee_frame in base_frame, stamped now), `joint_states` (panda_joint1..7, panda_finger_joint1
0..1) at rate_hz, `cameras/front/image_raw` (rgb8, top and side view) at fps and, where tf2_ros
imports, the base_frame -> ee_frame transform.
"""

from __future__ import annotations

import threading
from collections import deque
from typing import Protocol

import numpy as np
from geometry_msgs.msg import PoseStamped, TransformStamped, TwistStamped
from rclpy.node import Node
from rclpy.parameter import Parameter
from rclpy.qos import QoSProfile, ReliabilityPolicy, qos_profile_sensor_data
from sensor_msgs.msg import Image, JointState
from std_msgs.msg import Float64MultiArray

from sequence_ai_lab.robots.shared.arm import GRIPPER_JOINT, JOINT_NAMES
from sequence_ai_lab.robots.shared.process import spin_until_signal
from sequence_ai_lab.robots.sim_cartesian.cartesian_arm import (
    CartesianArm,
    CommandRefused,
    ServoCommandType,
    ServoSettings,
)
from sequence_ai_lab.robots.sim_cartesian.cartesian_view import CartesianView
from sequence_ai_lab.robots.sim_cartesian.panda_kinematics import READY_POSE
from sequence_ai_ros.core.pose_math import matrix_to_quaternion, quaternion_to_matrix
from sequence_ai_ros.params.spec_table import Spec, declare_read_only

TWIST_TOPIC = "servo_node/delta_twist_cmds"
TARGET_TOPIC = "cartesian_motion_controller/target_frame"
GRIPPER_TOPIC = "gripper_controller/commands"
CAMERA_TOPIC = "cameras/front/image_raw"
# TCP positions kept for the camera's trail: 10 s at 15 fps.
TRAIL_LENGTH = 150
_DEFAULTS = ServoSettings()

SPECS: dict[str, Spec] = {
    "rate_hz": Spec(100.0, "ee_pose, joint_states and integration rate (Hz)",
                    float_range=(1.0, 1000.0)),
    "fps": Spec(15.0, "front camera frame rate (Hz)", float_range=(0.1, 60.0)),
    "image_width": Spec(256, "camera image width (px)", int_range=(16, 1920)),
    "image_height": Spec(256, "camera image height (px)", int_range=(16, 1080)),
    "servo_command_type": Spec(
        _DEFAULTS.command_type.value,
        "unitless (twist components in [-1, 1], scaled) | speed_units (m/s, rad/s as sent)",
        choices=tuple(t.value for t in ServoCommandType),
    ),
    "linear_scale": Spec(_DEFAULTS.linear_scale, "m/s at a unitless 1 (Servo's scale.linear)",
                         float_range=(0.001, 2.0)),
    "rotational_scale": Spec(_DEFAULTS.rotational_scale,
                             "rad/s at a unitless 1 (Servo's scale.rotational)",
                             float_range=(0.001, 6.0)),
    "incoming_command_timeout": Spec(
        _DEFAULTS.command_timeout_s, "a command this old (s) stops the arm (Servo's name)",
        float_range=(0.001, 10.0),
    ),
    "target_linear_speed": Spec(_DEFAULTS.target_linear_speed,
                                "speed towards a pose target (m/s)", float_range=(0.001, 2.0)),
    "target_angular_speed": Spec(_DEFAULTS.target_angular_speed,
                                 "turn rate towards a pose target (rad/s)",
                                 float_range=(0.001, 6.0)),
    "base_frame": Spec("panda_link0", "frame of commands and of ee_pose"),
    "ee_frame": Spec("panda_hand_tcp", "the end effector's frame (ee_pose's child, tf)"),
    "initial_positions": Spec(READY_POSE.tolist(), "start pose, 7 joints (rad)"),
    "initial_gripper": Spec(0.0, "start gripper, 0 open .. 1 closed", float_range=(0.0, 1.0)),
    "target_marker": Spec(
        [], "a point [x, y, z] (m, base_frame) marked in the frames until a pose target comes; "
        "[] = none", kind=Parameter.Type.DOUBLE_ARRAY,
    ),
}


class _Broadcaster(Protocol):
    def sendTransform(self, transform: TransformStamped) -> None: ...  # noqa: N802 (tf2's name)


def _tf_broadcaster(node: Node) -> _Broadcaster | None:
    # tf2_ros has no wheels on some machines (this one): ee_pose alone carries the pose there.
    try:
        from tf2_ros import TransformBroadcaster
    except ImportError:
        return None
    broadcaster: _Broadcaster = TransformBroadcaster(node)
    return broadcaster


class SimCartesian(Node):
    """Steps `arm` at rate_hz, publishes its pose and joints, renders the camera at fps.

    Callbacks and timers may run on any executor: `_lock` guards `arm` and `_trail`.
    """

    def __init__(self, **kwargs: object) -> None:
        super().__init__("sim_cartesian", **kwargs)  # type: ignore[arg-type]
        values = declare_read_only(self, SPECS)
        initial = list(values["initial_positions"])
        marker = list(values["target_marker"])
        if len(initial) != len(JOINT_NAMES):
            raise ValueError(f"initial_positions={initial!r} is refused; expected 7 values")
        if marker and len(marker) != 3:
            raise ValueError(f"target_marker={marker!r} is refused; expected [] or [x, y, z]")
        self._frames = (values["base_frame"], values["ee_frame"])
        self._lock = threading.Lock()
        settings = ServoSettings(
            command_type=ServoCommandType(values["servo_command_type"]),
            linear_scale=values["linear_scale"],
            rotational_scale=values["rotational_scale"],
            command_timeout_s=values["incoming_command_timeout"],
            target_linear_speed=values["target_linear_speed"],
            target_angular_speed=values["target_angular_speed"],
        )
        self.arm = CartesianArm(
            settings, q=np.array(initial, dtype=float), gripper=values["initial_gripper"]
        )
        self._marker = np.array(marker) if marker else None
        self._trail: deque[np.ndarray] = deque(maxlen=TRAIL_LENGTH)
        self._view = CartesianView(values["image_width"], values["image_height"])
        self._pose_pub = self.create_publisher(PoseStamped, "ee_pose", 10)
        self._joint_pub = self.create_publisher(JointState, "joint_states", 10)
        self._camera_pub = self.create_publisher(Image, CAMERA_TOPIC, qos_profile_sensor_data)
        self._tf = _tf_broadcaster(self)
        commands = QoSProfile(depth=10, reliability=ReliabilityPolicy.RELIABLE)
        self.create_subscription(TwistStamped, TWIST_TOPIC, self._on_twist, commands)
        self.create_subscription(PoseStamped, TARGET_TOPIC, self._on_target, commands)
        self.create_subscription(Float64MultiArray, GRIPPER_TOPIC, self._on_gripper, commands)
        self._last_step_s = self._now_s()
        self.create_timer(1.0 / values["rate_hz"], self._on_tick)
        self.create_timer(1.0 / values["fps"], self._on_frame)
        pose = f"{self._frames[0]} -> {self._frames[1]}"
        self.get_logger().info(
            f"simulated Cartesian Panda up: {values['servo_command_type']} twists, ee_pose and "
            f"joint_states at {values['rate_hz']:g} Hz, front camera "
            f"{values['image_width']}x{values['image_height']} at {values['fps']:g} Hz; "
            + (f"tf2_ros imports: {pose} also on tf" if self._tf is not None
               else f"tf2_ros does not import here: no tf, {pose} on ee_pose only")
        )

    def _now_s(self) -> float:
        return self.get_clock().now().nanoseconds * 1e-9

    # ----- commands -----

    def _refused(self, topic: str, why: str) -> None:
        self.get_logger().warning(
            f"{topic}: ignored, {why} ({self.arm.refused} command(s) refused so far)",
            throttle_duration_sec=1.0,
        )

    def _in_base_frame(self, topic: str, frame_id: str) -> bool:
        # No tf here to transform with: a command must come in base_frame (empty = base_frame).
        if frame_id in ("", self._frames[0]):
            return True
        with self._lock:
            err = self.arm.refuse(CommandRefused(
                f"frame_id {frame_id!r}, expected {self._frames[0]!r} (or empty)"
            ))
        self._refused(topic, str(err))
        return False

    def _on_twist(self, msg: TwistStamped) -> None:
        if not self._in_base_frame(TWIST_TOPIC, msg.header.frame_id):
            return
        t = msg.twist
        try:
            with self._lock:
                self.arm.command_twist(
                    [t.linear.x, t.linear.y, t.linear.z], [t.angular.x, t.angular.y, t.angular.z],
                    self._now_s(),
                )
        except CommandRefused as err:
            self._refused(TWIST_TOPIC, str(err))

    def _on_target(self, msg: PoseStamped) -> None:
        if not self._in_base_frame(TARGET_TOPIC, msg.header.frame_id):
            return
        p, o = msg.pose.position, msg.pose.orientation
        try:
            with self._lock:
                try:
                    rotation = np.array(quaternion_to_matrix([o.x, o.y, o.z, o.w]))
                except ValueError as err:  # a zero or non-finite quaternion
                    raise self.arm.refuse(CommandRefused(f"orientation: {err}")) from None
                self.arm.command_pose([p.x, p.y, p.z], rotation, self._now_s())
        except CommandRefused as err:
            self._refused(TARGET_TOPIC, str(err))

    def _on_gripper(self, msg: Float64MultiArray) -> None:
        try:
            with self._lock:
                if len(msg.data) != 1:
                    raise self.arm.refuse(
                        CommandRefused(f"got {len(msg.data)} values, expected 1")
                    )
                self.arm.command_gripper(float(msg.data[0]))
        except CommandRefused as err:
            self._refused(GRIPPER_TOPIC, str(err))

    # ----- outputs -----

    def _on_tick(self) -> None:
        stamp = self.get_clock().now()
        now = stamp.nanoseconds * 1e-9
        # The elapsed time on the stamps' clock (capped; 0 if it stepped back): a late tick
        # does not slow the arm.
        dt = min(0.1, max(0.0, now - self._last_step_s))
        self._last_step_s = now
        with self._lock:
            self.arm.step(dt, now)
            q, gripper, tcp = self.arm.q.copy(), self.arm.gripper, self.arm.tcp()
        header_stamp = stamp.to_msg()
        pose = PoseStamped()
        pose.header.stamp, pose.header.frame_id = header_stamp, self._frames[0]
        pose.pose.position.x, pose.pose.position.y, pose.pose.position.z = tcp[:3, 3].tolist()
        o = pose.pose.orientation
        o.x, o.y, o.z, o.w = matrix_to_quaternion(tcp[:3, :3].tolist())
        joints = JointState(name=[*JOINT_NAMES, GRIPPER_JOINT], position=[*q.tolist(), gripper])
        joints.header.stamp = header_stamp
        if not self.context.ok():
            return  # Ctrl+C shut the context down under this timer
        self._pose_pub.publish(pose)
        self._joint_pub.publish(joints)
        if self._tf is not None:
            transform = TransformStamped()
            transform.header = pose.header
            transform.child_frame_id = self._frames[1]
            t = transform.transform
            t.translation.x, t.translation.y, t.translation.z = tcp[:3, 3].tolist()
            t.rotation = pose.pose.orientation
            self._tf.sendTransform(transform)

    def _on_frame(self) -> None:
        with self._lock:
            q, gripper, target = self.arm.q.copy(), self.arm.gripper, self.arm.target
            self._trail.append(self.arm.tcp()[:3, 3].copy())
            trail = list(self._trail)
        if self._camera_pub.get_subscription_count() == 0 or not self.context.ok():
            return
        marked = target[0] if target is not None else self._marker
        pixels = self._view.draw(q, gripper, marked, trail)
        image = Image(height=pixels.shape[0], width=pixels.shape[1], encoding="rgb8")
        image.step = pixels.shape[1] * 3
        image.header.stamp = self.get_clock().now().to_msg()
        image.header.frame_id = "front_optical_frame"
        image.data = pixels.tobytes()
        self._camera_pub.publish(image)


def main(args: list[str] | None = None) -> None:
    """Runs until SIGINT or SIGTERM; any number of them ends it once, cleanly, with status 0."""
    spin_until_signal(SimCartesian, args)


if __name__ == "__main__":
    main()
