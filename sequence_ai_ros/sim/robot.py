"""`sim_robot`: a simulated DROID Franka with three cameras, speaking the topics a real one does.

Joint states and the position/velocity/gripper command topics match ros2_control's
joint_state_broadcaster and forward command controllers, so the node cannot tell it from a robot.

    ros2 run sequence_ai_ros sim_robot --ros-args -p image_width:=640 -p image_height:=360

Publishes `joint_states` (panda_joint1..7 + panda_finger_joint1, gripper 0 open .. 1 closed) and
`cameras/{exterior_1,exterior_2,wrist_left}/image_raw` (rgb8; `.../compressed` JPEG with
image_transport compressed|both); subscribes `forward_position_controller/commands`,
`forward_velocity_controller/commands` (7 values) and `gripper_controller/commands` (1 value).
Its read-only parameters describe themselves (`ros2 param describe /sim_robot <name>`).
"""

from __future__ import annotations

import array
import io
import threading
import time
from collections.abc import Callable
from typing import Any

import numpy as np
import rclpy
from rcl_interfaces.msg import ParameterDescriptor
from rclpy.clock import Clock, ClockType
from rclpy.executors import ExternalShutdownException, SingleThreadedExecutor
from rclpy.node import Node
from rclpy.publisher import Publisher
from rclpy.qos import QoSProfile, ReliabilityPolicy, qos_profile_sensor_data
from sensor_msgs.msg import CompressedImage, Image, JointState
from std_msgs.msg import Float64MultiArray

from sequence_ai_ros.sim.arm import GRIPPER_JOINT, HOME, JOINT_NAMES, SimArm
from sequence_ai_ros.sim.render import VIEWS, SceneRenderer

TRANSPORTS = ("raw", "compressed", "both")
RATE_LOG_PERIOD_S = 10.0
_STATE_NAMES = (*JOINT_NAMES, GRIPPER_JOINT)


class _CameraOutput:
    """One view: its renderer, a reusable message buffer and its publishers."""

    def __init__(
        self, node: Node, view: str, width: int, height: int, transport: str, scale: int
    ) -> None:
        self.view = view
        self.frame_id = f"{view}_optical_frame"
        self.renderer = SceneRenderer(view, width, height, scale)
        # The frame buffer is an array.array so the message takes it without a per-element check.
        self.buffer = array.array("B", bytes(width * height * 3))
        self.pixels = np.frombuffer(self.buffer, dtype=np.uint8).reshape(height, width, 3)
        topic = f"cameras/{view}/image_raw"
        self.raw = (
            node.create_publisher(Image, topic, qos_profile_sensor_data)
            if transport in ("raw", "both")
            else None
        )
        self.compressed = (
            node.create_publisher(CompressedImage, f"{topic}/compressed", qos_profile_sensor_data)
            if transport in ("compressed", "both")
            else None
        )

    def wanted(self) -> bool:
        # Rendering a view nobody subscribes to would only burn the shared CPU.
        return any(
            pub is not None and pub.get_subscription_count() > 0
            for pub in (self.raw, self.compressed)
        )


