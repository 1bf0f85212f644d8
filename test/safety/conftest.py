"""Safety suite setup: a ROS domain of its own and the fault-matrix report.

The helpers it shares with the client and node suites live in test/support.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from typing import Any

import pytest
from support import matrix_doc, safety_support
from support.ros_domains import SAFETY_TESTS, domain

# The safety suite's ROS domain, in this run's block (test/support/ros_domains.py).
SAFETY_ROS_DOMAIN_ID = domain(SAFETY_TESTS)
os.environ["ROS_AUTOMATIC_DISCOVERY_RANGE"] = "LOCALHOST"
os.environ["ROS_LOCALHOST_ONLY"] = "1"


@pytest.fixture(scope="session")
def safety_ros_context() -> Iterator[Any]:
    """One rclpy context on the safety domain for every ROS test here."""
    import rclpy
    from rclpy.context import Context

    context = Context()
    rclpy.init(context=context, domain_id=SAFETY_ROS_DOMAIN_ID)
    yield context
    rclpy.shutdown(context=context)


def pytest_terminal_summary(terminalreporter: Any) -> None:
    """Print the fault matrix; write docs/safety.md when both sides ran every cell."""
    rows = [row.as_dict() for row in safety_support.ROWS]
    if not rows:
        return
    terminalreporter.section("fault matrix (test/safety)")
    for line in matrix_doc.render(rows).splitlines():
        terminalreporter.write_line(line)
    matrix_doc.save_record(rows)
    shared = {cell.name for cell in safety_support.CELLS}
    wanted = {
        "client run()": shared,
        "node act goal": shared | {
            cell.name for cell in safety_support.NODE_FAULT_CELLS + safety_support.NODE_CELLS
        },
        safety_support.LIFECYCLE_SIDE: {cell.name for cell in safety_support.LIFECYCLE_CELLS},
        safety_support.GUARD_SIDE: {cell.name for cell in safety_support.GUARD_CELLS},
        safety_support.FILES_SIDE: {cell.name for cell in safety_support.FILES_CELLS},
        safety_support.TRAINING_SIDE: {cell.name for cell in safety_support.TRAINING_CELLS},
        safety_support.WORLD_SIDE: {cell.name for cell in safety_support.WORLD_CELLS},
        **{
            side: set(safety_support.CARTESIAN_SHARED)
            | {cell.name for cell in safety_support.CARTESIAN_CELLS}
            for side in safety_support.CARTESIAN_SIDES.values()
        },
    }
    complete = all(
        names <= {row["cell"] for row in rows if row["side"] == side}
        for side, names in wanted.items()
    )
    if complete and matrix_doc.write_doc(rows):
        terminalreporter.write_line(f"fault matrix written to {matrix_doc.DOC}")
