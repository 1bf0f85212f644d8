"""Dynamics and kinematics of the simulated DROID Franka: no ROS, so tests can drive it directly."""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from sequence_ai_gateway.droid import kinematics
from sequence_ai_gateway.droid.description import FRANKA_DROID

# The robot's description (joints, limits, home, DH) is data: sequence_ai_descriptions'
# franka_droid/robot.json, read once by the gateway's reader; its kinematics are the gateway's.
JOINT_NAMES: tuple[str, ...] = FRANKA_DROID.joint_names
GRIPPER_JOINT = FRANKA_DROID.gripper_joint

# Franka Panda limits (rad, rad/s) as published for the FR3/Panda arm.
LOWER_LIMITS = np.array(FRANKA_DROID.lower)
UPPER_LIMITS = np.array(FRANKA_DROID.upper)
VELOCITY_LIMITS = np.array(FRANKA_DROID.velocity)

# A relaxed "ready" pose above the table, inside every limit.
HOME = np.array(FRANKA_DROID.home)


def forward_kinematics(q: np.ndarray) -> list[np.ndarray]:
    """4x4 poses in the base frame: base, joints 1..7, flange, hand (the wrist camera's mount)."""
    return kinematics.frames(q)


@dataclass
class SimArm:
    """Seven joints and a gripper following position targets or velocities at a fixed step."""

    q: np.ndarray = field(default_factory=lambda: HOME.copy())
    gripper: float = 0.0
    velocity_timeout_s: float = 0.2
    gripper_speed: float = 2.0  # full stroke in half a second, like the Franka hand's fast mode
    qd: np.ndarray = field(init=False, default_factory=lambda: np.zeros(7))
    _target: np.ndarray | None = field(init=False, default=None, repr=False)
    _velocity: np.ndarray | None = field(init=False, default=None, repr=False)
    _velocity_age_s: float = field(init=False, default=0.0, repr=False)
    _gripper_target: float = field(init=False, default=0.0, repr=False)

    def __post_init__(self) -> None:
        self.q = np.clip(np.asarray(self.q, dtype=float), LOWER_LIMITS, UPPER_LIMITS)
        if self.q.shape != (7,):
            raise ValueError(f"initial pose: got {self.q.shape[0]} values, expected 7")
        self._gripper_target = self.gripper

    def command_positions(self, target: np.ndarray) -> None:
        """Follow absolute joint targets (clamped to the limits) until the next command."""
        target = np.asarray(target, dtype=float)
        if target.shape != (7,) or not np.all(np.isfinite(target)):
            raise ValueError(f"position command: got {target.tolist()}, expected 7 finite values")
        self._target = np.clip(target, LOWER_LIMITS, UPPER_LIMITS)
        self._velocity = None

    def command_velocities(self, velocity: np.ndarray) -> None:
        """Integrate joint velocities (rad/s) until they go stale or another command arrives."""
        velocity = np.asarray(velocity, dtype=float)
        if velocity.shape != (7,) or not np.all(np.isfinite(velocity)):
            raise ValueError(f"velocity command: got {velocity.tolist()}, expected 7 finite values")
        self._velocity = velocity
        self._velocity_age_s = 0.0
        self._target = None

    def command_gripper(self, value: float) -> None:
        """0 = open .. 1 = closed."""
        if not math.isfinite(value):
            raise ValueError(f"gripper command: got {value}, expected a finite value in [0, 1]")
        self._gripper_target = min(1.0, max(0.0, value))

    def step(self, dt: float) -> None:
        """Advance by dt seconds: velocity-limited motion, clamped to the joint limits."""
        previous = self.q
        max_move = VELOCITY_LIMITS * dt
        if self._velocity is not None:
            self._velocity_age_s += dt
            if self._velocity_age_s > self.velocity_timeout_s:
                # Commands stopped: hold where we are rather than drift on an old velocity.
                self._velocity = None
                self._target = None
            else:
                self.q = self.q + np.clip(self._velocity * dt, -max_move, max_move)
        elif self._target is not None:
            self.q = self.q + np.clip(self._target - self.q, -max_move, max_move)
        self.q = np.clip(self.q, LOWER_LIMITS, UPPER_LIMITS)
        self.qd = (self.q - previous) / dt if dt > 0 else np.zeros(7)
        gripper_move = self.gripper_speed * dt
        delta = self._gripper_target - self.gripper
        self.gripper += max(-gripper_move, min(gripper_move, delta))
