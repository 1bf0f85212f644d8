"""The simulated DROID models that look: pick up the cup, or put it on the blue block.

Stateless, as a learned policy is: every request re-decides from the frames and the measured
joints and gripper. The phase follows from what is seen:

- cup not seen in any view: hold in place (and say so in the answer's warnings);
- cup in the hand (gripper closing or closed, and the cup seen where the fingers are): lift, or
  carry it over the block, lower it onto the block's top and open the gripper;
- gripper closed on nothing: open it and rise;
- cup on the block and the hand open: rise clear and hold (the task is done);
- otherwise: approach above the cup, descend around it, close the gripper.

The hand path is sampled at the model's control rate and turned into joints with the gateway's
own Panda IK; no joint moves faster than 80 % of its speed limit in any step.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from typing import List, Optional, Sequence, Tuple

import numpy as np

from sequence_ai_gateway.droid import kinematics
from sequence_ai_gateway.models import scene_vision

Rows = List[List[float]]

# Heights of the hand TCP (m above the table top, i.e. above the object's bottom when added).
GRASP_ABOVE_BOTTOM = 0.055  # fingertips 5.5 cm up: the palm stays clear of the cup's rim
APPROACH_ABOVE_TOP = 0.08
LIFT_TCP_Z = 0.22  # carrying height: the cup's bottom ~0.17 m up, clear of the block
RETREAT_TCP_Z = 0.25
# Hand speeds (m/s): transfers, and the last centimetres down to a grasp or a placement.
TRANSFER_SPEED = 0.25
FINE_SPEED = 0.08
# 1 m/s² braking on arrival, so chunks planned from anywhere on the way agree on the speed.
BRAKE_MPS2 = 1.0
# How close (m) counts as above the cup / block, and as at a grasp or placing height.
ALIGN_TOLERANCE = 0.012
# The block is 9 cm across and half hidden by the cup above it: its centre is seen less well.
BLOCK_ALIGN_TOLERANCE = 0.025
HEIGHT_TOLERANCE = 0.008
# A cup whose centre is this close (m) to where the fingers hold one is in the hand.
IN_HAND_TOLERANCE = 0.035
# Gripper (0 open .. 1 closed) above this is closing or closed.
GRIPPER_CLOSING = 0.15
# A cup held at its grasp height: its centre relative to the TCP (m; negative, below it).
HELD_CUP_CENTRE_DZ = scene_vision.CUP_HEIGHT / 2.0 - GRASP_ABOVE_BOTTOM
# Rows of holding still after the fingers close, before the lift: they finish closing.
SETTLE_ROWS = 4
JOINT_SPEED_SHARE = 0.8
NOISE_RAD = 0.001


class Goal:
    """What an instruction asks for, as far as these models understand instructions."""

    ABOVE = "reach above the cup"
    GRASP = "grasp the cup"
    LIFT = "pick up the cup"
    OVER_BLOCK = "carry the cup over the blue block"
    PLACE = "put the cup on the blue block"


_RULES: Tuple[Tuple[str, str], ...] = (
    (r"\b(lower|put|place|set|stack)\b.*\bblock\b", Goal.PLACE),
    (r"\b(carry|move|bring)\b.*\b(over|above)\b.*\bblock\b", Goal.OVER_BLOCK),
    (r"\b(reach|move|go)\b.*\b(above|over|to)\b.*\bcup\b", Goal.ABOVE),
    (r"\b(grasp|grab|grip)\b", Goal.GRASP),
    (r"\b(pick|lift|raise)\b", Goal.LIFT),
)


def goal_of(instruction: str) -> Optional[str]:
    """The goal an instruction names, or None for one these models do not understand."""
    text = " ".join(instruction.lower().split())
    for pattern, goal in _RULES:
        if re.search(pattern, text):
            return goal
    return None


@dataclass(frozen=True)
class Plan:
    """A hand path (TCP positions, one per row) with a gripper value per row, and why."""

    positions: List[np.ndarray]
    gripper: List[float]
    phase: str
    notes: List[str] = field(default_factory=list)
    # A hold keeps the measured joints as they are: no IK, whatever the hand's orientation.
    keeps_joints: bool = False


@dataclass(frozen=True)
class Scene:
    """What one request shows: the cup and block (or None), the hand, the gripper."""

    cup: Optional[scene_vision.Located]
    block: Optional[scene_vision.Located]
    tcp: np.ndarray
    gripper: float


def _path(
    start: np.ndarray, waypoints: Sequence[np.ndarray], n: int, dt: float, speed: float
) -> List[np.ndarray]:
    """n positions along the polyline, ``speed`` at most, braking into its last point."""
    positions = []
    here = np.array(start, dtype=float)
    legs = [np.array(w, dtype=float) for w in waypoints]
    for _ in range(n):
        left = sum(float(np.linalg.norm(b - a)) for a, b in zip([here] + legs[:-1], legs))
        here, legs = _advance(here, legs, min(speed * dt, math.sqrt(2.0 * BRAKE_MPS2 * left) * dt))
        positions.append(here.copy())
    return positions


def _advance(
    here: np.ndarray, legs: List[np.ndarray], step: float
) -> Tuple[np.ndarray, List[np.ndarray]]:
    """``step`` metres further along the polyline through ``legs``; its end at most."""
    while step > 0.0:
        gap = float(np.linalg.norm(legs[0] - here))
        if gap > step:
            return here + (legs[0] - here) * (step / gap), legs
        here, step = legs[0], step - gap
        if len(legs) == 1:
            break
        legs = legs[1:]
    return here, legs


def _horizontal(a: np.ndarray, b: np.ndarray) -> float:
    return float(np.hypot(a[0] - b[0], a[1] - b[1]))


def _in_hand(scene: Scene) -> bool:
    if scene.cup is None or scene.gripper <= GRIPPER_CLOSING:
        return False
    held = scene.tcp + np.array([0.0, 0.0, HELD_CUP_CENTRE_DZ])
    if scene.cup.triangulated:
        return float(np.linalg.norm(scene.cup.centre - held)) <= IN_HAND_TOLERANCE
    # One ray, placed on the table's plane: a held cup shows where the hand is, seen from above.
    return _horizontal(scene.cup.centre, held) <= 2 * IN_HAND_TOLERANCE


def _cup_bottom(cup: scene_vision.Located) -> float:
    return max(0.0, float(cup.centre[2]) - scene_vision.CUP_HEIGHT / 2.0)


def _on_block(scene: Scene) -> bool:
    if scene.cup is None or scene.block is None or not scene.cup.triangulated:
        return False
    resting = scene_vision.BLOCK_HEIGHT + scene_vision.CUP_HEIGHT / 2.0
    return (
        _horizontal(scene.cup.centre, scene.block.centre) <= 0.045
        and abs(float(scene.cup.centre[2]) - resting) <= 0.03
    )


def plan(goal: str, scene: Scene, n: int, dt: float) -> Plan:
    """The hand's next ``n`` positions and gripper values for ``goal`` in ``scene``."""
    tcp = scene.tcp
    if scene.cup is None:
        return hold(
            tcp, n, scene.gripper, "no red cup in any view the model uses: holding in place"
        )
    if goal == Goal.PLACE and _on_block(scene):
        # Resting on the block, or within 3 cm of it: let go (a few still rows), rise clear.
        up = np.array([tcp[0], tcp[1], max(float(tcp[2]), RETREAT_TCP_Z)])
        still = [tcp.copy() for _ in range(min(SETTLE_ROWS, n))]
        return Plan(still + _path(tcp, [up], n - len(still), dt, FINE_SPEED), [0.0] * n, "done")
    holding = _in_hand(scene)
    if holding and goal in (Goal.OVER_BLOCK, Goal.PLACE):
        return _carry(goal, scene, n, dt)
    if holding:
        if goal in (Goal.ABOVE, Goal.GRASP):
            return hold(tcp, n, 1.0)
        lift = np.array([tcp[0], tcp[1], max(float(tcp[2]), LIFT_TCP_Z)])
        return _settled(tcp, [lift], n, dt, TRANSFER_SPEED, "lift")
    if scene.gripper > GRIPPER_CLOSING:
        up = np.array([tcp[0], tcp[1], max(float(tcp[2]), _approach_z(scene.cup))])
        return Plan(_path(tcp, [up], n, dt, FINE_SPEED), [0.0] * n, "release")
    return _grasp(goal, scene, n, dt)


