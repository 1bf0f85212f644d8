"""The tasks a trial is judged on: named quantities of the scene, predicates held for a time,
success latched per trial (no ROS, no MuJoCo: the world hands in what it measured)."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from enum import Enum

PICK = "pick up the cup"
PLACE = "put the cup on the blue block"
TASKS = (PICK, PLACE)

HOLD_S = 1.0  # a predicate must hold this long (world time) to count as success
LIFT_M = 0.05  # "pick up": the cup held by both fingers, its bottom this far above the table
ON_TOP_M = 0.01  # "put on": the cup's bottom within this of the block's top
RESTING_M_S = 0.05  # "put on": the cup slower than this counts as resting
UPRIGHT_COS = math.cos(math.radians(20.0))  # cup axis within 20 degrees of vertical


class Quantity(str, Enum):
    """The names published on ~/task_state (metres, booleans as 0 or 1)."""

    CUP_HEIGHT = "cup_height"
    CUP_BLOCK_DISTANCE = "cup_block_distance"
    CUP_UPRIGHT = "cup_upright"
    GRASPED = "grasped"
    CUP_ON_BLOCK = "cup_on_block"
    FAULT = "fault"  # 1: the trial is void (the physics went unstable; sim_robot logs why)


@dataclass(frozen=True)
class Measurement:
    """What the world measured at one instant, in the base frame (table top at z = 0)."""

    cup_bottom_z: float  # m: the lowest point of the cup's axis
    cup_axis_z: float  # z component of the cup's unit axis (1 upright)
    cup_speed: float  # m/s
    cup_in_block: tuple[float, float]  # the cup's centre in the block's frame (x, y), m
    cup_block_distance: float  # m, horizontal, centre to centre
    block_top_z: float  # m
    block_half_xy: tuple[float, float]  # the block's footprint, half sizes (m)
    grasped: bool  # both fingers touch the cup

    def quantities(self) -> dict[str, float]:
        return {
            Quantity.CUP_HEIGHT.value: self.cup_bottom_z,
            Quantity.CUP_BLOCK_DISTANCE.value: self.cup_block_distance,
            Quantity.CUP_UPRIGHT.value: float(self.upright),
            Quantity.GRASPED.value: float(self.grasped),
            Quantity.CUP_ON_BLOCK.value: float(self.on_block),
        }

    @property
    def upright(self) -> bool:
        return self.cup_axis_z >= UPRIGHT_COS

    @property
    def on_block(self) -> bool:
        """Resting upright on the block's top: bottom near its top, centre over its footprint."""
        x, y = self.cup_in_block
        return (
            self.upright
            and abs(self.cup_bottom_z - self.block_top_z) <= ON_TOP_M
            and abs(x) <= self.block_half_xy[0]
            and abs(y) <= self.block_half_xy[1]
            and self.cup_speed <= RESTING_M_S
        )


def predicate(task: str, measured: Measurement) -> bool:
    """Whether `task`'s condition holds at this instant (before the hold time)."""
    if task == PICK:
        # Held, not just high: a cup thrown up or set on the block is not picked up.
        return measured.grasped and measured.cup_bottom_z >= LIFT_M
    if task == PLACE:
        return measured.on_block
    raise ValueError(f"task: got {task!r}, expected one of {', '.join(map(repr, TASKS))}")


@dataclass
class TaskJudge:
    """Judges one trial: the predicate must hold for HOLD_S; the first success latches."""

    task: str
    since_s: float | None = field(default=None, init=False)  # when the predicate began to hold
    success_s: float | None = field(default=None, init=False)  # trial time of first success

    def __post_init__(self) -> None:
        if self.task not in TASKS:
            raise ValueError(
                f"task: got {self.task!r}, expected one of {', '.join(map(repr, TASKS))}"
            )

    @property
    def success(self) -> bool:
        return self.success_s is not None

    def update(self, trial_s: float, measured: Measurement) -> None:
        """Feed the measurement at trial time `trial_s` (calls in time order)."""
        if not predicate(self.task, measured):
            self.since_s = None
            return
        if self.since_s is None:
            self.since_s = trial_s
        if self.success_s is None and trial_s - self.since_s >= HOLD_S:
            self.success_s = trial_s
