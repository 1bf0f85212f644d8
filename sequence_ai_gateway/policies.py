"""Simulated policies and the plug-in interface a lab's own policy implements.

A served policy is any object with a ``row`` (its catalogue row, §1.6), an optional
``inference_ms`` (median simulated inference time on its worker) and
``steps(observation) -> rows``; one may also have ``chunk(observation) -> Chunk``, rows with
notes that go to the answer's ``warnings`` (the server then calls that instead). The ones here
are reach policies: they move the observed joints (or end effector) toward a target derived
from the instruction text, so an arm that executes the rows visibly converges to a checkable
pose. The DROID models that look at the frames are in ``vision_policies``.
"""

from __future__ import annotations

import hashlib
import importlib
import math
import random
import re
from dataclasses import dataclass, field
from typing import Any, Dict, List, Mapping, Optional, Sequence

from sequence_ai_gateway.droid import poses
from sequence_ai_gateway.models import catalogue

Rows = List[List[float]]
# Pre- and post-processing on top of the catalogue's GPU figure: pi05-droid's GPU p50 is 95 ms,
# the inference_ms the service reported for it 111-119 ms.
PROCESSING_MS = 20.0


def simulated_inference_ms(row: Mapping[str, Any]) -> float:
    """A built-in model's median inference time: its GPU figure plus the processing."""
    return float(row["latency"]["gpu_ms_p50"]) + PROCESSING_MS


@dataclass(frozen=True)
class Chunk:
    """A chunk with notes for the answer's ``warnings`` (what a policy's ``chunk`` returns)."""

    rows: Rows
    notes: List[str] = field(default_factory=list)


@dataclass(frozen=True)
class PolicyObservation:
    """What a policy sees: state already fitted to the row's ``state_layout``, decoded frames."""

    instruction: str
    joint_positions: List[float]
    gripper: List[float]
    images: Mapping[str, Any] = field(default_factory=dict)  # view -> PIL.Image (RGB)
    seed: Optional[int] = None
    options: Mapping[str, Any] = field(default_factory=dict)
    # [x, y, z, roll, pitch, yaw] in the robot's base frame, when the request carried six values.
    end_effector_pose: Optional[List[float]] = None


def normalise_instruction(text: str) -> str:
    return " ".join(text.lower().split())


def _digest(*parts: str) -> bytes:
    # surrogatepass: JSON may carry lone surrogates, which plain UTF-8 refuses to encode.
    return hashlib.sha256("\x1f".join(parts).encode("utf-8", "surrogatepass")).digest()


def instruction_target(
    instruction: str, lower: Sequence[float], upper: Sequence[float], margin: float = 0.15
) -> List[float]:
    """A stable joint configuration for an instruction, kept ``margin`` of each range inside."""
    digest = _digest("target", normalise_instruction(instruction))
    while len(digest) < 2 * len(lower):
        digest += _digest("more", digest.hex())
    target = []
    for i, (lo, hi) in enumerate(zip(lower, upper)):
        u = int.from_bytes(digest[2 * i : 2 * i + 2], "big") / 65535.0
        target.append(lo + (hi - lo) * (margin + (1.0 - 2.0 * margin) * u))
    return target


def observation_rng(observation: PolicyObservation) -> random.Random:
    # Same observation and seed -> same noise; the seed alone changes it.
    pose = observation.end_effector_pose or []
    state = ",".join(
        f"{v:.6f}" for v in observation.joint_positions + observation.gripper + pose
    )
    seed = 0 if observation.seed is None else observation.seed
    key = _digest(str(seed), normalise_instruction(observation.instruction), state)
    return random.Random(int.from_bytes(key[:8], "big"))


def _clip(value: float, lo: float, hi: float) -> float:
    return min(hi, max(lo, value))


def reach_path(
    start: Sequence[float],
    goal: Sequence[float],
    n_steps: int,
    max_step: float,
    brake: float = math.inf,
) -> Rows:
    """Positions after each of ``n_steps`` steps moving toward ``goal`` by at most ``max_step``.

    With a finite ``brake`` (rad per step, per step) each joint slows down before its goal so
    that its step shrinks by at most ``brake`` from one step to the next and it stops there:
    the step is a function of the distance left, so chunks planned from any point of the way
    agree on the speed.
    """
    path = []
    position = list(start)
    for _ in range(n_steps):
        position = [_toward(p, g, max_step, brake) for p, g in zip(position, goal)]
        path.append(list(position))
    return path


def _toward(position: float, goal: float, max_step: float, brake: float) -> float:
    step = min(max_step, _braking_step(abs(goal - position), brake))
    return position + _clip(goal - position, -step, step)


def _braking_step(distance: float, brake: float) -> float:
    """The largest step after which steps shrinking by ``brake`` each still stop within
    ``distance``: s + (s - b) + … ≈ s (s + b) / 2b ≤ distance."""
    if math.isinf(brake):
        return math.inf
    return (math.sqrt(brake * brake + 8.0 * brake * distance) - brake) / 2.0


