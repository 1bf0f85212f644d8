"""Dynamics and kinematics of the simulated DROID Franka: no ROS, so tests can drive it directly."""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

JOINT_NAMES: tuple[str, ...] = tuple(f"panda_joint{i}" for i in range(1, 8))
GRIPPER_JOINT = "panda_finger_joint1"

# Franka Panda limits (rad, rad/s) as published for the FR3/Panda arm.
LOWER_LIMITS = np.array([-2.8973, -1.7628, -2.8973, -3.0718, -2.8973, -0.0175, -2.8973])
UPPER_LIMITS = np.array([2.8973, 1.7628, 2.8973, -0.0698, 2.8973, 3.7525, 2.8973])
VELOCITY_LIMITS = np.array([2.175, 2.175, 2.175, 2.175, 2.61, 2.61, 2.61])

# A relaxed "ready" pose above the table, inside every limit.
HOME = np.array([0.0, -0.785, 0.0, -2.356, 0.0, 1.571, 0.785])

# Modified DH (a, d, alpha) of the Panda's seven joints, then the flange and the hand.
_DH = (
    (0.0, 0.333, 0.0),
    (0.0, 0.0, -math.pi / 2),
    (0.0, 0.316, math.pi / 2),
    (0.0825, 0.0, math.pi / 2),
    (-0.0825, 0.384, -math.pi / 2),
    (0.0, 0.0, math.pi / 2),
    (0.088, 0.0, math.pi / 2),
)
_FLANGE_D = 0.107
_HAND_D = 0.1034


def _dh(a: float, d: float, alpha: float, theta: float) -> np.ndarray:
    ca, sa, ct, st = math.cos(alpha), math.sin(alpha), math.cos(theta), math.sin(theta)
    return np.array(
        [
            [ct, -st, 0.0, a],
            [st * ca, ct * ca, -sa, -d * sa],
            [st * sa, ct * sa, ca, d * ca],
            [0.0, 0.0, 0.0, 1.0],
        ]
    )


def forward_kinematics(q: np.ndarray) -> list[np.ndarray]:
    """4x4 poses in the base frame: base, joints 1..7, flange, hand (the wrist camera's mount)."""
    poses = [np.eye(4)]
    pose = np.eye(4)
    for (a, d, alpha), theta in zip(_DH, q):
        pose = pose @ _dh(a, d, alpha, float(theta))
        poses.append(pose)
    pose = pose @ _dh(0.0, _FLANGE_D, 0.0, 0.0)
    poses.append(pose)
    # The hand sits rotated -45 degrees about the flange axis on a real Panda.
    poses.append(pose @ _dh(0.0, _HAND_D, 0.0, -math.pi / 4))
    return poses


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
