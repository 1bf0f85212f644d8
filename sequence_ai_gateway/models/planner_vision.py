"""What the simulated planner sees: whether a step (or the task) is done, judged from the frames.

The cup and the block are found in the sent views (``scene_vision``) and the hand's TCP comes
from the sent joints (``droid.kinematics``); each step the planner emits is done when its geometric
condition holds. The heights and tolerances are those the looking act models (``grasp_policy``)
aim at, so a step they finish is one the planner sees finished.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Mapping, Optional, Sequence

import numpy as np
from PIL import Image

from sequence_ai_gateway.droid import kinematics
from sequence_ai_gateway.models import grasp_policy, scene_vision
from sequence_ai_gateway.models.grasp_policy import Goal

# "Above the cup": the hand within this (m) of the cup's axis, and between these heights over
# the cup's top (the act models stop APPROACH_ABOVE_TOP over it).
ABOVE_ALIGN_M = 0.03
ABOVE_MIN_OVER_TOP_M = 0.03
ABOVE_MAX_OVER_TOP_M = grasp_policy.APPROACH_ABOVE_TOP + 0.04
# "Grasped": the cup seen within this (m) of the axis of the hand's TCP, and within the act
# models' in-hand distance of where the fingers hold one (the hand hides the cup's top, so
# its seen centre is low by 2-3 cm).
GRASP_ALIGN_M = 0.02
GRASP_TOLERANCE_M = grasp_policy.IN_HAND_TOLERANCE
# "Lifted": the cup's bottom at least this high (m) above the table.
LIFTED_M = 0.05
# "Over the block": the cup within this (m) of the block's axis (over its top: the block is
# 9 cm across), its bottom clear of the top; lowering it centres it (grasp_policy's place).
OVER_BLOCK_ALIGN_M = 0.04
# "On the block": the cup within this (m) of the block's axis, its bottom this close to the
# block's top. The block stands on the table, its top at BLOCK_HEIGHT: a cup on it hides that
# top, and the blue seen is the part beside the cup, low and up to ~6 cm off the block's axis.
ON_BLOCK_ALIGN_M = 0.07
ON_BLOCK_HEIGHT_M = 0.02


@dataclass(frozen=True)
class Seen:
    """The cup and block (None: not seen) and the hand's TCP (base frame, m)."""

    cup: Optional[scene_vision.Located]
    block: Optional[scene_vision.Located]
    tcp: np.ndarray


def look(images: Mapping[str, Image.Image], joints: Sequence[float]) -> Seen:
    """Cup and block located in the named views; the TCP by forward kinematics of ``joints``."""
    q = np.clip(np.asarray(joints, dtype=float), kinematics.LOWER, kinematics.UPPER)
    cups, blocks, sizes = scene_vision.sightings(images, list(images))
    cup = scene_vision.locate(cups, sizes, q, scene_vision.CUP_HEIGHT / 2.0)
    block = scene_vision.locate(blocks, sizes, q, scene_vision.BLOCK_HEIGHT / 2.0)
    return Seen(cup, block, kinematics.tcp_pose(q)[:3, 3])


def _horizontal(a: np.ndarray, b: np.ndarray) -> float:
    return float(np.hypot(a[0] - b[0], a[1] - b[1]))


def cup_bottom(cup: scene_vision.Located) -> float:
    return float(cup.centre[2]) - scene_vision.CUP_HEIGHT / 2.0


def above_cup(seen: Seen) -> bool:
    if seen.cup is None:
        return False
    over_top = float(seen.tcp[2]) - (cup_bottom(seen.cup) + scene_vision.CUP_HEIGHT)
    return (
        _horizontal(seen.tcp, seen.cup.centre) <= ABOVE_ALIGN_M
        and ABOVE_MIN_OVER_TOP_M <= over_top <= ABOVE_MAX_OVER_TOP_M
    )


def grasped(seen: Seen) -> bool:
    """The hand where it holds the cup, the cup seen there (the fingers close around it)."""
    if seen.cup is None:
        return False
    held = seen.tcp + np.array([0.0, 0.0, grasp_policy.HELD_CUP_CENTRE_DZ])
    return _horizontal(seen.cup.centre, held) <= GRASP_ALIGN_M and abs(
        float(seen.cup.centre[2]) - float(held[2])
    ) <= GRASP_TOLERANCE_M


def held_bottom(seen: Seen) -> Optional[float]:
    """The cup's bottom height (m): where the fingers hold it when it is in the hand, else as
    seen (the seen centre of a held cup is low: the hand hides its top)."""
    if seen.cup is None:
        return None
    if grasped(seen):
        return float(seen.tcp[2]) - grasp_policy.GRASP_ABOVE_BOTTOM
    return cup_bottom(seen.cup)


def lifted(seen: Seen) -> bool:
    bottom = held_bottom(seen)
    return bottom is not None and bottom >= LIFTED_M


def over_block(seen: Seen) -> bool:
    if seen.cup is None or seen.block is None:
        return False
    block_top = scene_vision.BLOCK_HEIGHT
    bottom = held_bottom(seen)
    return (
        _horizontal(seen.cup.centre, seen.block.centre) <= OVER_BLOCK_ALIGN_M
        and bottom is not None
        and bottom >= block_top + 0.01
    )


def on_block(seen: Seen) -> bool:
    if seen.cup is None or seen.block is None:
        return False
    block_top = scene_vision.BLOCK_HEIGHT
    bottom = held_bottom(seen)
    return (
        _horizontal(seen.cup.centre, seen.block.centre) <= ON_BLOCK_ALIGN_M
        and bottom is not None
        and abs(bottom - block_top) <= ON_BLOCK_HEIGHT_M
    )


# Each act-model goal's "done", as seen in the frames.
CONDITIONS = {
    Goal.ABOVE: above_cup,
    Goal.GRASP: grasped,
    Goal.LIFT: lifted,
    Goal.OVER_BLOCK: over_block,
    Goal.PLACE: on_block,
}


def step_done(step: str, seen: Seen) -> Optional[bool]:
    """Whether ``step`` is done in ``seen``; None for a step whose end cannot be seen."""
    goal = grasp_policy.goal_of(step)
    return None if goal is None else CONDITIONS[goal](seen)
