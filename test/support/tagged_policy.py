"""A gateway plug-in policy whose joint targets say which instruction they were computed for.

It behaves like pi05-droid (same catalogue row under another id: joint_delta rows, verified
joint_position conversion, 8 executable steps of 15) and reaches for the same instruction-derived
target, but every absolute target ``q_reference + row`` lands on a 0.01 rad grid plus a tag of
``k · 1e-4`` rad, where ``k`` is the number after the instruction's last ``#``. A published
joint target that is one of the rows therefore names its instruction: ``tag_of(target)``.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from typing import Any

from sequence_ai_gateway.models import catalogue
from sequence_ai_gateway.policies import PolicyObservation, instruction_target, reach_path

MODEL = "safety-tagged-droid"
GRID = 0.01
TAG_UNIT = 1e-4
MAX_TAG = 49  # tags stay below half a grid cell, so rounding can always find the grid point
# Rows stay clearly inside the declared value range [-1, 1] after rounding and tagging.
REACH = 0.9
MAX_STEP = 0.2
_TAG = re.compile(r"#(\d+)\s*$")


def tag_number(instruction: str) -> int:
    found = _TAG.search(instruction)
    if found is None or int(found.group(1)) > MAX_TAG:
        raise ValueError(f"instruction {instruction!r} does not end in '#k' with k <= {MAX_TAG}")
    return int(found.group(1))


def tag_of(target: Sequence[float]) -> int | None:
    """The instruction number a published joint target was computed for; None when its joints
    do not all sit exactly on the grid with one tag: a command played between two rows (a late
    chunk's fractional due row, the rest ramp at a chunk's end) mixes them and names nothing."""
    tags = set()
    for value in target:
        offset = value / GRID - math.floor(value / GRID + 1e-6)
        tag = round(offset * GRID / TAG_UNIT)
        if abs(offset * GRID - tag * TAG_UNIT) > 1e-7 or tag > MAX_TAG:
            return None
        tags.add(tag)
    return tags.pop() if len(tags) == 1 else None


class TaggedDroidReach:
    def __init__(self) -> None:
        self.row = dict(catalogue.simulated_row("pi05-droid"), id=catalogue.MODEL_PREFIX + MODEL)
        self.inference_ms = 0.0

    def steps(self, observation: PolicyObservation) -> list[list[float]]:
        tag = tag_number(observation.instruction) * TAG_UNIT
        q_ref = list(observation.joint_positions)
        target = instruction_target(observation.instruction, catalogue.PANDA_LOWER,
                                    catalogue.PANDA_UPPER)
        goal = [q + max(-REACH, min(REACH, t - q)) for q, t in zip(q_ref, target)]
        rows = []
        for position in reach_path(q_ref, goal, self.row["action_horizon"], MAX_STEP):
            tagged = [round(p / GRID) * GRID + tag for p in position]
            near = max(abs(p - t) for p, t in zip(position, target)) <= 0.05
            rows.append([v - q for v, q in zip(tagged, q_ref)] + [1.0 if near else 0.0])
        return rows


def tagged_droid() -> Any:
    return TaggedDroidReach()


POLICY_SPEC = f"{__name__}:tagged_droid"
