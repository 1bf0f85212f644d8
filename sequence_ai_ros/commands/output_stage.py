"""What every arm output stage shares: the arm and gripper publishers on one QoS, the gripper
command, the count of arm commands sent (their rate, for /diagnostics) and teardown. The joint
(joint_output.py) and Cartesian (cartesian_output.py) stages add how an arm command is built."""

from __future__ import annotations

import threading
import time
from collections import deque
from collections.abc import Callable, Sequence

from rclpy.lifecycle import LifecycleNode
from rclpy.qos import QoSDurabilityPolicy, QoSHistoryPolicy, QoSProfile, QoSReliabilityPolicy
from std_msgs.msg import Float64MultiArray

# Controllers subscribe reliable; depth 1 because only the newest command matters.
COMMAND_QOS = QoSProfile(
    history=QoSHistoryPolicy.KEEP_LAST,
    depth=1,
    reliability=QoSReliabilityPolicy.RELIABLE,
    durability=QoSDurabilityPolicy.VOLATILE,
)


class OutputStage:
    """An arm publisher of `arm_type` on `arm_topic` and, when `gripper_topic` is set, a gripper
    publisher; `on_publish` is told every message published ("arm" or "gripper": the episode
    recorder)."""

    def __init__(
        self,
        node: LifecycleNode,
        *,
        arm_type: type,
        arm_topic: str,
        gripper_topic: str,
        on_publish: Callable[[str, object], None] | None = None,
    ) -> None:
        self._node = node
        self._on_publish = on_publish
        self._arm = node.create_lifecycle_publisher(arm_type, arm_topic, COMMAND_QOS)
        self._gripper = (
            node.create_lifecycle_publisher(Float64MultiArray, gripper_topic, COMMAND_QOS)
            if gripper_topic
            else None
        )
        # Lock order 7: nothing of ours is taken under it.
        self._lock = threading.Lock()
        self._sent: deque[float] = deque(maxlen=256)

    def publish_gripper(self, values: Sequence[float]) -> None:
        """Every gripper value of a row, in the model's order, in one message."""
        if self._gripper is not None:
            msg = Float64MultiArray(data=[float(v) for v in values])
            self._gripper.publish(msg)
            self._published("gripper", msg)

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

    def _send_arm(self, msg: object) -> None:
        """Publish one arm message, count it and tell `on_publish`."""
        self._arm.publish(msg)
        with self._lock:
            self._sent.append(time.monotonic())
        self._published("arm", msg)

    def _published(self, group: str, msg: object) -> None:
        if self._on_publish is not None:
            self._on_publish(group, msg)
