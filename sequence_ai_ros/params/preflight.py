"""Preflight: check a robot's setup for the node without moving anything.

    ros2 run sequence_ai_ros preflight --ros-args --params-file config/droid.yaml
    python -m sequence_ai_ros.params.preflight --ros-args --params-file config/droid.yaml

Reads the node's parameters exactly as the node would (same name, same params file) and checks
the key and the service, the model against the parameters, each camera topic, the joint
states, the command topics' subscribers (the controllers), tf frames, and the limits. One line
per check, ✓ or ✗ with what to do; exit status 1 if any check failed. docs/node.md
("Preflight") describes each.
"""

from __future__ import annotations

import math
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TextIO

import rclpy
from geometry_msgs.msg import PoseStamped
from rclpy.context import Context
from rclpy.executors import SingleThreadedExecutor
from rclpy.node import Node
from rclpy.qos import qos_profile_sensor_data
from sensor_msgs.msg import CompressedImage, Image, JointState

import sequence_ai
from sequence_ai_ros.commands import group_output as command_groups
from sequence_ai_ros.core.api_key_source import ApiKeyError, read_api_key
from sequence_ai_ros.core.command_kinds import EE_SPACES, FLOAT64_MULTI_ARRAY
from sequence_ai_ros.core.node_config import NodeConfig
from sequence_ai_ros.inputs.image_conversion import ImageConversionError, to_array
from sequence_ai_ros.params import config_checks, preflight_cartesian, spec_table
from sequence_ai_ros.params.model_fit import controller_for, fit_problems, space_of

NODE_NAME = "sequence_ai"
# How long each input topic is listened to.
LISTEN_S = 2.0
# Longest wait for discovery to find a publisher of every input topic before listening: a
# loaded machine can take seconds, and a listen that starts unmatched reports no messages.
DISCOVERY_S = 5.0
# Fewer messages than this in LISTEN_S is not a stream (a rate cannot be measured).
_MIN_MESSAGES = 3


@dataclass(frozen=True)
class Check:
    """One line of the report."""

    name: str
    ok: bool
    detail: str
    fix: str = ""

    def line(self) -> str:
        mark = "✓" if self.ok else "✗"
        fix = f" — {self.fix}" if self.fix and not self.ok else ""
        return f"{mark} {self.name}: {self.detail}{fix}"


Message = Image | CompressedImage | JointState | PoseStamped


@dataclass
class _Stream:
    """Messages of one topic received while listening: (receive time, message)."""

    received: list[tuple[float, Message]]

    def rate_hz(self) -> float:
        if len(self.received) < 2:
            return 0.0
        span = self.received[-1][0] - self.received[0][0]
        return (len(self.received) - 1) / span if span > 0 else math.inf


def _stamp_age_s(node: Node, msg: Message) -> float:
    stamp = msg.header.stamp
    now = node.get_clock().now().nanoseconds * 1e-9
    return now - (stamp.sec + stamp.nanosec * 1e-9)


def _listen(
    node: Node, executor: SingleThreadedExecutor, topics: dict[str, type[Message]]
) -> dict[str, _Stream]:
    """Subscribe to every topic at once and listen LISTEN_S."""
    streams = {topic: _Stream([]) for topic in topics}
    subscriptions = [
        node.create_subscription(
            kind, topic,
            lambda msg, s=streams[topic]: s.received.append((time.monotonic(), msg)),
            qos_profile_sensor_data,
        )
        for topic, kind in topics.items()
    ]
    # A topic nobody publishes is still listened to: its ✗ says so.
    deadline = time.monotonic() + DISCOVERY_S
    while time.monotonic() < deadline and any(node.count_publishers(t) == 0 for t in topics):
        executor.spin_once(timeout_sec=0.05)
    deadline = time.monotonic() + LISTEN_S
    while time.monotonic() < deadline:
        executor.spin_once(timeout_sec=0.05)
    for subscription in subscriptions:
        node.destroy_subscription(subscription)
    return streams


def check_parameters(config: NodeConfig) -> list[Check]:
    problems = config_checks.check_config(config)
    limit_words = ("limit", "max_step")
    limits = [p for p in problems if any(w in p for w in limit_words)]
    others = [p for p in problems if p not in limits]
    n = sum(1 for limit in config.joint_limits if limit.max_velocity is not None)
    return [
        Check("parameters", not others, "; ".join(others) or "every parameter is valid",
              "fix the parameters named"),
        Check("limits", not limits,
              "; ".join(limits) or f"position limits sane for {len(config.joint_names)} joints, "
              f"speed limits on {n}", "fix the limits named (min < max, positive speeds)"),
    ]


