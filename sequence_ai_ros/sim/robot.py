"""`sim_robot`: a simulated DROID Franka with three cameras, speaking the topics a real one does.

Joint states and the command topics match ros2_control's joint_state_broadcaster, forward command
controllers and joint_trajectory_controller, so the node cannot tell it from a robot.

    ros2 run sequence_ai_ros sim_robot --ros-args -p image_width:=640 -p image_height:=360
    ros2 run sequence_ai_ros sim_robot --ros-args -p camera_frames:=premade -p fps:=30.0 \
        -p "views:=[exterior_1, wrist_left]"          # the benchmarks' light camera feed

Publishes `joint_states` (panda_joint1..7 + panda_finger_joint1, gripper 0 open .. 1 closed),
`cameras/{exterior_1,exterior_2,wrist_left}/image_raw` (rgb8; `.../compressed` JPEG with
image_transport compressed|both) and, while a trajectory drives the arm,
`joint_trajectory_controller/reference` (the desired state, a JointState). Subscribes
`forward_position_controller/commands`, `forward_velocity_controller/commands` (7 values),
`gripper_controller/commands` (1 value) and `joint_trajectory_controller/joint_trajectory`
(sim/trajectory.py plays it like joint_trajectory_controller). docs/sim.md has the details; the
read-only parameters describe themselves (`ros2 param describe /sim_robot <name>`).
"""

from __future__ import annotations

import array
import io
import threading
import time
from collections.abc import Callable

import numpy as np
from builtin_interfaces.msg import Time as TimeMsg
from rclpy.clock import Clock, ClockType
from rclpy.node import Node
from rclpy.publisher import Publisher
from rclpy.qos import QoSProfile, ReliabilityPolicy, qos_profile_sensor_data
from sensor_msgs.msg import CompressedImage, Image, JointState
from std_msgs.msg import Float64MultiArray
from trajectory_msgs.msg import JointTrajectory

from sequence_ai_ros.sim.arm import GRIPPER_JOINT, JOINT_NAMES, SimArm
from sequence_ai_ros.sim.parameters import SimConfig
from sequence_ai_ros.sim.process import spin_until_signal
from sequence_ai_ros.sim.render import IMAGE_SIZE, SceneRenderer
from sequence_ai_ros.sim.trajectory import (
    Trajectory,
    TrajectoryController,
    TrajectoryPoint,
    TrajectoryRejected,
)

# Premade frames get a sensor's noise so that their JPEG weighs what a real camera's does
# (about 100 kB at 1280x720, quality 90; the clean render compresses to a fifth of that).
PREMADE_NOISE_SIGMA = 3.0
TRAJECTORY_TOPIC = "joint_trajectory_controller/joint_trajectory"
REFERENCE_TOPIC = "joint_trajectory_controller/reference"
RATE_LOG_PERIOD_S = 10.0
# Smaller joint or gripper changes leave every pixel at 1/4 resolution where it was.
_MOVED_RAD = 1e-4
_STATE_NAMES = (*JOINT_NAMES, GRIPPER_JOINT)
_ARM_NAMES = list(JOINT_NAMES)


def light_feed_overrides(
    transport: str = "raw", fps: float = 30.0, views: tuple[str, ...] = ("exterior_1", "wrist_left")
) -> dict[str, str]:
    """`-p name:=value` overrides that make sim_robot the benchmarks' light camera feed.

    Two 1280x720 cameras at 30 Hz of premade frames (JPEG encoded once with `compressed`),
    joint states at 100 Hz; pass to `demo.launcher.ros_arguments(..., overrides=...)`.
    """
    return {
        "camera_frames": "premade",
        "fps": repr(float(fps)),  # a double parameter: "30" would be refused as an integer
        "views": "[" + ",".join(views) + "]",
        "image_transport": transport,
        "image_width": str(IMAGE_SIZE[0]),
        "image_height": str(IMAGE_SIZE[1]),
    }


