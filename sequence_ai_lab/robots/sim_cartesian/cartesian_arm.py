"""The Cartesian-commanded simulated Panda: twists integrated like MoveIt Servo, pose targets
approached at bounded speed, both through one damped least-squares IK step. No ROS, so tests
drive it directly (as shared/arm.py's SimArm)."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from enum import Enum

import numpy as np

from sequence_ai_lab.robots.sim_cartesian import panda_kinematics as kin


class ServoCommandType(Enum):
    """MoveIt Servo's twist command types."""

    UNITLESS = "unitless"  # each component in [-1, 1], scaled by linear/rotational_scale
    SPEED_UNITS = "speed_units"  # m/s and rad/s as they are


class CommandRefused(ValueError):
    """A command the arm ignores; the message names the value and what was expected."""


@dataclass(frozen=True)
class ServoSettings:
    command_type: ServoCommandType = ServoCommandType.UNITLESS
    linear_scale: float = 0.4  # m/s at unitless 1 (Servo's Panda `scale.linear`)
    rotational_scale: float = 0.8  # rad/s at unitless 1 (Servo's `scale.rotational`)
    # Servo's incoming_command_timeout: a command this old (s) no longer moves the arm.
    command_timeout_s: float = 0.1
    # How far (m, rad) the twists' reference may run ahead of a TCP held back (by a limit).
    reference_lead: float = 0.02
    target_linear_speed: float = 0.5  # m/s towards a pose target
    target_angular_speed: float = 1.0  # rad/s towards a pose target's orientation


def _finite(name: str, values: np.ndarray, width: int) -> np.ndarray:
    if values.shape != (width,) or not np.all(np.isfinite(values)):
        raise CommandRefused(f"{name}: got {values.tolist()}, expected {width} finite values")
    return values


def _bounded(vector: np.ndarray, limit: float) -> np.ndarray:
    norm = float(np.linalg.norm(vector))
    return vector * (limit / norm) if norm > limit else vector


