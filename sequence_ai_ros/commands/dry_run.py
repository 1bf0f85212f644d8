"""Dry runs (`dry_run` parameter): a goal that runs exactly as a real one — observations,
requests, chunks, the gate's checks, feedback, result — while nothing reaches the arm. Its
observations report the planned pose as the arm's joints, so the model continues its own plan.

Its commands go to a separate sink: `~/planned` (the real command's message type),
`~/planned_gripper`, and a `sensor_msgs/JointState` ghost of the planned pose on
`~/planned_joint_states` for RViz or Foxglove. A second `ArmGate` checks them, against the plan
itself once it has a pose (the real arm does not move) and the first step against the measured
joints; `GateSwitch` picks the gate when a goal begins and keeps it to the goal's end, so a dry
goal can never turn into a real one.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace

from rclpy.lifecycle import LifecycleNode
from sensor_msgs.msg import JointState

from sequence_ai import SeamLimits
from sequence_ai_ros.commands.cartesian_output import DryRunCartesian
from sequence_ai_ros.commands.joint_output import CommandPublisher
from sequence_ai_ros.commands.output_stage import COMMAND_QOS
from sequence_ai_ros.core.chunk_trajectory import ChunkTrajectory
from sequence_ai_ros.core.command_kinds import CommandMode, Interface
from sequence_ai_ros.core.node_config import NodeConfig
from sequence_ai_ros.core.readings import JointSnapshot
from sequence_ai_ros.safety.cartesian_space import CartesianSpace
from sequence_ai_ros.safety.gate import ArmGate, Measurements, MotionRules

DRY_RUN_TOPIC = "~/planned"
DRY_RUN_GRIPPER_TOPIC = "~/planned_gripper"
GHOST_TOPIC = "~/planned_joint_states"


class DryRunOutput:
    """The dry run's command sink (a `CommandOutput`): the planned commands and their ghost.

    The gate publishes from the driving thread; the ghost timer (the executor's) samples a
    planned trajectory at the control rate. `_lock` guards the pose fields.
    """

    def __init__(
        self,
        node: LifecycleNode,
        *,
        joint_names: Sequence[str],
        interface: Interface,
        command_type: str,
        gripper: bool,
        period_s: float,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._node = node
        self._joint_names = list(joint_names)
        self._period_s = period_s
        self._clock = clock
        self._commands = CommandPublisher(
            node,
            joint_names=joint_names,
            interface=interface,
            command_topic=DRY_RUN_TOPIC,
            command_type=command_type,
            gripper_topic=DRY_RUN_GRIPPER_TOPIC if gripper else "",
            period_s=period_s,
        )
        self._ghost = node.create_lifecycle_publisher(JointState, GHOST_TOPIC, COMMAND_QOS)
        # Lock order: a leaf, taken under the dry gate's ArmGate._lock (2).
        self._lock = threading.Lock()
        # The planned pose: the last position target (or velocities integrated from `_base`,
        # the measured pose the plan started at), or the trajectory in force.
        self._pose: list[float] | None = None
        self._base: list[float] | None = None
        self._trajectory: ChunkTrajectory | None = None
        # Never cancelled or reset: those calls come from the driving thread, and on rclpy 7.1
        # a timer cancelled off the executor's thread can kill its executor (rclpy#1485).
        # `_sample_trajectory` returns at once without a trajectory in force.
        self._timer = node.create_timer(period_s, self._sample_trajectory)

    @property
    def interface(self) -> Interface:
        return self._commands.interface

    def restart(self) -> None:
        """A dry goal begins: its plan starts from the measured arm."""
        with self._lock:
            self._pose = self._base = self._trajectory = None

    def pose(self, measured: Sequence[float]) -> list[float]:
        """Where the plan has the arm now; `measured` until it has a pose."""
        with self._lock:
            if self._trajectory is not None:
                return self._trajectory.position_at(self._clock())
            if self._pose is None:
                self._base = list(measured)
                return list(measured)
            return list(self._pose)

    def publish_arm(self, values: Sequence[float]) -> None:
        self._commands.publish_arm(values)
        with self._lock:
            self._trajectory = None
            if self.interface is Interface.VELOCITY:
                start = self._pose if self._pose is not None else self._base
                if start is not None:
                    self._pose = [p + v * self._period_s for p, v in zip(start, values)]
            else:
                self._pose = [float(v) for v in values]
            ghost = self._pose
        if ghost is not None:
            self._publish_ghost(ghost)

    def publish_trajectory(self, trajectory: ChunkTrajectory) -> None:
        self._commands.publish_trajectory(trajectory)
        with self._lock:
            self._trajectory = trajectory
        self._sample_trajectory()

    def publish_gripper(self, values: Sequence[float]) -> None:
        self._commands.publish_gripper(values)

    def command_rate_hz(self) -> float:
        return self._commands.command_rate_hz()

    def destroy(self) -> None:
        self._node.destroy_timer(self._timer)
        self._node.destroy_lifecycle_publisher(self._ghost)
        self._commands.destroy()

    def _sample_trajectory(self) -> None:
        with self._lock:
            trajectory = self._trajectory
            now = self._clock()
        if trajectory is None:
            return
        position = trajectory.position_at(now)
        if now > trajectory.end_s:
            # Played out: the arm holds the trajectory's last point, sampled no more.
            with self._lock:
                if self._trajectory is trajectory:
                    self._trajectory, self._pose = None, list(position)
        self._publish_ghost(position)

    def _publish_ghost(self, positions: Sequence[float]) -> None:
        msg = JointState(name=self._joint_names, position=[float(p) for p in positions])
        msg.header.stamp = self._node.get_clock().now().to_msg()
        self._ghost.publish(msg)


class DryRunMeasurements:
    """The dry gate's measurements: the real inputs' freshness, the plan's pose."""

    def __init__(self, real: Measurements, output: DryRunOutput) -> None:
        self._real = real
        self._output = output

    def joints(self, max_age_s: float) -> JointSnapshot:
        # A stale joint state stops a dry goal as it would a real one.
        snapshot = self._real.joints(max_age_s)
        return replace(snapshot, positions=self._output.pose(snapshot.positions))

    def ages(self) -> Mapping[str, float | None]:
        return self._real.ages()


class GateSwitch:
    """The gate a goal drives: the arm's, or the dry run's — chosen by the goal's rules when
    it begins, kept until the next begins. Between goals only the arm's gate republishes.

    Called by the goal's driving thread, but `republish_hold` and the rates (executor).
    """

    def __init__(
        self, real: ArmGate, dry: ArmGate, planned: DryRunOutput | DryRunCartesian
    ) -> None:
        self._real = real
        self._dry = dry
        self._planned = planned
        self._active = real
        # A dry goal runs: the arm's idle hold is not republished meanwhile (nothing reaches
        # the arm during a dry goal).
        self._dry_goal = threading.Event()

    @property
    def interface(self) -> Interface:
        return self._real.interface

    @property
    def mode(self) -> CommandMode:
        return self._real.mode

    @property
    def dry_run(self) -> bool:
        """The running (or last) goal is a dry run."""
        return self._active is self._dry

    def observed(self, joints: JointSnapshot) -> JointSnapshot:
        """The joints an observation reports: during a dry goal the planned pose, so the model
        continues its own plan (the cameras still show the unmoved arm)."""
        if not self._dry_goal.is_set():
            return joints
        return replace(joints, positions=self._planned.pose(joints.positions))

    def begin_goal(self, rules: MotionRules) -> None:
        if rules.dry_run:
            self._planned.restart()
            self._dry_goal.set()
            self._active = self._dry
        else:
            self._active = self._real
        self._active.begin_goal(rules)

    def end_goal(self) -> None:
        self._active.end_goal()
        self._dry_goal.clear()

    def check(self, row: Sequence[float]) -> str | None:
        return self._active.check(row)

    def seam_limits(self, rules: MotionRules) -> SeamLimits | None:
        # A dry goal's steps are checked against the same limits.
        return self._real.seam_limits(rules)

    def publish(self, row: Sequence[float]) -> None:
        self._active.publish(row)

    def publish_chunk(self, rows: Sequence[Sequence[float]], first_due_s: float) -> str | None:
        return self._active.publish_chunk(rows, first_due_s)

    def pause(self) -> None:
        self._active.pause()

    def hold(self) -> str | None:
        return self._active.hold()

    def republish_hold(self, rules: MotionRules) -> None:
        # `rules` are the idle node's parameters now: while dry_run is true nothing at all
        # goes to the arm, the idle hold included (docs/safety.md).
        if not rules.dry_run and not self._dry_goal.is_set():
            self._real.republish_hold(rules)

    def command_rate_hz(self) -> float:
        """The arm's command rate (a dry run's commands are not the arm's)."""
        return self._real.command_rate_hz()

    def destroy(self) -> None:
        self._real.destroy()
        self._dry.destroy()


def gate_switch(
    node: LifecycleNode,
    real: ArmGate,
    measurements: Measurements,
    *,
    config: NodeConfig,
    period_s: float,
    space: CartesianSpace | None = None,
) -> GateSwitch:
    """The arm's gate beside a dry-run gate of the same rules on the planned sink."""
    if space is not None:
        # An ee model: the same Cartesian rules, the commands on ~/planned.
        cartesian = DryRunCartesian(
            node, space=space.space, topic=DRY_RUN_TOPIC,
            command_frame=config.command_frame or config.base_frame,
            gripper_topic=DRY_RUN_GRIPPER_TOPIC if config.gripper_command_topic else "",
        )
        dry_ee = ArmGate(
            cartesian, DryRunMeasurements(measurements, cartesian), joints=0,
            period_s=period_s, log=node.get_logger(), mode=real.mode, space=space,
        )
        return GateSwitch(real, dry_ee, cartesian)
    planned = DryRunOutput(
        node,
        joint_names=config.joint_names,
        interface=config.command_interface,
        command_type=config.command_type,
        gripper=bool(config.gripper_command_topic),
        period_s=period_s,
    )
    dry = ArmGate(
        planned,
        DryRunMeasurements(measurements, planned),
        joints=len(config.joint_names),
        period_s=period_s,
        log=node.get_logger(),
        mode=real.mode,
    )
    return GateSwitch(real, dry, planned)