class _CameraOutput:
    """One view: its renderer, one reused message whose data it draws into, its publishers.

    Used by the camera thread only.
    """

    def __init__(
        self, node: Node, view: str, width: int, height: int, transport: str, scale: int
    ) -> None:
        self.view = view
        self.renderer = SceneRenderer(view, width, height, scale)
        # The renderer draws straight into the message's own array.array (taken by one copy
        # at first), so a new frame costs no copy before publishing.
        self.image = Image(height=height, width=width, encoding="rgb8", step=width * 3)
        self.image.header.frame_id = f"{view}_optical_frame"
        self.image.data = array.array("B", bytes(width * height * 3))
        self.pixels = np.frombuffer(self.image.data, dtype=np.uint8).reshape(height, width, 3)
        self.jpeg = CompressedImage(format="rgb8; jpeg compressed bgr8")
        self.jpeg.header.frame_id = self.image.header.frame_id
        self.drawn: np.ndarray | None = None  # joints + gripper of the frame in `pixels`
        self.encoded = False  # the JPEG holds the frame in `pixels`
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

    def draw(self, state: np.ndarray) -> None:
        """Render the scene for joints + gripper `state` unless the frame already shows it."""
        if self.drawn is not None and np.max(np.abs(state - self.drawn)) < _MOVED_RAD:
            return
        self.renderer.render(state[:7], float(state[7]), out=self.pixels)
        self.drawn = state
        self.encoded = False

    def add_sensor_noise(self, sigma: float, seed: int) -> None:
        """Gaussian noise on the frame, as a camera's sensor adds."""
        noise = np.random.default_rng(seed).normal(0.0, sigma, self.pixels.shape)
        self.pixels[:] = np.clip(self.pixels + noise, 0, 255).astype(np.uint8)
        self.encoded = False

    def encode(self, quality: int) -> None:
        if self.encoded:
            return
        from PIL import Image as PilImage  # Pillow only when someone asked for JPEG

        out = io.BytesIO()
        PilImage.fromarray(self.pixels).save(out, format="JPEG", quality=quality)
        self.jpeg.data = array.array("B", out.getvalue())
        self.encoded = True


