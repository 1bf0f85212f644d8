"""Configure: the parts a configured node runs on — the Policy, the camera and joint feeds, the
observation cache, the arm gate and the goal runner — built from one `NodeConfig` snapshot,
and released together (`Configured.release`)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from rclpy.lifecycle import LifecycleNode
from sensor_msgs.msg import CompressedImage, Image

import sequence_ai
from sequence_ai_ros import command_groups, parameters
from sequence_ai_ros.api_key import ApiKeyError, read_api_key
from sequence_ai_ros.arm import ArmGate
from sequence_ai_ros.cameras import Cameras
from sequence_ai_ros.cartesian_space import EE_SPACES, CartesianSpace
from sequence_ai_ros.command_frame import command_frame
from sequence_ai_ros.command_groups import command_output
from sequence_ai_ros.diagnostics import HealthRecord
from sequence_ai_ros.dry_run import GateSwitch, gate_switch
from sequence_ai_ros.episodes.recorder import EpisodeRecorder
from sequence_ai_ros.goal_drive import GoalParts
from sequence_ai_ros.goals import GoalRunner
from sequence_ai_ros.joint_feed import JointFeed
from sequence_ai_ros.lifecycle_guard import ConfigureProbe
from sequence_ai_ros.model_fit import fit, space_of
from sequence_ai_ros.observations import ObservationCache
from sequence_ai_ros.parameters import NodeConfig
from sequence_ai_ros.pose_source import PoseSource, TfPoses, open_pose_source

__all__ = ["ConfigureError", "Configured", "configure"]

WarmingCallback = Callable[[float, float | None], None]


class ConfigureError(RuntimeError):
    """A parameter, the key, the service or the model does not allow configuring."""


@dataclass(frozen=True)
class Configured:
    """Everything configure built; never changed, released once."""

    policy: sequence_ai.Policy
    cameras: Cameras
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
    problems = parameters.check_config(config)
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
    if problem := parameters.rate_problem(config, model.control_hz):
        raise ConfigureError(problem)
    # Played at the catalogue's rate, the rate every step is checked at, whatever a chunk
    # says about itself.
    policy = _connect(config, api_key, model.control_hz, on_warming)
    health.update(model=model.short_id)
    built: list[Callable[[], object]] = [policy.close]
    try:
        # Frames are taken by whoever needs one, from a node nothing spins (cameras.py);
        # topics are resolved here, with this node's namespace and remappings.
        cameras = Cameras(
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
            frames=cameras,
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
            frames=cache.newest_frames,
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
        runner = GoalRunner(
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
