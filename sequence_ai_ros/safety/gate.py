"""The arm gate: the one path from the node to the arm's motors.

Every arm command — a policy step, the first step of a goal or after a wait, every point of a
chunk's trajectory, a hold, the hold republished while idle — is checked here against a fresh
measurement and the configured limits, then published or refused. The gate owns the node's
`CommandPublisher` (its output stage), so no path can publish around it. See docs/safety.md for
the rules.
"""

from __future__ import annotations

import math
import re
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Protocol

from sequence_ai import SeamLimits
from sequence_ai_ros.core.chunk_trajectory import ChunkTrajectory, build_trajectory
from sequence_ai_ros.core.command_kinds import CommandMode, Interface
from sequence_ai_ros.core.freshness import StaleObservation, check_camera_age
from sequence_ai_ros.core.joint_limits import (
    RateLimits,
    check_acceleration,
    check_move,
    check_velocity,
)
from sequence_ai_ros.core.node_config import NodeConfig
from sequence_ai_ros.core.readings import JointSnapshot
from sequence_ai_ros.safety import joint_rules
from sequence_ai_ros.safety.cartesian_space import CartesianRules, CartesianSpace

# A seam's fade stays this far inside the gate's limits: no step is left for rounding to
# decide, and after a wait max_step is measured from joints that may lag the last command.
SEAM_SHARE = 0.9


class Measurements(Protocol):
    """The arm's joints and the cameras' ages, as the node's input cache keeps them."""

    def joints(self, max_age_s: float) -> JointSnapshot:
        """Joint positions no older than `max_age_s`, or StaleObservation."""
        ...

    def ages(self) -> Mapping[str, float | None]:
        """Seconds since the newest message of each camera view (None: never received)."""
        ...


class CommandOutput(Protocol):
    """Where checked commands go (`CommandPublisher`)."""

    @property
    def interface(self) -> Interface: ...

    def publish_arm(self, values: Sequence[float]) -> None: ...

    def publish_trajectory(self, trajectory: ChunkTrajectory) -> None: ...

    def publish_gripper(self, values: Sequence[float]) -> None: ...

    def command_rate_hz(self) -> float: ...

    def destroy(self) -> None: ...


class Logger(Protocol):
    def warning(self, message: str) -> object: ...

    def error(self, message: str) -> object: ...


class CommandRefused(RuntimeError):
    """A step that passed `ArmGate.check` failed the same check when it was to be published."""


@dataclass(frozen=True)
class MotionRules:
    """What commands are checked against: one parameter snapshot (a goal's, or the idle
    node's for a republished hold)."""

    limits: joint_rules.SafetyLimits
    max_state_age_s: float
    max_image_age_s: float
    camera_views: tuple[str, ...]
    # rad/s per unit of a normalised velocity row.
    velocity_scale: float
    # The gripper values of a row are checked (and published) only with a gripper topic.
    gripper: bool
    # Per-joint velocity and acceleration limits (joint_limits.py); None: none configured.
    rates: RateLimits | None = None
    # The goal's commands go to the planned sink, never the arm (dry_run.py).
    dry_run: bool = False
    # The Cartesian limits (cartesian_space.py), applied by a gate in Cartesian space.
    cartesian: CartesianRules | None = None

    @classmethod
    def from_config(cls, config: NodeConfig) -> MotionRules:
        problems = [config.joint_limits_problem] if config.joint_limits_problem else []
        problems += [p for limit in config.joint_limits for p in limit.problems()]
        if problems:
            raise ValueError("; ".join(problems))
        lower, upper = list(config.joint_lower_limits), list(config.joint_upper_limits)
        # A joint's ros2_control position limits narrow joint_lower/upper_limits, never widen.
        for i, limit in enumerate(config.joint_limits[: len(lower)]):
            if limit.min_position is not None and limit.max_position is not None:
                lower[i] = max(lower[i], limit.min_position)
                upper[i] = min(upper[i], limit.max_position)
        rates = RateLimits.of(config.joint_limits) if config.joint_limits else None
        return cls(
            limits=joint_rules.SafetyLimits(
                tuple(config.joint_names),
                tuple(lower),
                tuple(upper),
                config.max_step,
                config.max_joint_velocity,
            ),
            max_state_age_s=config.max_state_age_s,
            max_image_age_s=config.max_image_age_s,
            camera_views=tuple(config.camera_views),
            velocity_scale=config.velocity_scale,
            gripper=bool(config.gripper_command_topic or config.command_groups),
            rates=rates if rates is not None and rates.active else None,
            dry_run=config.dry_run,
            cartesian=CartesianRules.from_config(config),
        )