def _near(position: Sequence[float], target: Sequence[float], tolerance: float) -> bool:
    return max(abs(p - t) for p, t in zip(position, target)) <= tolerance


class DroidJointDeltaReach:
    """sim-droid-reach: pi05-droid's action space, rows reaching for the instruction's target.

    Rows are cumulative displacements from the request-time joints.

    ``q_reference + row[:7]`` is the joint target of each step (the row's verified conversion).
    DROID allows up to 0.2 rad per step; this policy moves 0.06 rad per step (0.9 rad/s at
    15 Hz) so that all 15 rows stay inside the [-1, 1] clip and every row of a chunk, not
    only the first eight, is a consistent plan. It brakes into its target at 4 rad/s² and its
    error is a per-chunk offset, as a learned policy's mostly is: its rows stay within the
    Panda's speed and acceleration limits (config/droid.yaml), seams aside.
    """

    max_step = 0.06
    # 4 rad/s² at 15 Hz, in rad per step per step: below the Panda's lowest limit (7.5).
    brake = 4.0 / 15.0**2
    noise_rad = 0.002
    gripper_tolerance = 0.05

    def __init__(self) -> None:
        self.row = catalogue.simulated_row("sim-droid-reach")
        self.inference_ms = simulated_inference_ms(self.row)

    def steps(self, observation: PolicyObservation) -> Rows:
        q_ref = observation.joint_positions
        target = instruction_target(observation.instruction, catalogue.PANDA_LOWER,
                                    catalogue.PANDA_UPPER)
        # Displacements are clipped to [-1, 1]; the chunk aims at the reachable part of the way.
        goal = [q + _clip(t - q, -1.0, 1.0) for q, t in zip(q_ref, target)]
        rng = observation_rng(observation)
        offset = [rng.gauss(0.0, self.noise_rad) for _ in q_ref]
        path = reach_path(q_ref, goal, self.row["action_horizon"], self.max_step, self.brake)
        rows = []
        for position in path:
            delta = [_clip(p - q + e, -1.0, 1.0) for p, q, e in zip(position, q_ref, offset)]
            closed = _near(position, target, self.gripper_tolerance)
            rows.append(delta + [1.0 if closed else 0.0])
        return rows


class AbsoluteJointReach:
    """Absolute joint targets (+ gripper 0 open / 1 closed per arm) moving toward the target."""

    def __init__(
        self,
        row: Dict[str, Any],
        lower: Sequence[float],
        upper: Sequence[float],
        max_step: float,
        arms: int = 1,
        gripper_tolerance: float = 0.05,
    ) -> None:
        self.row = row
        self.inference_ms = simulated_inference_ms(row)
        self._lower = list(lower)
        self._upper = list(upper)
        self._max_step = max_step
        self._arms = arms
        self._tolerance = gripper_tolerance

    def steps(self, observation: PolicyObservation) -> Rows:
        q_ref = [_clip(q, lo, hi) for q, lo, hi in
                 zip(observation.joint_positions, self._lower, self._upper)]
        target = instruction_target(observation.instruction, self._lower, self._upper)
        per_arm = len(q_ref) // self._arms
        rows = []
        for position in reach_path(q_ref, target, self.row["action_horizon"], self._max_step):
            grippers = []
            for arm in range(self._arms):
                span = slice(arm * per_arm, (arm + 1) * per_arm)
                near = _near(position[span], target[span], self._tolerance)
                grippers.append(1.0 if near else 0.0)
            rows.append(position + grippers)
        return rows


_GRASP_WORDS = re.compile(r"\b(pick|grasp|grab|hold|close|take|lift)\b")


def ee_target(instruction: str) -> List[float]:
    """The instruction's end-effector target position (m), inside the sim's target box."""
    return instruction_target(
        instruction, catalogue.EE_TARGET_LOWER, catalogue.EE_TARGET_UPPER, margin=0.0
    )


def _half_sine(i: int, n: int) -> float:
    # A half-sine speed profile: starts and ends each chunk at rest, peaks at 0.5.
    return 0.5 * math.sin(math.pi * (i + 0.5) / n)


