"""A helper node spun by a `SingleThreadedExecutor` on a thread of its own.

rclpy's executor rebuilds its wait set from every entity of the nodes it spins, and runs one
callback at a time. What must not wait behind the lifecycle node's services, goals and
transitions (joint states, the lifecycle queries) sits on a small node like this one.
"""

from __future__ import annotations

import threading

from rclpy.context import Context
from rclpy.executors import ExternalShutdownException, SingleThreadedExecutor
from rclpy.impl.rcutils_logger import RcutilsLogger
from rclpy.node import Node

_STOP_TIMEOUT_S = 5.0
# The thread looks at its stop flag at least this often, should a wake be missed.
_POLL_S = 1.0


class SideExecutor:
    """`node` (no parameter services, no global remaps) spun on `thread_name` from `start()`
    to `stop()`; the owner adds its entities between construction and `start()`."""

    def __init__(
        self, context: Context, name: str, namespace: str, thread_name: str, log: RcutilsLogger
    ) -> None:
        # No global arguments: the process's `__node:=` remap must not rename this node.
        self.node = Node(
            name,
            namespace=namespace,
            context=context,
            use_global_arguments=False,
            start_parameter_services=False,
        )
        # Wakes the executor's wait when stopped.
        self._wake = self.node.create_guard_condition(_nothing)
        self._stop = threading.Event()
        self._log = log
        self._executor = SingleThreadedExecutor(context=context)
        self._executor.add_node(self.node)
        self._thread = threading.Thread(target=self._spin, name=thread_name, daemon=True)

    @property
    def stopped(self) -> bool:
        return self._stop.is_set()

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> bool:
        """Stop the thread and the executor; from any thread but its own. False (logged) if
        the thread did not end: then nothing it waits on may be destroyed."""
        self._stop.set()
        self._wake.trigger()
        self._thread.join(_STOP_TIMEOUT_S)
        if self._thread.is_alive():
            # Left to the process's exit (daemon): destroying what it waits on would crash it.
            self._log.error(f"{self._thread.name} did not stop within {_STOP_TIMEOUT_S:g} s")
            return False
        self._executor.shutdown()
        return True

    def _spin(self) -> None:
        try:
            while not self._stop.is_set():
                self._executor.spin_once(timeout_sec=_POLL_S)
        except ExternalShutdownException:
            pass  # the process is shutting rclpy down
        except Exception as exc:  # noqa: BLE001 - what it serves goes unanswered now; say why
            self._log.fatal(f"{self._thread.name} stopped: {type(exc).__name__}: {exc}")


def _nothing() -> None:
    """A guard condition's callback; the wake is all it is for."""
