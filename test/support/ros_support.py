"""Nodes under test for the safety suite, and the goal bookkeeping the matrix and churn share.

Each node gets its test arm (``node_harness.ArmHarness``) and executors of its own, as a
deployment (one node per process) has: the node a ``SingleThreadedExecutor`` like ``main()``,
its arm a multi-threaded one.
"""

from __future__ import annotations

import itertools
import os
import threading
from dataclasses import dataclass
from typing import Any

from rclpy.executors import MultiThreadedExecutor, SingleThreadedExecutor
from rclpy.parameter import Parameter

from sequence_ai_ros.node import SequenceAiNode
from support.node_harness import ArmHarness, Command
from support.waiting import wait_for

_numbers = itertools.count()
EXECUTOR_THREADS = 8


@dataclass
class Running:
    node: SequenceAiNode
    arm: ArmHarness
    executor: SingleThreadedExecutor
    arm_executor: MultiThreadedExecutor
    spinners: tuple[threading.Thread, threading.Thread]

    @property
    def pool_prefix(self) -> str:
        # rclpy's pool threads appear lazily; they belong to the arm's executor, not to a goal.
        return self.arm_executor._executor._thread_name_prefix


class NodeSystem:
    """``start(**parameters)`` → (node, arm), each pair spun by its own executor."""

    def __init__(self, context: Any, prefix: str) -> None:
        self._context = context
        self._prefix = prefix
        self.running: list[Running] = []

    def start(self, **values: Any) -> tuple[SequenceAiNode, ArmHarness]:
        # The pid keeps two concurrent runs of this suite on one machine apart.
        namespace = f"/{self._prefix}_{os.getpid()}_{next(_numbers)}"
        node = SequenceAiNode(
            namespace=namespace,
            context=self._context,
            parameter_overrides=[Parameter(k, value=v) for k, v in values.items()],
        )
        arm = ArmHarness(namespace, self._context)
        executor = SingleThreadedExecutor(context=self._context)
        executor.add_node(node)
        arm_executor = MultiThreadedExecutor(num_threads=EXECUTOR_THREADS, context=self._context)
        arm_executor.add_node(arm)
        spinners = (
            threading.Thread(target=executor.spin, name=f"spin{namespace}", daemon=True),
            threading.Thread(target=arm_executor.spin, name=f"arm{namespace}", daemon=True),
        )
        for spinner in spinners:
            spinner.start()
        self.running.append(Running(node, arm, executor, arm_executor, spinners))
        return node, arm

    def pool_prefixes(self) -> list[str]:
        return [r.pool_prefix for r in self.running]

    def close(self) -> None:
        for running in self.running:
            running.node.shut_down_now()
        for running in self.running:
            # The spinner must be gone before its nodes are: a wait set still holding a
            # destroyed handle raises in the spin thread.
            running.executor.shutdown(timeout_sec=10.0)
            running.arm_executor.shutdown(timeout_sec=10.0)
            for spinner in running.spinners:
                spinner.join(timeout=10.0)
            running.node.destroy_node()
            running.arm.destroy_node()
        self.running = []


def key_file_for(directory: Any, key: str) -> str:
    path = directory / "sequences.key"
    path.write_text(key + "\n", encoding="utf-8")
    path.chmod(0o600)
    return str(path)


def wait_commands(arm: ArmHarness, at_least: int, what: str) -> None:
    wait_for(lambda: arm.command_count() >= at_least, what=what)


def wait_first_step(arm: ArmHarness, start: int) -> None:
    """Wait for a goal's first step among the commands from ``start``. A hold the node sends
    again while idle is a command too, but not the goal's: it never counts."""

    def stepped() -> bool:
        # A hold is at a measured pose, or the command sent last before `start` sent again.
        still = {c.values for c in arm.holds(start)}
        still.update(c.values for c in arm.commands_since(max(0, start - 1))[:1] if start)
        return any(c.values not in still for c in arm.commands_since(start))

    wait_for(stepped, what="the goal's first step")


def hold_events(arm: ArmHarness, start: int, stop: int | None = None) -> list[Command]:
    """The holds at a measured pose among the commands from ``start`` (up to ``stop``), each
    counted once: the same hold sent again (the node republishes its hold while idle) is not a
    new one."""
    first = max(0, start - 1)
    commands = arm.commands_since(first)
    if stop is not None:
        commands = commands[: max(0, stop - first)]
    measured = set(arm.holds(first))
    events = []
    for index, command in enumerate(commands):
        previous = commands[index - 1] if index else None
        again = previous is not None and previous in measured and previous.values == command.values
        if first + index >= start and command in measured and not again:
            events.append(command)
    return events


def holds_until_next_goal(arm: ArmHarness, start: int, next_start: int) -> int:
    """Hold events from ``start`` up to the next goal's first policy target.

    A late hold of the earlier goal would still arrive before that target (one publisher,
    reliable, in order), so nothing the earlier goal published is missed.
    """
    commands = arm.commands_since(start)
    measured = set(arm.holds(start))
    stop = next(
        (start + i for i, c in enumerate(commands)
         if start + i >= next_start and c not in measured),
        None,
    )
    return len(hold_events(arm, start, stop))


def new_commands(arm: ArmHarness, start: int) -> list[Command]:
    """Commands since ``start`` other than the command in force before it sent again (an idle
    node republishes its hold once a second)."""
    in_force = {c.values for c in arm.commands_since(start - 1)[:1]} if start else set()
    return [c for c in arm.commands_since(start) if c.values not in in_force]