@dataclass
class CartesianArm:
    """Seven joints driven through the TCP, and a gripper; `step` advances the simulation."""

    settings: ServoSettings = field(default_factory=ServoSettings)
    q: np.ndarray = field(default_factory=lambda: kin.READY_POSE.copy())
    gripper: float = 0.0
    gripper_speed: float = 2.0  # full stroke in half a second, as SimArm's
    refused: int = field(init=False, default=0)
    # The latest command: a base-frame TCP velocity (m/s, rad/s) or a pose target, and when it
    # came (s, on the caller's clock).
    _velocity: np.ndarray | None = field(init=False, default=None, repr=False)
    _target: tuple[np.ndarray, np.ndarray] | None = field(init=False, default=None, repr=False)
    _received_s: float = field(init=False, default=-math.inf, repr=False)
    # Where the twists so far should have brought the TCP: tracked, so IK's first-order error
    # does not add up over a long twist stream (None when no twist stream runs).
    _reference: tuple[np.ndarray, np.ndarray] | None = field(init=False, default=None, repr=False)
    _gripper_target: float = field(init=False, default=0.0, repr=False)

    def __post_init__(self) -> None:
        self.q = np.clip(np.asarray(self.q, dtype=float), kin.LOWER_LIMITS, kin.UPPER_LIMITS)
        if self.q.shape != (7,):
            raise ValueError(f"initial pose: got {self.q.shape[0]} values, expected 7")
        self._gripper_target = self.gripper

    def tcp(self) -> np.ndarray:
        return kin.tcp_pose(self.q)

    @property
    def target(self) -> tuple[np.ndarray, np.ndarray] | None:
        """The latest pose target (position, 3x3 rotation), whether stale or not."""
        return self._target

    def refuse(self, error: CommandRefused) -> CommandRefused:
        """Count a refused command (also one refused before it reached the arm); returns it."""
        self.refused += 1
        return error

    def command_twist(self, linear: list[float], angular: list[float], now_s: float) -> None:
        """A twist in the base frame, per the settings' command type; CommandRefused if it is
        not finite (or, unitless, outside [-1, 1]), and the arm carries on as before."""
        twist = np.array([*linear, *angular], dtype=float)
        try:
            _finite("twist", twist, 6)
        except CommandRefused as err:
            raise self.refuse(err) from None
        s = self.settings
        if s.command_type is ServoCommandType.UNITLESS:
            if np.any(np.abs(twist) > 1.0):
                raise self.refuse(CommandRefused(
                    f"twist: got {twist.tolist()}, expected unitless components in [-1, 1]"
                ))
            twist = twist * np.repeat([s.linear_scale, s.rotational_scale], 3)
        self._velocity, self._target, self._received_s = twist, None, now_s

    def command_pose(self, position: list[float], rotation: np.ndarray, now_s: float) -> None:
        """A TCP pose target (base frame) to approach; CommandRefused if not finite."""
        try:
            goal = _finite("target position", np.array(position, dtype=float), 3)
            turn = _finite("target rotation", np.asarray(rotation, dtype=float).reshape(-1), 9)
        except CommandRefused as err:
            raise self.refuse(err) from None
        self._target, self._velocity, self._received_s = (goal, turn.reshape(3, 3)), None, now_s
        self._reference = None

    def command_gripper(self, value: float) -> None:
        """0 = open .. 1 = closed (clamped); CommandRefused if not finite."""
        if not math.isfinite(value):
            raise self.refuse(CommandRefused(
                f"gripper command: got {value}, expected a finite value in [0, 1]"
            ))
        self._gripper_target = min(1.0, max(0.0, value))

    def moving(self, now_s: float) -> bool:
        """Whether the latest command is fresh enough to move the arm at `now_s`."""
        age = now_s - self._received_s
        return age <= self.settings.command_timeout_s and (
            self._velocity is not None or self._target is not None
        )

    def step(self, dt: float, now_s: float) -> None:
        """Advance by `dt` seconds at time `now_s`: the TCP follows a fresh twist or moves
        towards a fresh pose target; a stale command holds the arm where it is."""
        velocity, target = self._velocity, self._target
        if not self.moving(now_s):
            self._reference = None  # the next twist stream starts from where the TCP is
        elif dt > 0.0 and velocity is not None:
            self.q = kin.ik_step(self.q, self._follow_twist(velocity, dt), dt)
        elif dt > 0.0 and target is not None:
            error = kin.pose_error(self.tcp(), *target)
            s = self.settings
            displacement = np.concatenate([
                _bounded(error[:3], s.target_linear_speed * dt),
                _bounded(error[3:], s.target_angular_speed * dt),
            ])
            self.q = kin.ik_step(self.q, displacement, dt)
        gripper_move = self.gripper_speed * dt
        delta = self._gripper_target - self.gripper
        self.gripper += max(-gripper_move, min(gripper_move, delta))

    def _follow_twist(self, velocity: np.ndarray, dt: float) -> np.ndarray:
        """The TCP displacement that brings it onto the twist stream's reference pose."""
        tcp = self.tcp()
        if self._reference is None:
            self._reference = (tcp[:3, 3].copy(), tcp[:3, :3].copy())
        position, rotation = self._reference
        position = position + velocity[:3] * dt
        rotation = kin.rotation_matrix(velocity[3:] * dt) @ rotation
        # Held back (at a limit), the TCP lags: the reference waits for it a little ahead.
        lead = self.settings.reference_lead
        position = tcp[:3, 3] + _bounded(position - tcp[:3, 3], lead)
        lag = kin.rotation_vector(rotation @ tcp[:3, :3].T)
        rotation = kin.rotation_matrix(_bounded(lag, lead)) @ tcp[:3, :3]
        self._reference = (position, rotation)
        return kin.pose_error(tcp, position, rotation)