class SimRobot(Node):
    """Integrates the arm at `rate_hz`, publishes joint states, renders cameras at `fps`.

    Threads: `sim-joints` (the arm's loop: trajectory sample, integration, joint states),
    `sim-cameras` (frames) and the executor's (command subscriptions, the rate log). `_lock`
    guards `arm` and `_trajectory`; `_counts` is written by the loops and swapped by the log.
    """

    def __init__(self, **kwargs: object) -> None:
        super().__init__("sim_robot", **kwargs)  # type: ignore[arg-type]
        config = SimConfig.declare(self)
        self._jpeg_quality = config.jpeg_quality

        self._lock = threading.Lock()
        self.arm = SimArm(
            q=np.array(config.initial_positions, dtype=float),
            gripper=config.initial_gripper,
            velocity_timeout_s=config.velocity_timeout_s,
        )
        self._trajectory = TrajectoryController(
            JOINT_NAMES,
            replacement=config.trajectory_replacement,
            allow_nonzero_velocity_at_trajectory_end=config.allow_nonzero_velocity_at_trajectory_end,
        )
        self._premade = config.camera_frames == "premade"
        self._last_step = self._now_s()
        steady = Clock(clock_type=ClockType.STEADY_TIME)
        # Reliable, like ros2_control's joint_state_broadcaster; best-effort readers still match.
        self._joint_pub = self.create_publisher(JointState, "joint_states", 10)
        self._reference_pub = self.create_publisher(JointState, REFERENCE_TOPIC, 10)
        self._cameras = [
            _CameraOutput(
                self, view, config.image_width, config.image_height, config.image_transport,
                config.render_scale,
            )
            for view in config.views
        ]
        if self._premade:
            for seed, camera in enumerate(self._cameras):
                camera.draw(np.array([*self.arm.q, self.arm.gripper]))
                camera.add_sensor_noise(PREMADE_NOISE_SIGMA, seed)
        commands = QoSProfile(depth=10, reliability=ReliabilityPolicy.RELIABLE)
        for msg_type, topic, callback in (
            (Float64MultiArray, "forward_position_controller/commands", self._on_positions),
            (Float64MultiArray, "forward_velocity_controller/commands", self._on_velocities),
            (Float64MultiArray, "gripper_controller/commands", self._on_gripper),
            (JointTrajectory, TRAJECTORY_TOPIC, self._on_trajectory),
        ):
            self.create_subscription(msg_type, topic, callback, commands)
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
                ("sim-joints", config.rate_hz, self._on_tick),
                ("sim-cameras", config.fps, self._on_frame),
            )
        ]
        for loop in self._loops:
            loop.start()
        self.get_logger().info(
            f"simulated arm up: joints at {config.rate_hz:g} Hz, {len(config.views)} cameras "
            f"{config.image_width}x{config.image_height} at {config.fps:g} Hz "
            f"({config.image_transport}, {config.camera_frames} frames), trajectories: "
            f"{config.trajectory_replacement.value}"
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

    def _now_s(self) -> float:
        return self.get_clock().now().nanoseconds * 1e-9

    # ----- commands (executor thread) -----

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
                # A forward command takes the arm from the trajectory controller, as switching
                # ros2_control controllers would.
                self._trajectory.stop()
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

    def _on_trajectory(self, msg: JointTrajectory) -> None:
        trajectory = Trajectory(
            joint_names=list(msg.joint_names),
            start_s=msg.header.stamp.sec + msg.header.stamp.nanosec * 1e-9,
            points=[
                TrajectoryPoint(
                    p.time_from_start.sec + p.time_from_start.nanosec * 1e-9,
                    p.positions, p.velocities, p.accelerations, p.effort,
                )
                for p in msg.points
            ],
        )  # fmt: skip
        try:
            with self._lock:
                self._trajectory.receive(trajectory, self._now_s(), self.arm.q, self.arm.qd)
        except TrajectoryRejected as err:
            # Refused like joint_trajectory_controller does: logged, the running one goes on.
            self.get_logger().error(f"{TRAJECTORY_TOPIC}: rejected: {err}")

    # ----- the loops -----

    def _on_tick(self) -> None:
        stamp = self.get_clock().now()
        now = stamp.nanoseconds * 1e-9
        # Integrate over the elapsed time on the clock of the stamps (capped; 0 if the clock
        # stepped back), so a late tick does not slow the arm and velocities match positions.
        dt = min(0.1, max(0.0, now - self._last_step))
        self._last_step = now
        with self._lock:
            # The trajectory is sampled here, at the arm's own rate, whatever its sender's pace.
            desired = self._trajectory.sample(now)
            if desired is not None:
                self.arm.command_positions(desired.positions)
            self.arm.step(dt)
            q, qd, gripper = self.arm.q.copy(), self.arm.qd.copy(), self.arm.gripper
        stamp_msg = stamp.to_msg()
        msg = JointState(name=_STATE_NAMES, position=[*q.tolist(), gripper])
        msg.header.stamp = stamp_msg
        msg.velocity = [*qd.tolist(), 0.0]
        self._publish(self._joint_pub, msg)
        self._counts["joint_states"] += 1
        if desired is not None and self._reference_pub.get_subscription_count() > 0:
            reference = JointState(
                name=_ARM_NAMES,
                position=desired.positions.tolist(),
                velocity=desired.velocities.tolist(),
            )
            reference.header.stamp = stamp_msg
            self._publish(self._reference_pub, reference)

    def _on_frame(self) -> None:
        with self._lock:
            state = np.array([*self.arm.q, self.arm.gripper])
        stamp: TimeMsg = self.get_clock().now().to_msg()
        published = False
        for camera in self._cameras:
            if not camera.wanted():
                continue
            published = True
            if not self._premade:
                camera.draw(state)
            if camera.raw is not None:
                camera.image.header.stamp = stamp
                self._publish(camera.raw, camera.image)
            if camera.compressed is not None:
                camera.encode(self._jpeg_quality)
                camera.jpeg.header.stamp = stamp
                self._publish(camera.compressed, camera.jpeg)
        self._counts["frames"] += published

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


def main(args: list[str] | None = None) -> None:
    """Runs until SIGINT or SIGTERM; any number of them ends it once, cleanly, with status 0."""
    spin_until_signal(SimRobot, args)


if __name__ == "__main__":
    main()