@dataclass(frozen=True)
class _Sent:
    """A position command the arm was sent, and when (the gate's clock)."""

    positions: list[float]
    at_s: float


class _CameraWatch:
    """When the cameras' ages must be looked at next: only once the oldest camera's newest
    frame may have crossed max_image_age_s, so a step mostly just compares the clock."""

    def __init__(self, measurements: Measurements, clock: Callable[[], float]) -> None:
        self._measurements = measurements
        self._clock = clock
        self._due_s = -math.inf

    def reset(self) -> None:
        self._due_s = -math.inf

    def check(self, rules: MotionRules) -> None:
        """Raise StaleObservation once a camera's newest frame is older than max_image_age_s."""
        now = self._clock()
        if now < self._due_s:
            return
        ages = self._measurements.ages()
        due = math.inf
        for view in rules.camera_views:
            age = ages.get(view)
            check_camera_age(view, age, rules.max_image_age_s)
            assert age is not None
            due = min(due, now + rules.max_image_age_s - age)
        self._due_s = due


class ArmGate:
    """Checks each arm command against fresh measurements and the rules in force, then
    publishes or refuses it.

    Safe from any thread: every field below `_lock` is read and written under it, and the lock
    is held while publishing, so commands leave in the order they were checked. The goal's
    driving thread calls `begin_goal` … `check`/`publish`/`publish_chunk`/`pause` … `hold`,
    `end_goal`; an idle timer calls `republish_hold`.

    In chunk mode the arm gets one trajectory per chunk (`publish_chunk`) and stops on a
    trajectory that stays where it is; `publish` sends only the gripper, `check` keeps every
    step's freshness checks.
    """

    def __init__(
        self,
        output: CommandOutput,
        measurements: Measurements,
        *,
        joints: int,
        period_s: float,
        log: Logger,
        mode: CommandMode = CommandMode.STEP,
        clock: Callable[[], float] = time.monotonic,
        space: CartesianSpace | None = None,
    ) -> None:
        # Set here, never rebound. period_s is the catalogue's control period (configure);
        # joints the number of arm joints (joint_names is read-only), or an ee row's pose part.
        self._output = output
        self._mode = mode
        self._joints = space.width if space is not None else joints
        self._measurements = measurements
        self._period_s = period_s
        self._log = _GateLog(log)
        # The rules of a Cartesian arm (cartesian_space.py); None: the joint rules below.
        self._space = space
        self._clock = clock
        # Lock order 2: held while the cache's take lock (3), the camera lock (4), the
        # cache's lock (5) and the command publisher's (7) are taken.
        self._lock = threading.Lock()
        # The running goal's rules; None while no goal runs.
        self._rules: MotionRules | None = None
        # Position interface, step mode: the target the arm was last commanded to, and when.
        self._target: _Sent | None = None
        # Chunk mode: the last trajectory published (a chunk's, or a hold's): what the arm is
        # commanded to at any time from its stamp on.
        self._trajectory: ChunkTrajectory | None = None
        # The next step continues from _target; False at a goal's start and after a wait,
        # when the next step is checked against a fresh measurement instead.
        self._continuous = False
        # Position interface: the target the arm's controller held through the run's wait in
        # this goal (None: no wait since a step of this goal) — what the first step after it
        # moves the setpoint from.
        self._wait_target: _Sent | None = None
        # The joint velocities the last arm command implies (rad/s): what the next one's
        # acceleration is checked from; None when not known (a start, a wait, a hold).
        self._velocity: list[float] | None = None
        self._cameras = _CameraWatch(measurements, clock)
        # The last arm command was a hold: what an idle node republishes.
        self._held = False

    @property
    def interface(self) -> Interface:
        return self._output.interface

    @property
    def mode(self) -> CommandMode:
        return self._mode

    def seam_limits(self, rules: MotionRules) -> SeamLimits | None:
        """What a seam's fade keeps the arm's targets within: a share of the step this gate
        allows (max_step, each joint's max_velocity over a period) and the joint limits, so a
        seam is blended within the checks rather than refused by them. None unless the rows
        are joint position targets."""
        if self._space is not None or self.interface is not Interface.POSITION:
            return None
        limits = rules.limits
        allowed = [limits.max_step] * len(limits.joint_names)
        if rules.rates is not None:
            allowed = [
                min(step, velocity * self._period_s)
                for step, velocity in zip(allowed, rules.rates.max_velocity)
            ]
        return SeamLimits(
            step=[SEAM_SHARE * step for step in allowed], lower=limits.lower, upper=limits.upper
        )

    def command_rate_hz(self) -> float:
        """Arm commands per second lately (diagnostics)."""
        return self._output.command_rate_hz()

    def destroy(self) -> None:
        """Release the output stage (the node's teardown)."""
        with self._lock:
            self._output.destroy()

    # ----- a goal -----

    def begin_goal(self, rules: MotionRules) -> None:
        """A goal starts: its first step is checked against a fresh measurement."""
        with self._lock:
            self._rules = rules
            self._continuous = False
            self._wait_target = None
            self._cameras.reset()
            if self.interface is Interface.POSITION:
                self._velocity = None

    def end_goal(self) -> None:
        with self._lock:
            self._rules = None

    def check(self, row: Sequence[float]) -> str | None:
        """Why `row` must not be played now, or None. Raises StaleObservation when the joints
        or a camera are older than the rules allow."""
        with self._lock:
            return self._verdict(row)[0]

    def publish(self, row: Sequence[float]) -> None:
        """Check `row` again and publish it (StaleObservation or CommandRefused if it fails).
        In chunk mode only its gripper value: the row's arm targets went out in its chunk."""
        with self._lock:
            reason, arm, velocity = self._verdict(row)
            if reason is not None:
                raise CommandRefused(reason)
            if self._mode is CommandMode.STEP:
                self._output.publish_arm(arm)
                self._velocity = velocity
            if len(row) > self._joints:
                self._output.publish_gripper(row[self._joints:])
            if self._mode is CommandMode.STEP and self.interface is Interface.POSITION:
                self._target = _Sent(arm, self._clock())
            self._continuous = True
            self._held = False

    def publish_chunk(self, rows: Sequence[Sequence[float]], first_due_s: float) -> str | None:
        """Check every point of the trajectory that plays `rows` (row k due at `first_due_s +
        k` periods, monotonic) and publish it; why not (nothing published), or None. Raises
        StaleObservation when the joints or a camera are older than the rules allow."""
        with self._lock:
            rules = self._rules
            if rules is None:
                return "no goal is running"
            if self._mode is not CommandMode.CHUNK:
                return f"command_mode is {self._mode.value}; chunks are sent in chunk mode only"
            limits = rules.limits
            n = len(limits.joint_names)
            measured = self._measurements.joints(rules.max_state_age_s).positions
            self._cameras.check(rules)
            for k, row in enumerate(rows):
                # Every row, sent or not: within limits and finite (no step: the points'
                # steps are checked below), its gripper value in range.
                reason = joint_rules.check_position_target(row[:n], row[:n], limits)
                if reason is None and rules.gripper and len(row) > n:
                    reason = joint_rules.check_grippers(row[n:])
                if reason is not None:
                    return f"row {k} of the chunk: {reason}"
            previous = self._trajectory if self._continuous else None
            trajectory = build_trajectory(
                [row[:n] for row in rows], first_due_s, self._period_s, self._clock(),
                previous.position_at if previous is not None else lambda _t: measured,
            )
            if trajectory is None:
                # Every row is due before a controller could reach it: the arm keeps the
                # trajectory in force (already checked); the rows are only counted.
                return None
            # Like consecutive steps: the first point from the seam (the last command, or the
            # measured joints at a goal's start and after a wait), each point from the one
            # before, one period apart.
            # The blend must not hide a jump: the first row, as the policy planned it, within
            # max_step of the seam. Speeds are checked on the points as blended (below): they
            # are what the controller commands, and a first chunk's row is already rows into
            # its trajectory (those due within the lead are skipped) while the arm is at rest.
            reason = joint_rules.check_position_target(
                trajectory.first_row, trajectory.seam, limits
            )
            if reason is not None:
                return f"trajectory point 0 (before the seam blend): {reason}"
            reason = _trajectory_problem(rules, trajectory, previous, self._period_s)
            if reason is not None:
                return reason
            self._output.publish_trajectory(trajectory)
            self._trajectory = trajectory
            self._continuous = True
            self._held = False
        return None

    def pause(self) -> None:
        """The run waits for a late chunk: the next step starts from a fresh measurement, and a
        velocity arm is stopped meanwhile (its controller keeps applying the last command)."""
        with self._lock:
            if self._continuous:
                self._wait_target = self._target
            self._continuous = False
            if self.interface is Interface.VELOCITY:
                self._publish_zeros()
            else:
                self._velocity = None

    def hold(self) -> str | None:
        """Command the arm to stay still; None when held, else why it could not be (logged at
        ERROR: nothing was published and the arm keeps its last command)."""
        with self._lock:
            if self.interface is Interface.VELOCITY:
                self._publish_zeros()
                return None
            rules = self._rules
            problem = "no goal is running" if rules is None else self._hold_position(rules)
        if problem is not None:
            self._log.error(f"cannot hold the arm: {problem}")
        return problem

    # ----- between goals -----

    def republish_hold(self, rules: MotionRules) -> None:
        """While idle, send the last hold again (a controller that connected since never heard
        it) — only if it still passes: checked like a first step, against a fresh measurement."""
        with self._lock:
            target = self._last_target()
            if self._rules is not None or not self._held:
                return
            if self.interface is Interface.VELOCITY:
                self._publish_zeros()
                return
            if target is None:  # a position hold always sets it
                return
            problem = self._idle_problem(rules, target)
            if problem is None:
                self._send_still(target)
            new = self._log.refusal_changed(problem)
        if problem is not None and new:
            self._log.warning(f"the idle hold is not republished: {problem}")

    # ----- checks (under _lock) -----

    def _verdict(
        self, row: Sequence[float]
    ) -> tuple[str | None, list[float], list[float] | None]:
        """(why not, the arm command, the joint velocities it implies) for a policy row;
        raises StaleObservation."""
        rules = self._rules
        if rules is None:
            return "no goal is running", [], None
        limits = rules.limits
        n = len(limits.joint_names)
        snapshot = self._measurements.joints(rules.max_state_age_s)
        measured = snapshot.positions
        self._cameras.check(rules)
        if self._space is not None and rules.cartesian is not None:
            previous = self._target.positions if self._continuous and self._target else None
            return (*self._space.verdict(rules.cartesian, row, previous, rules.gripper), None)
        if self._mode is CommandMode.CHUNK:
            # The row's arm targets were checked with its chunk's trajectory.
            reason = None
            if rules.gripper and len(row) > n:
                reason = joint_rules.check_grippers(row[n:])
            return reason, [], None
        before = self._velocity if self._continuous else None
        velocity: list[float] | None
        if self.interface is Interface.VELOCITY:
            arm = velocity = [float(v) * rules.velocity_scale for v in row[:n]]
            reason = joint_rules.check_velocity_command(arm, measured, self._period_s, limits)
            if reason is None and rules.rates is not None:
                reason = check_velocity(arm, rules.rates, "velocity command")
                # A velocity arm's last command is known even after a wait: the zeros.
                if reason is None and self._velocity is not None:
                    reason = check_acceleration(arm, self._velocity, self._period_s, rules.rates)
        else:
            arm = [float(v) for v in row[:n]]
            reference, *unseen = self._references(snapshot)
            reason = joint_rules.check_position_target(arm, reference, limits)
            velocity = None
            if reason is None and rules.rates is not None:
                # After a wait the speed is the setpoint's, from the target held through it:
                # an arm still lagging on its way there is not a jump (max_step above bounds
                # the step from where the arm is).
                held = self._wait_target if not self._continuous else None
                reason, velocity = check_move(
                    arm, held.positions if held else reference, before, self._period_s,
                    rules.rates,
                )
            if reason is None and unseen:
                reason = joint_rules.check_position_target(arm, unseen[0], limits)
                reason = reason and f"from the last command sent: {reason}"
        if reason is None and rules.gripper and len(row) > n:
            reason = joint_rules.check_grippers(row[n:])
        return reason, arm, velocity

    def _hold_position(self, rules: MotionRules) -> str | None:
        """Publish a provably still position command — the fresh measurement, else the last
        target — that passes the same checks as a step; or say why there is none."""
        if self._space is not None and rules.cartesian is not None:
            previous = self._target.positions if self._continuous and self._target else None
            still, problem = self._space.still(rules.cartesian, previous)
            if still is not None:
                self._send_still(still)
                self._held = True
            return problem
        measured, stale = self._fresh_joints(rules)
        target = self._last_target()
        # Like a step: from the last target while the motion is continuous, else from the arm.
        reference = target if self._continuous and target is not None else measured
        if reference is None:
            return f"no fresh joint state to hold at or to check the last target against: {stale}"
        problems = []
        for candidate in (measured, target):
            if candidate is None:
                continue
            problem = _still_problem(rules, candidate, reference, self._period_s)
            if problem is None:
                self._send_still(candidate)
                self._held = True
                self._velocity = None
                return None
            problems.append(problem)
        return "; ".join(problems)

    def _idle_problem(self, rules: MotionRules, target: list[float]) -> str | None:
        """Why the last position hold must not be sent again now: like a first step, it must be
        within limits and within max_step of a fresh measurement."""
        if self._space is not None and rules.cartesian is not None:
            return self._space.idle_problem(rules.cartesian, target)
        measured, stale = self._fresh_joints(rules)
        if measured is None:
            return f"no fresh joint state to check it against: {stale}"
        return _still_problem(rules, target, measured, self._period_s)

    def _references(self, snapshot: JointSnapshot) -> list[list[float]]:
        """Where the arm may be as a step arrives: the last target while the motion is
        continuous; else the measurement — and the last command too, when the measurement
        arrived less than a control period after it left (a step is reached within a period:
        before that, the measurement may predate it and the arm be anywhere between)."""
        sent = self._target
        if sent is None:
            return [snapshot.positions]
        if self._continuous:
            return [sent.positions]
        received_s = self._clock() - snapshot.age_s
        if received_s - sent.at_s < self._period_s:
            return [snapshot.positions, sent.positions]
        return [snapshot.positions]

    def _last_target(self) -> list[float] | None:
        """Position interface: what the arm is commanded to now (None before any command)."""
        if self._trajectory is not None:
            return self._trajectory.position_at(self._clock())
        return self._target.positions if self._target is not None else None

    def _send_still(self, positions: Sequence[float]) -> None:
        """A position command that stays at `positions`: in chunk mode a trajectory holding
        them with zero velocity, which replaces the one running at once."""
        if self._mode is CommandMode.CHUNK:
            self._trajectory = ChunkTrajectory.still(positions, self._clock())
            self._output.publish_trajectory(self._trajectory)
        else:
            self._output.publish_arm(positions)
            self._target = _Sent(list(positions), self._clock())

    def _fresh_joints(self, rules: MotionRules) -> tuple[list[float] | None, str]:
        """(positions, "") when the joints are fresh, else (None, why not)."""
        try:
            return self._measurements.joints(rules.max_state_age_s).positions, ""
        except StaleObservation as exc:
            return None, str(exc)

    def _publish_zeros(self) -> None:
        self._output.publish_arm([0.0] * self._joints)
        self._held = True
        self._velocity = [0.0] * self._joints


