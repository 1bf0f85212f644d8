"""Configure: the parts a configured node runs on — the Policy, the camera and joint feeds, the
observation cache, the arm gate and the goal runner — built from one `NodeConfig` snapshot,
and released together (`Configured.release`)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from rclpy.lifecycle import LifecycleNode
from sensor_msgs.msg import CompressedImage, Image

import sequence_ai
from sequence_ai_ros.commands import group_output as command_groups
from sequence_ai_ros.commands.dry_run import GateSwitch, gate_switch
from sequence_ai_ros.commands.group_output import command_output
from sequence_ai_ros.core.api_key_source import ApiKeyError, read_api_key
from sequence_ai_ros.core.command_kinds import EE_SPACES
from sequence_ai_ros.core.health import HealthRecord
from sequence_ai_ros.core.node_config import NodeConfig
from sequence_ai_ros.core.readings import PoseSource
from sequence_ai_ros.episodes.recorder import EpisodeRecorder
from sequence_ai_ros.geometry.command_frame import command_frame
from sequence_ai_ros.goals.driving import GoalParts, goal_runner
from sequence_ai_ros.goals.runner import GoalRunner
from sequence_ai_ros.inputs.camera_feed import CameraFeed
from sequence_ai_ros.inputs.joint_feed import JointFeed
from sequence_ai_ros.inputs.observation_cache import ObservationCache
from sequence_ai_ros.inputs.pose_source import TfPoses, open_pose_source
from sequence_ai_ros.params import config_checks
from sequence_ai_ros.params.model_fit import fit, space_of
from sequence_ai_ros.plumbing.lifecycle_guard import ConfigureProbe
from sequence_ai_ros.safety.cartesian_space import CartesianSpace
from sequence_ai_ros.safety.gate import ArmGate

__all__ = ["ConfigureError", "Configured", "configure"]

WarmingCallback = Callable[[float, float | None], None]


class ConfigureError(RuntimeError):
    """A parameter, the key, the service or the model does not allow configuring."""


@dataclass(frozen=True)
class Configured:
    """Everything configure built; never changed, released once."""

    policy: sequence_ai.Policy
    cameras: CameraFeed
    cache: ObservationCache
    joints: JointFeed
    # The only publisher of arm commands (it owns the CommandPublisher), beside the dry run's.
    gate: GateSwitch
    runner: GoalRunner
    # The catalogue's control period (s).
    period_s: float
    # Closes each goal's episode file on its writer thread (`close` waits for them).
    episodes: EpisodeRecorder
    # An ee model's measured end-effector pose (its own thread for a topic); None for joints.
    poses: PoseSource | None


def configure(
    node: LifecycleNode,
    config: NodeConfig,
    *,
    health: HealthRecord,
    on_warming: WarmingCallback,
    probe: ConfigureProbe,
    wake: Callable[[], None],
    live_config: Callable[[], NodeConfig],
) -> Configured:
    """Check `config` against the service's catalogue and build the parts; a failure raises
    `ConfigureError` (or what a part raised) with nothing left behind. The catalogue read is
    bounded by configure_timeout_s, and `probe` lets a shutdown end it at once. `live_config`
    is the node's parameters at any later time (each goal's snapshot)."""
    problems = config_checks.check_config(config)
    if problems:
        raise ConfigureError("; ".join(problems))
    try:
        api_key = read_api_key(config.api_key_file)
    except ApiKeyError as exc:
        raise ConfigureError(str(exc)) from exc
    try:
        catalogue = _connect(
            config, api_key, None, on_warming, timeout_s=config.configure_timeout_s
        )
        with probe.probing(catalogue):
            model = catalogue.spec()
    except (sequence_ai.SequencesError, ValueError) as exc:
        raise ConfigureError(f"{type(exc).__name__}: {exc}") from exc
    if model is None:
        raise ConfigureError(
            f"model {config.model!r} is not in the service's catalogue of act models"
        )
    controller, problems = fit(config, model)
    groups = command_groups.read(node, config.command_groups)
    problems += command_groups.group_problems(groups, config)
    if problems or controller is None:
        raise ConfigureError("; ".join(problems))
    if not model.control_hz or model.control_hz <= 0:
        raise ConfigureError(f"model {model.short_id} has no control_hz in its catalogue row")
    if problem := config_checks.rate_problem(config, model.control_hz):
        raise ConfigureError(problem)
    # Played at the catalogue's rate, the rate every step is checked at, whatever a chunk
    # says about itself.
    policy = _connect(config, api_key, model.control_hz, on_warming)
    health.update(model=model.short_id)
    built: list[Callable[[], object]] = [policy.close]
    try:
        # Frames are taken by whoever needs one, from a node nothing spins (camera_feed.py);
        # topics are resolved here, with this node's namespace and remappings.
        cameras = CameraFeed(
            node.context,
            node.get_name(),
            node.get_namespace(),
            {
                view: (
                    node.resolve_topic_name(topic),
                    CompressedImage if transport == "compressed" else Image,
                )
                for view, topic, transport in zip(
                    config.camera_views, config.camera_topics, config.camera_transports
                )
            },
        )
        built.append(cameras.destroy)
        space = space_of(model)
        # An ee model's end-effector pose: tf2 where it imports, else ee_pose_topic.
        poses = open_pose_source(
            node.context, node.get_name(), node.get_namespace(), base_frame=config.base_frame,
            ee_frame=config.ee_frame, topic=node.resolve_topic_name(config.ee_pose_topic),
            log=node.get_logger(),
        ) if space in EE_SPACES else None
        if poses is not None:
            built.append(poses.destroy)
        health.update(pose_source=poses.name if poses is not None else "")
        # An ee model's state has no joints (its pose instead): none are required.
        joint_names = () if poses is not None else config.joint_names
        cache = ObservationCache(
            config.camera_views,
            joint_names,
            config.grippers,
            feed=cameras,
            warn=node.get_logger().warning,
            pose=poses,
        )
        # Joint states flow at their full rate, straight into the cache, on their own thread.
        joints = JointFeed(
            node.context,
            node.get_name(),
            node.get_namespace(),
            node.resolve_topic_name(config.joint_states_topic),
            cache.store_joint_state,
            node.get_logger(),
        )
        built.append(joints.destroy)
        # The catalogue's period, fixed here: the step check and trajectory timing use it.
        period_s = 1.0 / model.control_hz
        # One MCAP file per goal while `record` is goals (docs/recording.md).
        episodes = EpisodeRecorder(
            node_name=node.get_fully_qualified_name(),
            model=model,
            state_names=[*joint_names, *config.grippers],
            period_s=period_s,
            health=health,
            live_config=live_config,
            error=node.get_logger().error,
            frames=cache.newest_images,
            info=node.get_logger().info,
        )
        # An ee model's commands go through the same gate, with the Cartesian rules.
        cartesian = None
        if poses is not None:
            frame = command_frame(config, poses.buffer if isinstance(poses, TfPoses) else None)
            health.update(command_frame_source=frame.source)
            cartesian = CartesianSpace(space, poses, period_s, frame)
        arm_gate = ArmGate(
            command_output(
                node, config, groups, period_s, episodes.command_published,
                space if cartesian is not None else "",
            ),
            cache,
            joints=len(config.joint_names),
            period_s=period_s,
            log=node.get_logger(),
            mode=config.command_mode,
            space=cartesian,
        )
        built.append(arm_gate.destroy)
        # Beside it, the dry-run gate on ~/planned; a goal runs through one of them.
        gate = gate_switch(
            node, arm_gate, cache, config=config, period_s=period_s, space=cartesian
        )
        # The switch destroys both gates.
        built[-1] = gate.destroy
        runner = goal_runner(
            GoalParts(policy, model, controller, cache, gate, health, episodes),
            live_config=live_config,
            log=node.get_logger(),
            wake=wake,
        )
    except BaseException:
        for release in reversed(built):
            release()
        raise
    return Configured(policy, cameras, cache, joints, gate, runner, period_s, episodes, poses)


def _connect(
    config: NodeConfig, api_key: str | None, control_hz: float | None,
    on_warming: WarmingCallback, timeout_s: float = sequence_ai.Connection.timeout_s,
) -> sequence_ai.Policy:
    return sequence_ai.connect(
        config.model,
        connection=sequence_ai.Connection(
            api_key=api_key, base_url=config.base_url or None, timeout_s=timeout_s
        ),
        validate=config.validate_mode,
        control_hz=control_hz,
        startup_timeout_s=config.startup_timeout_s,
        on_warming=on_warming,
    )