def _approach_z(cup: scene_vision.Located) -> float:
    return _cup_bottom(cup) + scene_vision.CUP_HEIGHT + APPROACH_ABOVE_TOP


def _grasp(goal: str, scene: Scene, n: int, dt: float) -> Plan:
    tcp, cup = scene.tcp, scene.cup
    assert cup is not None
    above = np.array([cup.centre[0], cup.centre[1], _approach_z(cup)])
    grasp = np.array([cup.centre[0], cup.centre[1], _cup_bottom(cup) + GRASP_ABOVE_BOTTOM])
    if _horizontal(tcp, cup.centre) > ALIGN_TOLERANCE or goal == Goal.ABOVE:
        # Rise first when low, so the hand never sweeps through the cup on its way.
        waypoints = [above]
        if float(tcp[2]) < above[2] - 0.02 and _horizontal(tcp, cup.centre) > 0.04:
            waypoints.insert(0, np.array([tcp[0], tcp[1], above[2]]))
        return Plan(_path(tcp, waypoints, n, dt, TRANSFER_SPEED), [0.0] * n, "approach")
    positions = _path(tcp, [grasp], n, dt, FINE_SPEED)
    gripper = [1.0 if abs(float(p[2]) - grasp[2]) <= HEIGHT_TOLERANCE else 0.0 for p in positions]
    return Plan(positions, gripper, "grasp")


