"""Layouts of the table drawn from a seed: where the cup and the block start (no ROS, no MuJoCo)."""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

# The objects (docs/sim.md, "The world"): a red cup and a blue block, sizes in metres.
CUP_RADIUS = 0.03
CUP_HEIGHT = 0.09
BLOCK_HALF = np.array([0.045, 0.045, 0.025])  # half sizes: a 9 x 9 x 5 cm block
# Where the kinematic arm's scene (no physics) draws them, as 4x4 poses of their centres.
FIXED_CUP_POSE = np.eye(4)
FIXED_CUP_POSE[:3, 3] = (0.55, 0.18, CUP_HEIGHT / 2)
FIXED_BLOCK_POSE = np.eye(4)
FIXED_BLOCK_POSE[:3, 3] = (0.5, -0.22, BLOCK_HALF[2])

# The distribution of docs/sim.md ("Layouts"): centres uniform over this patch of the table in
# front of the robot (within the arm's comfortable reach), yaw uniform, centres apart enough that
# the hand fits between the cup and the block.
X_RANGE = (0.40, 0.65)
Y_RANGE = (-0.25, 0.25)
MIN_SEPARATION = 0.12
# Where `~/perturb` may set an object down (its centre): the table top in front of the robot,
# clear of its base and 5 cm inside the table's edges, at most MAX_LIFT_M above the table (enough
# to set the cup on the block). Farther, MuJoCo's state turns non-finite and it resets the world.
WORKSPACE_X = (0.2, 0.9)
WORKSPACE_Y = (-0.6, 0.6)
MAX_LIFT_M = 0.1
# Rejection sampling draws again while the two are too close; this many tries is never needed
# (about one draw in twelve is refused) but bounds the loop.
_MAX_DRAWS = 1000


@dataclass(frozen=True)
class Layout:
    """One trial's start: (x, y, yaw) of the cup and of the block in the base frame."""

    seed: int
    cup: tuple[float, float, float]
    block: tuple[float, float, float]


def layout(seed: int) -> Layout:
    """The layout of `seed`: the same seed gives the same layout on every machine."""
    if seed < 0:
        raise ValueError(f"layout_seed: got {seed}, expected an integer >= 0")
    rng = np.random.Generator(np.random.PCG64(seed))
    for _ in range(_MAX_DRAWS):
        cup, block = (
            (
                float(rng.uniform(*X_RANGE)),
                float(rng.uniform(*Y_RANGE)),
                float(rng.uniform(-math.pi, math.pi)),
            )
            for _ in range(2)
        )
        if math.hypot(cup[0] - block[0], cup[1] - block[1]) >= MIN_SEPARATION:
            return Layout(seed, cup, block)
    raise RuntimeError(f"layout {seed}: no draw kept the cup and block {MIN_SEPARATION} m apart")