def check_service(config: NodeConfig) -> tuple[list[Check], sequence_ai.Model | None]:
    """The key, the service and the model's fit; the model when the service answered."""
    try:
        key = read_api_key(config.api_key_file)
    except ApiKeyError as exc:
        return [Check("api key", False, str(exc))], None
    source = f"api_key_file {config.api_key_file}" if key else "SEQUENCES_API_KEY"
    checks = [Check("api key", True, f"from {source}")]
    try:
        with sequence_ai.connect(
            config.model, api_key=key, base_url=config.base_url or None,
            validate=config.validate_mode, startup_timeout_s=config.startup_timeout_s,
        ) as probe:
            model = probe.spec()
    except (sequence_ai.SequencesError, ValueError) as exc:
        checks.append(Check("service", False, f"{type(exc).__name__}: {exc}",
                            "check base_url (or SEQUENCES_BASE_URL), the network and the key"))
        return checks, None
    if model is None:
        checks.append(Check("model", False, f"{config.model!r} is not in the catalogue",
                            "set model to a catalogue id (sequence-ai models)"))
        return checks, None
    checks.append(Check("service", True, f"reachable; {model.short_id} in its catalogue"))
    problems = fit_problems(config, model)
    controller, reasons = controller_for(config, model)
    problems += [] if controller is not None else reasons
    checks.append(Check("model fit", not problems,
                        "; ".join(problems) or f"{model.short_id} fits cameras, joints and the "
                        f"{config.command_interface} interface ({model.control_hz} Hz)",
                        "make camera_views, joint_names and the command interface match"))
    return checks, model


def check_cameras(node: Node, config: NodeConfig, streams: dict[str, _Stream]) -> list[Check]:
    checks = []
    for view, topic in zip(config.camera_views, config.camera_topics):
        resolved = node.resolve_topic_name(topic)
        received = streams[resolved].received
        name = f"camera {view}"
        if len(received) < _MIN_MESSAGES:
            checks.append(Check(name, False, f"{len(received)} messages on {resolved} in "
                                f"{LISTEN_S:g} s", "start the camera driver or fix camera_topics"))
            continue
        msg = received[-1][1]
        age = _stamp_age_s(node, msg)
        try:
            if isinstance(msg, JointState):
                raise ImageConversionError("a JointState on a camera topic")
            height, width = to_array(msg, config.max_frame_pixels).shape[:2]
        except ImageConversionError as exc:
            checks.append(Check(name, False, f"{resolved}: {exc}", "publish rgb8/bgr8 or JPEG"))
            continue
        encoding = getattr(msg, "encoding", getattr(msg, "format", ""))
        detail = (f"{resolved} {streams[resolved].rate_hz():.1f} Hz, {encoding} {width}x{height}, "
                  f"stamped {age:.3f} s ago")
        fresh = 0.0 <= age <= config.max_image_age_s
        checks.append(Check(name, fresh, detail + ("" if fresh else
                            f"; max_image_age_s is {config.max_image_age_s:g}"),
                            "stamp frames when captured, on a synchronised clock"))
    return checks


def check_joints(
    node: Node, config: NodeConfig, streams: dict[str, _Stream], space: str = ""
) -> Check:
    # An ee model's state has no joints: only its grippers, if any.
    wanted = [*config.grippers] if space in EE_SPACES else [*config.joint_names, *config.grippers]
    if not wanted:
        return Check("joint_states", True, f"not used: model action space {space} has no joint "
                     "or gripper state")
    topic = node.resolve_topic_name(config.joint_states_topic)
    received = streams[topic].received
    if len(received) < _MIN_MESSAGES:
        return Check("joint_states", False, f"{len(received)} messages on {topic} in "
                     f"{LISTEN_S:g} s", "start the robot driver / joint_state_broadcaster")
    seen: dict[str, float] = {}
    for _, msg in received:
        if isinstance(msg, JointState):
            seen.update(zip(msg.name, msg.position))
    missing = [j for j in wanted if j not in seen]
    bad = [j for j in wanted if j in seen and not math.isfinite(seen[j])]
    age = _stamp_age_s(node, received[-1][1])
    detail = f"{topic} {streams[topic].rate_hz():.1f} Hz, stamped {age:.3f} s ago"
    if missing or bad:
        return Check("joint_states", False, detail + f"; missing {missing}, not finite {bad}",
                     "fix joint_names / gripper_joint(s) to the names the robot publishes")
    fresh = 0.0 <= age <= config.max_state_age_s
    return Check("joint_states", fresh, detail + f", all {len(wanted)} joints finite" + (
        "" if fresh else f"; max_state_age_s is {config.max_state_age_s:g}"),
        "stamp joint states when measured, on a synchronised clock")


