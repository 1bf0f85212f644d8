"""ROS domain ids of the test suites, all inside one block per run.

Several suites (and several engineers' runs on one machine) start ROS nodes at once. Each run gets
a block of domain ids from `TEST_DOMAIN_BASE` (the Makefile picks one per `make` run), and each
suite an offset in it, so two runs never see each other's nodes.
"""

from __future__ import annotations

import os

BASE_ENV = "TEST_DOMAIN_BASE"
# Used when pytest runs without the Makefile: a block apart from ROS's default domain 0.
DEFAULT_BASE = 56
BLOCK = 8

# The evaluation's end-to-end run shares the run's own domain: `make demo`/`make bench` use it,
# and never while pytest runs.
EVALUATION_TESTS = 0
NODE_TESTS = 1
SAFETY_TESTS = 2
ACTION_TESTS = 3
SIM_ROBOT_TESTS = 4
DEMO_TESTS = 5
CONFIG_TESTS = 6
LAUNCH_TESTS = 7


def domain(offset: int) -> int:
    """The domain id of the suite at `offset` in this run's block."""
    if not 0 <= offset < BLOCK:
        raise ValueError(f"offset {offset}: expected 0..{BLOCK - 1}")
    base = int(os.environ.get(BASE_ENV, DEFAULT_BASE))
    return base + offset
