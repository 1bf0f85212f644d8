"""Preflight for an end-effector model (issue 21): the end-effector pose the node will measure
(tf2 where `tf2_ros` imports, else `ee_pose_topic`) and the Servo / Cartesian controller that
takes its commands. preflight.py asks these for an ee_delta or ee_absolute model instead of its
joint-space checks of the arm command and of tf."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from geometry_msgs.msg import PoseStamped
from rclpy.node import Node

from sequence_ai_ros.core.command_kinds import EE_DELTA
from sequence_ai_ros.core.freshness import StaleObservation
from sequence_ai_ros.core.node_config import NodeConfig
from sequence_ai_ros.core.readings import MeasuredPose, measured
from sequence_ai_ros.geometry.command_frame import command_frame
from sequence_ai_ros.inputs.pose_source import TfPoses, tf_buffer

TWIST_STAMPED = "geometry_msgs/msg/TwistStamped"
POSE_STAMPED = "geometry_msgs/msg/PoseStamped"


@dataclass(frozen=True)
class PoseProbe:
    """How preflight reads the pose: from a tf2 buffer filled while it listens, else from the
    resolved `topic` it listens to."""

    tf: TfPoses | None
    topic: str


def pose_probe(node: Node, config: NodeConfig) -> PoseProbe:
    """A tf2 listener on `node` (spun while preflight listens) where tf2_ros imports, else
    `ee_pose_topic`."""
    buffer = tf_buffer(node)
    if buffer is None:
        return PoseProbe(None, node.resolve_topic_name(config.ee_pose_topic))

    def now_s() -> float:
        return node.get_clock().now().nanoseconds * 1e-9

    return PoseProbe(TfPoses(buffer, config.base_frame, config.ee_frame, now_s), "")


def command_check(config: NodeConfig, space: str) -> tuple[str, str, str]:
    """(check name, topic, message type) of the ee model's command subscriber."""
    if space == EE_DELTA:
        return "twist command", config.twist_topic, TWIST_STAMPED
    return "pose target command", config.pose_target_topic, POSE_STAMPED


def pose_problem(
    probe: PoseProbe, config: NodeConfig, received: list[PoseStamped],
    stamp_age_s: Callable[[PoseStamped], float],
) -> tuple[str | None, str]:
    """(why the pose is unusable, or None; what was seen) once preflight has listened."""
    try:
        if probe.tf is not None:
            what = f"tf {config.base_frame} -> {config.ee_frame}"
            pose = probe.tf.pose(config.max_pose_age_s)
        else:
            what = f"{probe.topic} ({len(received)} messages)"
            pose = _topic_pose(probe.topic, config, received, stamp_age_s)
    except StaleObservation as exc:
        return str(exc), what
    x, y, z = pose.vector[:3]
    where = (
        f"{what}: at [{x:.3f}, {y:.3f}, {z:.3f}] m in {config.base_frame}, "
        f"{pose.age_s:.3f} s old"
    )
    # The workspace is in command_frame.
    try:
        to = command_frame(config, probe.tf.buffer if probe.tf is not None else None)
        here = to.transform().point((x, y, z))
    except (ValueError, StaleObservation) as exc:
        return f"{where}: no transform into command_frame: {exc}", where
    inside = all(
        lo <= v <= hi for v, lo, hi in zip(here, config.workspace_min, config.workspace_max)
    )
    if not inside:
        shown = ", ".join(f"{v:.3f}" for v in here)
        return (
            f"{where}: at [{shown}] m in command_frame, outside workspace_min "
            f"{list(config.workspace_min)} / workspace_max {list(config.workspace_max)}"
        ), where
    return None, where


def _topic_pose(
    topic: str, config: NodeConfig, received: list[PoseStamped],
    stamp_age_s: Callable[[PoseStamped], float],
) -> MeasuredPose:
    if not received:
        raise StaleObservation(f"no PoseStamped on {topic}")
    msg = received[-1]
    if msg.header.frame_id.lstrip("/") != config.base_frame.lstrip("/"):
        raise StaleObservation(
            f"{topic} is in frame {msg.header.frame_id!r}; expected base_frame "
            f"{config.base_frame!r}"
        )
    age = stamp_age_s(msg)
    if not 0.0 <= age <= config.max_pose_age_s:
        raise StaleObservation(
            f"{topic} stamped {age:.3f} s ago; max_pose_age_s is {config.max_pose_age_s:.3f}"
        )
    p, q = msg.pose.position, msg.pose.orientation
    return measured((p.x, p.y, p.z), (q.x, q.y, q.z, q.w), age, topic)