def check_commands(node: Node, config: NodeConfig, space: str = "") -> list[Check]:
    """Each command topic has a subscriber of the right type: its controller is up."""
    wanted = [("arm command", config.command_topic, config.command_type)]
    if space in EE_SPACES:
        wanted = [preflight_cartesian.command_check(config, space)]
    if config.gripper_command_topic:
        wanted.append(("gripper command", config.gripper_command_topic, FLOAT64_MULTI_ARRAY))
    if config.command_groups and space not in EE_SPACES:
        wanted = [(f"{group.name} command", group.topic, group.type)
                  for group in command_groups.read(node, config.command_groups)]
    checks = []
    for name, topic, kind in wanted:
        resolved = node.resolve_topic_name(topic)
        infos = node.get_subscriptions_info_by_topic(resolved)
        types = sorted({info.topic_type for info in infos})
        ok = kind in types
        detail = (f"{resolved}: {len(infos)} subscriber(s) of {', '.join(types) or 'no type'}")
        checks.append(Check(name, ok, detail + ("" if ok else f"; expected {kind}"),
                            "activate the controller, or fix the topic and command_type"))
    return checks


def check_tf() -> Check:
    """A joint-space model uses no tf frame: nothing to look up (an ee model: check_pose)."""
    return Check("tf", True, "the configuration uses no tf frames")


def check_pose(
    node: Node, config: NodeConfig, probe: preflight_cartesian.PoseProbe,
    streams: dict[str, _Stream],
) -> Check:
    """An ee model's measured end-effector pose: there, fresh, in base_frame, in the box."""
    received = [msg for _, msg in streams[probe.topic].received] if probe.topic else []
    problem, seen = preflight_cartesian.pose_problem(
        probe, config, received, lambda msg: _stamp_age_s(node, msg)
    )
    return Check("end-effector pose", problem is None, problem or seen,
                 "publish ee_pose_topic (or tf base_frame -> ee_frame), stamped, in base_frame")


def run_checks(node: Node, executor: SingleThreadedExecutor) -> list[Check]:
    """Every check, in report order (inputs are listened to once, together)."""
    config = spec_table.read_config(node)
    checks = check_parameters(config)
    service, model = check_service(config)
    checks += service
    space = space_of(model) if model is not None else ""
    topics: dict[str, type[Message]] = {
        node.resolve_topic_name(topic): CompressedImage if transport == "compressed" else Image
        for topic, transport in zip(config.camera_topics, config.camera_transports)
    }
    topics[node.resolve_topic_name(config.joint_states_topic)] = JointState
    probe = preflight_cartesian.pose_probe(node, config) if space in EE_SPACES else None
    if probe is not None and probe.topic:
        topics[probe.topic] = PoseStamped
    streams = _listen(node, executor, topics)
    checks += check_cameras(node, config, streams)
    checks.append(check_joints(node, config, streams, space))
    checks += check_commands(node, config, space)
    checks.append(check_tf() if probe is None else check_pose(node, config, probe, streams))
    return checks


def main(args: Sequence[str] | None = None, out: TextIO = sys.stdout) -> int:
    """The `preflight` console script: exit status 0 when every check passed, 1 if one
    failed."""
    context = Context()
    rclpy.init(args=list(args) if args is not None else sys.argv, context=context)
    node = Node(NODE_NAME, context=context)
    executor = SingleThreadedExecutor(context=context)
    executor.add_node(node)
    try:
        spec_table.declare(node)
        checks = run_checks(node, executor)
    finally:
        executor.shutdown()
        node.destroy_node()
        rclpy.shutdown(context=context)
    for check in checks:
        print(check.line(), file=out)
    failed = [c.name for c in checks if not c.ok]
    print(f"preflight: {len(checks) - len(failed)} of {len(checks)} checks passed"
          + (f"; failed: {', '.join(failed)}" if failed else ""), file=out)
    return 1 if failed else 0



if __name__ == "__main__":
    sys.exit(main())