class StatelessEeDelta:
    """Normalised end-effector twists (MoveIt Servo ``unitless``) and a gripper.

    Without a pose: a smooth push in an instruction-derived direction. With the request's
    ``end_effector_pose``: the same speed profile, aimed at the instruction's target position
    and at the downward hand orientation, slowing so a robot scaling the rows by Servo's Panda
    scales (0.4 m/s, 0.8 rad/s) does not overshoot; the gripper closes at the target.
    """

    linear_scale = 0.4
    rotational_scale = 0.8
    noise = 0.002
    grasp_tolerance_m = 0.03

    def __init__(self) -> None:
        self.row = catalogue.simulated_row("sim-stateless-ee-delta")
        self.inference_ms = simulated_inference_ms(self.row)

    def steps(self, observation: PolicyObservation) -> Rows:
        if observation.end_effector_pose is not None:
            return self._steer(observation, observation.end_effector_pose)
        digest = _digest("direction", normalise_instruction(observation.instruction))
        direction = [(b / 255.0) * 2.0 - 1.0 for b in digest[:3]]
        norm = math.sqrt(sum(d * d for d in direction)) or 1.0
        direction = [d / norm for d in direction]
        grasp = 1.0 if _GRASP_WORDS.search(observation.instruction.lower()) else 0.0
        rng = observation_rng(observation)
        n = self.row["action_horizon"]
        rows = []
        for i in range(n):
            speed = _half_sine(i, n)
            xyz = [_clip(speed * d + rng.gauss(0.0, self.noise), -1.0, 1.0) for d in direction]
            rows.append(xyz + [0.0, 0.0, 0.0, grasp])
        return rows

    def _steer(self, observation: PolicyObservation, pose: Sequence[float]) -> Rows:
        dt = 1.0 / float(self.row["control_hz"])
        target = ee_target(observation.instruction)
        position = list(pose[:3])
        # Turning about one fixed base-frame axis composes exactly: only the angle left changes.
        turn = poses.orientation_error(pose[3:6], poses.DOWNWARD_RPY)
        angle_left = math.sqrt(sum(t * t for t in turn))
        axis = [t / angle_left for t in turn] if angle_left > 0.0 else [0.0, 0.0, 0.0]
        rng = observation_rng(observation)
        n = self.row["action_horizon"]
        rows = []
        for i in range(n):
            profile = _half_sine(i, n)
            gap = poses.distance(position, target)
            # Unitless speed that covers at most the gap left in this step at the assumed scale.
            speed = min(profile, gap / (self.linear_scale * dt))
            heading = [(t - p) / gap for p, t in zip(position, target)] if gap > 0 else [0.0] * 3
            linear = [_clip(speed * h + rng.gauss(0.0, self.noise), -1.0, 1.0) for h in heading]
            spin = min(profile, angle_left / (self.rotational_scale * dt))
            angular = [_clip(spin * a, -1.0, 1.0) for a in axis]
            position = [p + v * self.linear_scale * dt for p, v in zip(position, linear)]
            angle_left = max(0.0, angle_left - spin * self.rotational_scale * dt)
            near = poses.distance(position, target) <= self.grasp_tolerance_m
            rows.append(linear + angular + [1.0 if near else 0.0])
        return rows


class EeAbsoluteReach:
    """Absolute end-effector poses from the measured one towards the instruction's target.

    Each row moves at most ``max_step_m`` (straight line) and turns at most ``max_turn_rad``
    towards the downward hand orientation, its angles within pi of the row before (the first:
    of the measured pose); the gripper closes once the row is near the target.
    """

    max_step_m = 0.02
    max_turn_rad = 0.05
    grasp_tolerance_m = 0.03

    def __init__(self) -> None:
        self.row = catalogue.simulated_row("sim-ee-absolute-reach")
        self.inference_ms = simulated_inference_ms(self.row)

    def steps(self, observation: PolicyObservation) -> Rows:
        # The observation was fitted to the state_layout: the pose is six values (zero-filled,
        # with a warning, when the request lacked it).
        pose = list(observation.end_effector_pose or [0.0] * 6)
        target = ee_target(observation.instruction)
        position, rpy = pose[:3], pose[3:6]
        rows = []
        for _ in range(self.row["action_horizon"]):
            position = poses.step_towards(position, target, self.max_step_m)
            turn = poses.orientation_error(rpy, poses.DOWNWARD_RPY)
            angle = math.sqrt(sum(t * t for t in turn))
            if angle > self.max_turn_rad:
                turn = [t * self.max_turn_rad / angle for t in turn]
            # Continuous angles: the hand pointing down is roll pi or -pi, whichever is nearer.
            rpy = poses.unwrap(poses.rotate(rpy, turn), rpy) if angle > 0.0 else rpy
            near = poses.distance(position, target) <= self.grasp_tolerance_m
            rows.append(position + list(rpy) + [1.0 if near else 0.0])
        return rows


def load_policy(spec: str) -> Any:
    """Import ``package.module:factory`` and call the factory; check the object's interface."""
    module_name, sep, attr = spec.partition(":")
    if not sep or not module_name or not attr:
        raise ValueError(f"--policy {spec!r}: expected 'package.module:factory'")
    module = importlib.import_module(module_name)
    factory = getattr(module, attr, None)
    if not callable(factory):
        raise ValueError(f"--policy {spec!r}: {module_name} has no callable {attr!r}")
    policy = factory()
    row = getattr(policy, "row", None)
    if not isinstance(row, dict):
        raise ValueError(f"--policy {spec!r}: the object's 'row' must be a dict, got {row!r}")
    if not callable(getattr(policy, "steps", None)):
        raise ValueError(f"--policy {spec!r}: the object has no callable 'steps(observation)'")
    return policy
