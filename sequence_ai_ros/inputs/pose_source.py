"""The measured end-effector pose (issue 21): for an ee model's observation
(`end_effector_pose`), for the Cartesian gate and for its holds.

From tf2 (`base_frame` -> `ee_frame`) where `tf2_ros` imports, else from a
`geometry_msgs/PoseStamped` topic (`ee_pose_topic`): like cv_bridge, the node runs on a machine
without tf2 and `/diagnostics` says which source runs (`pose_source`). Either way the pose's age
is a measurement like the joints' age: a pose older than `max_pose_age_s` is refused.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

from geometry_msgs.msg import PoseStamped, TransformStamped
from rclpy.context import Context
from rclpy.impl.rcutils_logger import RcutilsLogger
from rclpy.node import Node
from rclpy.qos import qos_profile_sensor_data
from rclpy.time import Time

from sequence_ai_ros.core.freshness import StaleObservation
from sequence_ai_ros.core.readings import (
    MeasuredPose,
    TransformLookup,
    measured,
    too_old,
)
from sequence_ai_ros.plumbing.side_executor import SideExecutor

TF2 = "tf2"
TOPIC = "topic"
POSE_NODE_SUFFIX = "_pose"
POSE_THREAD = "sequence_ai-pose"


class TopicPoses:
    """The newest `PoseStamped` of `ee_pose_topic`, kept by its callback (`store`); its age is
    counted from its arrival, like the joint states'. The message's frame must be base_frame."""

    def __init__(
        self, base_frame: str, topic: str = "", clock: Callable[[], float] = time.monotonic
    ) -> None:
        self._base_frame = base_frame
        self._topic = topic or "ee_pose"
        self._clock = clock
        # Lock order: a leaf (the gate's lock, 2, is held while it is taken).
        self._lock = threading.Lock()
        self._newest: tuple[PoseStamped, float] | None = None
        self._side: SideExecutor | None = None

    @property
    def name(self) -> str:
        return TOPIC

    def subscribe(self, context: Context, node_name: str, namespace: str,
                  log: RcutilsLogger) -> TopicPoses:
        """Receive `topic` (fully resolved) on a thread of its own, like the joint states."""
        self._side = SideExecutor(context, node_name + POSE_NODE_SUFFIX, namespace, POSE_THREAD,
                                  log)
        self._side.node.create_subscription(
            PoseStamped, self._topic, self.store, qos_profile_sensor_data
        )
        self._side.start()
        return self

    def vector(self, max_age_s: float) -> list[float]:
        return self.pose(max_age_s).vector

    def store(self, msg: PoseStamped) -> None:
        received = self._clock()
        with self._lock:
            self._newest = (msg, received)

    def age(self) -> float | None:
        with self._lock:
            newest = self._newest
        return None if newest is None else self._clock() - newest[1]

    def pose(self, max_age_s: float) -> MeasuredPose:
        with self._lock:
            newest = self._newest
        what = f"end-effector pose on {self._topic}"
        if newest is None:
            raise StaleObservation(f"{what}: no message received yet")
        msg, received = newest
        age = self._clock() - received
        if age > max_age_s:
            raise too_old(what, age, max_age_s)
        frame = msg.header.frame_id
        if frame and frame.lstrip("/") != self._base_frame.lstrip("/"):
            raise StaleObservation(
                f"{what} is in frame {frame!r}; expected base_frame {self._base_frame!r}"
            )
        p, q = msg.pose.position, msg.pose.orientation
        return measured((p.x, p.y, p.z), (q.x, q.y, q.z, q.w), age, what)

    def destroy(self) -> None:
        if self._side is not None and self._side.stop():
            self._side.node.destroy_node()


class TfPoses:
    """base_frame -> ee_frame from a tf2 buffer; its age is the ROS clock's `now` minus the
    transform's stamp (tf2 keeps no arrival time)."""

    def __init__(
        self, buffer: TransformLookup, base_frame: str, ee_frame: str,
        now_s: Callable[[], float], on_destroy: Callable[[], None] | None = None,
    ) -> None:
        self._buffer = buffer
        self._base_frame = base_frame
        self._ee_frame = ee_frame
        self._now_s = now_s
        self._on_destroy = on_destroy

    @property
    def name(self) -> str:
        return TF2

    @property
    def buffer(self) -> TransformLookup:
        return self._buffer

    def _lookup(self) -> tuple[TransformStamped, float]:
        what = f"tf {self._base_frame} -> {self._ee_frame}"
        try:
            # Time() is "the newest transform the buffer has".
            found = self._buffer.lookup_transform(self._base_frame, self._ee_frame, Time())
        except Exception as exc:  # noqa: BLE001 - every tf2 failure is a missing pose
            raise StaleObservation(f"{what}: {type(exc).__name__}: {exc}") from exc
        stamp = found.header.stamp
        return found, self._now_s() - (stamp.sec + stamp.nanosec * 1e-9)

    def vector(self, max_age_s: float) -> list[float]:
        return self.pose(max_age_s).vector

    def age(self) -> float | None:
        try:
            return self._lookup()[1]
        except StaleObservation:
            return None

    def pose(self, max_age_s: float) -> MeasuredPose:
        what = f"tf {self._base_frame} -> {self._ee_frame}"
        found, age = self._lookup()
        if age > max_age_s:
            raise too_old(what, age, max_age_s)
        t, q = found.transform.translation, found.transform.rotation
        return measured((t.x, t.y, t.z), (q.x, q.y, q.z, q.w), age, what)

    def destroy(self) -> None:
        if self._on_destroy is not None:
            self._on_destroy()


def tf_buffer(node: Node) -> TransformLookup | None:
    """A tf2 buffer filled by a listener on `node` (whoever spins `node` spins it); None
    without tf2_ros."""
    try:
        import tf2_ros
    except ImportError:
        return None
    buffer = tf2_ros.Buffer()
    # Kept alive by its subscriptions' callbacks on `node`; gone with the node.
    tf2_ros.TransformListener(buffer, node, spin_thread=False)
    return buffer


def tf2_poses(context: Context, node_name: str, namespace: str, base_frame: str,
              ee_frame: str, log: RcutilsLogger) -> TfPoses | None:
    """A tf2 pose source with its listener on a thread of its own; None without tf2_ros."""
    side = SideExecutor(context, node_name + POSE_NODE_SUFFIX, namespace, POSE_THREAD, log)
    # The listener's subscriptions sit on the side node, spun by its own executor: the
    # lifecycle node's callbacks never delay /tf.
    buffer = tf_buffer(side.node)
    if buffer is None:
        side.node.destroy_node()
        return None
    side.start()

    def destroy() -> None:
        if side.stop():
            side.node.destroy_node()

    def now_s() -> float:
        return side.node.get_clock().now().nanoseconds * 1e-9

    return TfPoses(buffer, base_frame, ee_frame, now_s, destroy)


def open_pose_source(
    context: Context, node_name: str, namespace: str, *, base_frame: str, ee_frame: str,
    topic: str, log: RcutilsLogger,
) -> TfPoses | TopicPoses:
    """tf2 where it imports, else the PoseStamped `topic` (fully resolved)."""
    found = tf2_poses(context, node_name, namespace, base_frame, ee_frame, log)
    if found is not None:
        return found
    return TopicPoses(base_frame, topic).subscribe(context, node_name, namespace, log)