def _trajectory_problem(
    rules: MotionRules,
    trajectory: ChunkTrajectory,
    previous: ChunkTrajectory | None,
    period_s: float,
) -> str | None:
    """Why a point of `trajectory` must not be played: each within limits and max_step of the one
    before (the seam for the first), and with joint limits its velocity (the controller's,
    and the one implied by the move) and the acceleration between points."""
    rates = rules.rates
    # Continuing a trajectory: its velocity at the seam (one period's move into it).
    before: list[float] | None = None
    if previous is not None and rates is not None:
        before = [
            (a - b) / period_s
            for a, b in zip(
                previous.position_at(trajectory.start_s),
                previous.position_at(trajectory.start_s - period_s),
            )
        ]
    reference: Sequence[float] = trajectory.seam
    at_s = 0.0
    for k, point in enumerate(trajectory.positions):
        reason = joint_rules.check_position_target(point, reference, rules.limits)
        if reason is None and rates is not None:
            reason = check_velocity(trajectory.velocities[k], rates, "is commanded at")
            if reason is None:
                reason, before = check_move(
                    point, reference, before, trajectory.times_s[k] - at_s, rates
                )
        if reason is not None:
            return f"trajectory point {k}: {reason}"
        reference, at_s = point, trajectory.times_s[k]
    return None