class SimRobot(Node):
    """Integrates the arm at `rate_hz`, publishes joint states, renders cameras at `fps`."""

    def __init__(self, **kwargs: object) -> None:
        super().__init__("sim_robot", **kwargs)  # type: ignore[arg-type]
        rate_hz = self._param("rate_hz", 100.0, "joint_states rate and integration rate (Hz)")
        width = self._param("image_width", 1280, "camera image width (px)")
        height = self._param("image_height", 720, "camera image height (px)")
        fps = self._param("fps", 15.0, "camera frame rate (Hz), 15..30 like DROID's cameras")
        transport = self._param("image_transport", "raw", "raw | compressed | both")
        views = self._param("views", list(VIEWS), "camera views to publish")
        initial = self._param("initial_positions", HOME.tolist(), "start pose, 7 joints (rad)")
        gripper = self._param("initial_gripper", 0.0, "start gripper, 0 open .. 1 closed")
        timeout = self._param("velocity_timeout_s", 0.2, "hold once velocities are this old (s)")
        self._jpeg_quality = self._param("jpeg_quality", 90, "quality of the compressed images")
        scale = self._param("render_scale", 4, "render at 1/scale of the image size, then upscale")
        self._check(rate_hz > 0, "rate_hz", rate_hz, "a positive rate")
        self._check(0 < fps <= 60, "fps", fps, "a rate in (0, 60]")
        self._check(
            width > 0 and height > 0, "image_width/image_height", (width, height), "positive sizes"
        )
        self._check(transport in TRANSPORTS, "image_transport", transport, " | ".join(TRANSPORTS))
        self._check(all(v in VIEWS for v in views), "views", views, f"names from {VIEWS}")
        self._check(len(initial) == 7, "initial_positions", initial, "7 joint positions")
        self._check(scale >= 1, "render_scale", scale, "an integer >= 1")

        self._lock = threading.Lock()
        self.arm = SimArm(
            q=np.array(initial, dtype=float),
            gripper=float(gripper),
            velocity_timeout_s=float(timeout),
        )
        self._last_step = time.monotonic()
        steady = Clock(clock_type=ClockType.STEADY_TIME)
        # Reliable, like ros2_control's joint_state_broadcaster; best-effort readers still match.
        self._joint_pub = self.create_publisher(JointState, "joint_states", 10)
        self._cameras = [
            _CameraOutput(self, view, width, height, transport, scale) for view in views
        ]
        commands = QoSProfile(depth=10, reliability=ReliabilityPolicy.RELIABLE)
        self.create_subscription(
            Float64MultiArray,
            "forward_position_controller/commands",
            self._on_positions,
            commands,
        )
        self.create_subscription(
            Float64MultiArray,
            "forward_velocity_controller/commands",
            self._on_velocities,
            commands,
        )
        self.create_subscription(
            Float64MultiArray,
            "gripper_controller/commands",
            self._on_gripper,
            commands,
        )
        # Achieved rates, logged now and then: a starved machine shows here first.
        self._counts = {"joint_states": 0, "frames": 0}
        self._counted_since = time.monotonic()
        self.create_timer(RATE_LOG_PERIOD_S, self._log_rates, clock=steady)
        # The arm and the cameras run on plain threads with absolute deadlines: an executor's
        # timer dispatch costs more and jitters more than the work itself on a busy machine.
        self._stop = threading.Event()
        self._loops = [
            threading.Thread(target=self._every, args=(1.0 / rate, work), name=name, daemon=True)
            for name, rate, work in (
                ("sim-joints", rate_hz, self._on_tick),
                ("sim-cameras", fps, self._on_frame),
            )
        ]
        for loop in self._loops:
            loop.start()
        self.get_logger().info(
            f"simulated arm up: joints at {rate_hz:g} Hz, {len(views)} cameras {width}x{height} "
            f"at {fps:g} Hz ({transport})"
        )

    def _every(self, period_s: float, work: Callable[[], None]) -> None:
        deadline = time.monotonic()
        while not self._stop.is_set():
            work()
            deadline += period_s
            delay = deadline - time.monotonic()
            if delay < -period_s:
                # Far behind (a stall): restart the schedule instead of bursting to catch up.
                deadline = time.monotonic()
                delay = 0.0
            self._stop.wait(max(0.0, delay))

    def destroy_node(self) -> None:
        self._stop.set()
        for loop in self._loops:
            loop.join(timeout=2.0)
        super().destroy_node()

    def _param(self, name: str, default: object, description: str) -> Any:
        descriptor = ParameterDescriptor(description=description, read_only=True)
        return self.declare_parameter(name, default, descriptor).value

    def _check(self, ok: bool, name: str, value: object, expected: str) -> None:
        if not ok:
            raise ValueError(f"parameter {name}: got {value!r}, expected {expected}")

    def _on_positions(self, msg: Float64MultiArray) -> None:
        self._command(msg, "forward_position_controller/commands", self.arm.command_positions)

    def _on_velocities(self, msg: Float64MultiArray) -> None:
        self._command(msg, "forward_velocity_controller/commands", self.arm.command_velocities)

    def _command(
        self, msg: Float64MultiArray, topic: str, apply: Callable[[np.ndarray], None]
    ) -> None:
        try:
            with self._lock:
                apply(np.array(msg.data, dtype=float))
        except ValueError as err:
            # A bad command is dropped, like ros2_control does with a wrong-sized one.
            self.get_logger().warning(f"{topic}: {err}", throttle_duration_sec=1.0)

    def _on_gripper(self, msg: Float64MultiArray) -> None:
        if len(msg.data) != 1:
            self.get_logger().warning(
                f"gripper_controller/commands: got {len(msg.data)} values, expected 1",
                throttle_duration_sec=1.0,
            )
            return
        try:
            with self._lock:
                self.arm.command_gripper(float(msg.data[0]))
        except ValueError as err:
            self.get_logger().warning(
                f"gripper_controller/commands: {err}", throttle_duration_sec=1.0
            )

    def _on_tick(self) -> None:
        now = time.monotonic()
        # Integrate over the real elapsed time (capped) so a late tick does not slow the arm.
        dt = min(0.1, now - self._last_step)
        self._last_step = now
        with self._lock:
            self.arm.step(dt)
            q, qd, gripper = self.arm.q.copy(), self.arm.qd.copy(), self.arm.gripper
        msg = JointState()
        msg.header.stamp = self.get_clock().now().to_msg()
        msg.name = _STATE_NAMES
        msg.position = [*q.tolist(), gripper]
        msg.velocity = [*qd.tolist(), 0.0]
        self._publish(self._joint_pub, msg)
        self._counts["joint_states"] += 1

    def _on_frame(self) -> None:
        with self._lock:
            q, gripper = self.arm.q.copy(), self.arm.gripper
        stamp = self.get_clock().now().to_msg()
        rendered = False
        for camera in self._cameras:
            if not camera.wanted():
                continue
            rendered = True
            camera.renderer.render(q, gripper, out=camera.pixels)
            if camera.raw is not None:
                msg = Image()
                msg.header.stamp, msg.header.frame_id = stamp, camera.frame_id
                msg.height, msg.width = camera.pixels.shape[:2]
                msg.encoding = "rgb8"
                msg.step = msg.width * 3
                msg.data = camera.buffer
                self._publish(camera.raw, msg)
            if camera.compressed is not None:
                self._publish(camera.compressed, self._compress(camera, stamp))
        self._counts["frames"] += rendered

    def _log_rates(self) -> None:
        now = time.monotonic()
        span, self._counted_since = now - self._counted_since, now
        counts, self._counts = self._counts, {"joint_states": 0, "frames": 0}
        self.get_logger().info(
            f"last {span:.0f} s: joint_states {counts['joint_states'] / span:.0f} Hz, "
            f"camera frames {counts['frames'] / span:.1f} Hz"
        )

    def _publish(self, publisher: Publisher, msg: object) -> None:
        try:
            publisher.publish(msg)
        except Exception:
            # Ctrl+C shuts the context down while a timer may be mid-publish: that is not an error.
            if self.context.ok():
                raise

    def _compress(self, camera: _CameraOutput, stamp: object) -> CompressedImage:
        from PIL import Image as PilImage  # Pillow only when someone asked for JPEG

        out = io.BytesIO()
        PilImage.fromarray(camera.pixels).save(out, format="JPEG", quality=self._jpeg_quality)
        msg = CompressedImage()
        msg.header.stamp, msg.header.frame_id = stamp, camera.frame_id
        # The string image_transport writes for colour JPEG, so consumers treat it as a camera's.
        msg.format = "rgb8; jpeg compressed bgr8"
        msg.data = array.array("B", out.getvalue())
        return msg


def main(args: list[str] | None = None) -> None:
    rclpy.init(args=args)
    node = None
    try:
        node = SimRobot()
        executor = SingleThreadedExecutor()
        executor.add_node(node)
        executor.spin()
    except (KeyboardInterrupt, ExternalShutdownException):
        pass
    finally:
        if node is not None:
            node.destroy_node()
        if rclpy.ok():
            rclpy.shutdown()


if __name__ == "__main__":
    main()
