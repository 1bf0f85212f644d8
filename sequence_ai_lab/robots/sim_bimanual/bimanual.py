"""`sim_bimanual`: a simulated two-arm robot (two 6-joint arms, two grippers, ALOHA-style) with
the bimanual model's three cameras, one forward position controller per arm and per gripper.

    ros2 run sequence_ai_ros sim_bimanual

Publishes `joint_states` (left_joint1..6, right_joint1..6, left_gripper, right_gripper; grippers
0 open .. 1 closed) and `cameras/{cam_high,cam_left_wrist,cam_right_wrist}/image_raw` (rgb8, the
joints drawn as bars). Subscribes `left_arm_controller/commands`,
`right_arm_controller/commands` (6 position targets each) and
`left_gripper_controller/commands`, `right_gripper_controller/commands` (1 value each). A target
is approached at most `max_velocity` rad/s, like a position controller on a real joint.
"""

from __future__ import annotations

import threading

import numpy as np
from rclpy.context import Context
from rclpy.node import Node
from rclpy.qos import qos_profile_sensor_data
from sensor_msgs.msg import Image, JointState
from std_msgs.msg import Float64MultiArray

from sequence_ai_lab.robots.shared.process import spin_until_signal
from sequence_ai_ros.params.spec_table import Spec, declare_read_only

SIDES = ("left", "right")
ARM_JOINTS = {side: tuple(f"{side}_joint{i}" for i in range(1, 7)) for side in SIDES}
GRIPPERS = tuple(f"{side}_gripper" for side in SIDES)
JOINT_NAMES = (*ARM_JOINTS["left"], *ARM_JOINTS["right"])
VIEWS = ("cam_high", "cam_left_wrist", "cam_right_wrist")
LIMIT_RAD = 2.6

SPECS: dict[str, Spec] = {
    "rate_hz": Spec(100.0, "joint_states and integration rate (Hz)", float_range=(1.0, 1000.0)),
    "fps": Spec(15.0, "camera frame rate (Hz)", float_range=(0.1, 60.0)),
    "image_width": Spec(320, "camera image width (px)", int_range=(8, 1920)),
    "image_height": Spec(240, "camera image height (px)", int_range=(8, 1080)),
    "max_velocity": Spec(3.0, "joint speed towards a target (rad/s)", float_range=(0.01, 20.0)),
}


class BimanualArms:
    """Two arms' and two grippers' state, stepped towards their targets (thread-safe)."""

    def __init__(self, max_velocity: float) -> None:
        self._lock = threading.Lock()
        self._max_velocity = max_velocity
        self.positions = np.zeros(len(JOINT_NAMES) + len(GRIPPERS))
        self._targets = self.positions.copy()

    def command(self, first: int, values: list[float]) -> bool:
        """Targets for the joints from `first`; False (ignored) when not finite or not within
        the joints' limits."""
        span = np.asarray(values, dtype=float)
        if not np.all(np.isfinite(span)) or np.any(np.abs(span) > LIMIT_RAD):
            return False
        with self._lock:
            self._targets[first: first + len(span)] = span
        return True

    def step(self, dt_s: float) -> np.ndarray:
        with self._lock:
            gap = self._targets - self.positions
            reach = self._max_velocity * dt_s
            self.positions = self.positions + np.clip(gap, -reach, reach)
            return self.positions.copy()


class SimBimanual(Node):
    def __init__(self, namespace: str = "", context: Context | None = None) -> None:
        super().__init__("sim_bimanual", namespace=namespace, context=context)
        values = declare_read_only(self, SPECS)
        self.arms = BimanualArms(values["max_velocity"])
        self._size = (values["image_height"], values["image_width"])
        self._joints = self.create_publisher(JointState, "joint_states", 10)
        self._cameras = {
            view: self.create_publisher(Image, f"cameras/{view}/image_raw", qos_profile_sensor_data)
            for view in VIEWS
        }
        firsts = {
            "left_arm_controller/commands": (0, 6),
            "right_arm_controller/commands": (6, 6),
            "left_gripper_controller/commands": (12, 1),
            "right_gripper_controller/commands": (13, 1),
        }
        for topic, (first, width) in firsts.items():
            self.create_subscription(
                Float64MultiArray, topic,
                lambda msg, first=first, width=width, topic=topic: self._command(
                    topic, first, width, list(msg.data)
                ),
                10,
            )
        self._dt_s = 1.0 / values["rate_hz"]
        self.create_timer(self._dt_s, self._tick)
        self.create_timer(1.0 / values["fps"], self._frames)

    def _command(self, topic: str, first: int, width: int, values: list[float]) -> None:
        if len(values) != width or not self.arms.command(first, values):
            self.get_logger().warning(
                f"{topic}: ignored {values}; expected {width} finite values within "
                f"±{LIMIT_RAD} rad"
            )

    def _tick(self) -> None:
        positions = self.arms.step(self._dt_s)
        msg = JointState(name=[*JOINT_NAMES, *GRIPPERS], position=positions.tolist())
        msg.header.stamp = self.get_clock().now().to_msg()
        self._joints.publish(msg)

    def _frames(self) -> None:
        positions = self.arms.step(0.0)
        stamp = self.get_clock().now().to_msg()
        for view, publisher in self._cameras.items():
            if publisher.get_subscription_count() == 0:
                continue
            msg = Image(height=self._size[0], width=self._size[1], encoding="rgb8")
            msg.step = self._size[1] * 3
            msg.header.stamp = stamp
            msg.header.frame_id = f"{view}_optical_frame"
            msg.data = draw(view, positions, self._size).tobytes()
            publisher.publish(msg)


def draw(view: str, positions: np.ndarray, size: tuple[int, int]) -> np.ndarray:
    """The joints as bars (height: angle), each view tinted its own colour."""
    height, width = size
    tint = {"cam_high": (60, 60, 90), "cam_left_wrist": (90, 60, 60)}.get(view, (60, 90, 60))
    image = np.empty((height, width, 3), dtype=np.uint8)
    image[:] = tint
    n = len(positions)
    for i, value in enumerate(positions):
        x0, x1 = i * width // n, (i + 1) * width // n - 1
        level = 1.0 - (float(value) + LIMIT_RAD) / (2 * LIMIT_RAD)
        top = int(np.clip(level, 0.0, 1.0) * (height - 1))
        image[top:, x0:x1] = (230, 200, 80) if i >= len(JOINT_NAMES) else (200, 200, 200)
    return image


def main(args: list[str] | None = None) -> None:
    """Runs until SIGINT or SIGTERM; any number of them ends it once, cleanly, with status 0."""
    spin_until_signal(SimBimanual, args)


if __name__ == "__main__":
    main()