def _carry(goal: str, scene: Scene, n: int, dt: float) -> Plan:
    tcp, block = scene.tcp, scene.block
    if block is None:
        # Lifted clear, the cup no longer hides the block from the exterior views.
        lift = np.array([tcp[0], tcp[1], max(float(tcp[2]), LIFT_TCP_Z)])
        plan = _settled(tcp, [lift], n, dt, TRANSFER_SPEED, "lift")
        return Plan(
            plan.positions,
            plan.gripper,
            plan.phase,
            ["no blue block in any view the model uses: lifting the cup and holding it"],
        )
    top = float(block.centre[2]) + scene_vision.BLOCK_HEIGHT / 2.0
    over = np.array([block.centre[0], block.centre[1], max(LIFT_TCP_Z, float(tcp[2]))])
    place = np.array([block.centre[0], block.centre[1], top + GRASP_ABOVE_BOTTOM + 0.005])
    if _horizontal(tcp, block.centre) > BLOCK_ALIGN_TOLERANCE or goal == Goal.OVER_BLOCK:
        waypoints = [over]
        if float(tcp[2]) < over[2] - 0.02:
            waypoints.insert(0, np.array([tcp[0], tcp[1], over[2]]))
        return _settled(tcp, waypoints, n, dt, TRANSFER_SPEED, "carry")
    positions = _path(tcp, [place], n, dt, FINE_SPEED)
    gripper = [0.0 if abs(float(p[2]) - place[2]) <= HEIGHT_TOLERANCE else 1.0 for p in positions]
    return Plan(positions, gripper, "place")


def _settled(
    tcp: np.ndarray, waypoints: List[np.ndarray], n: int, dt: float, speed: float, phase: str
) -> Plan:
    """A move with the gripper closed, after a few still rows that let the fingers close."""
    still = [tcp.copy() for _ in range(min(SETTLE_ROWS, n))]
    return Plan(still + _path(tcp, waypoints, n - len(still), dt, speed), [1.0] * n, phase)


def hold(tcp: np.ndarray, n: int, gripper: float, note: str = "") -> Plan:
    """Stay where the hand is, the gripper as it is (closing counts as closed)."""
    closed = 1.0 if gripper > GRIPPER_CLOSING else 0.0
    notes = [note] if note else []
    return Plan([tcp.copy() for _ in range(n)], [closed] * n, "hold", notes, keeps_joints=True)


def joint_path(
    q_start: Sequence[float], positions: Sequence[np.ndarray], dt: float
) -> List[np.ndarray]:
    """Joints following the hand positions (pointing down), each step inside the speed limits."""
    limit = JOINT_SPEED_SHARE * kinematics.VELOCITY_LIMITS * dt
    q = np.asarray(q_start, dtype=float)
    out = []
    for position in positions:
        solved = kinematics.solve(q, position)
        q = np.clip(q + np.clip(solved - q, -limit, limit), kinematics.LOWER, kinematics.UPPER)
        out.append(q.copy())
    return out