def _still_problem(
    rules: MotionRules, position: Sequence[float], reference: Sequence[float], period_s: float
) -> str | None:
    """Why a hold at `position` must not be sent: like a step from `reference`, within
    limits, max_step and the joints' max_velocity. Its deceleration is not checked: a hold
    is the stop, and refusing it would leave the arm on its last command."""
    problem = joint_rules.check_position_target(position, reference, rules.limits)
    if problem is None and rules.rates is not None:
        problem = check_move(position, reference, None, period_s, rules.rates)[0]
    return problem


class _GateLog:
    """The gate's logger, which also remembers the last idle-hold refusal (logged once per
    distinct reason)."""

    def __init__(self, log: Logger) -> None:
        self._log = log
        self._refusal = ""

    def warning(self, message: str) -> None:
        self._log.warning(message)

    def error(self, message: str) -> None:
        self._log.error(message)

    def refusal_changed(self, problem: str | None) -> bool:
        """Note the idle hold's refusal (None: it passed); True when it differs from the last."""
        before, self._refusal = self._refusal, _gist(problem or "")
        return problem is not None and self._refusal != before


def _gist(problem: str) -> str:
    """A refusal without its numbers: the same refusal with a growing age is not new."""
    return re.sub(r"\d+(\.\d+)?", "#", problem)
