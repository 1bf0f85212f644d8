"""The lifecycle queries (`get_state`, `get_available_states`, `get_available_transitions`,
`get_transition_graph`) answered on a small executor and thread of their own.

The lifecycle node's executor runs one callback at a time, so a transition in progress —
configure waiting up to `configure_timeout_s` for the catalogue — left every query unanswered
and a supervisor polling `get_state` saw a dead node. The services stay rclpy's own (their
handles belong to the node's state machine, their callbacks only read it, which is safe from
any thread); only the executor that waits on them moves, as joint_feed.py does for joint
states. `ChangeState` and everything else stays on the node's executor. The same thread runs
the node's `/diagnostics` while it holds no configuration (`tick`), so a configure in progress
is visible there too.
"""

from __future__ import annotations

import threading
from collections.abc import Callable

from rclpy.callback_groups import MutuallyExclusiveCallbackGroup
from rclpy.executors import ExternalShutdownException, SingleThreadedExecutor
from rclpy.impl.rcutils_logger import RcutilsLogger
from rclpy.lifecycle import LifecycleNode
from rclpy.node import Node
from rclpy.service import Service

__all__ = ["QUERY_THREAD", "LifecycleQueries"]

QUERY_NODE_SUFFIX = "_lifecycle"
QUERY_THREAD = "sequence_ai-lifecycle"
# rclpy's attributes for the read-only lifecycle services (rclpy/lifecycle/node.py).
_QUERY_SERVICES = (
    "_service_get_state",
    "_service_get_available_states",
    "_service_get_available_transitions",
    "_service_get_transition_graph",
)
_STOP_TIMEOUT_S = 5.0
# The thread looks at its stop flag at least this often, should a wake be missed.
_POLL_S = 1.0


class LifecycleQueries:
    """Serves `node`'s lifecycle queries on `QUERY_THREAD` from construction to `destroy()`,
    which hands them back to `node` (rclpy destroys them with it); calls `tick` there every
    `tick_s`."""

    def __init__(
        self, node: LifecycleNode, log: RcutilsLogger, tick: Callable[[], None], tick_s: float
    ) -> None:
        self._owner = node
        # No global arguments: the process's `__node:=` remap must not rename this node.
        self._node = Node(
            node.get_name() + QUERY_NODE_SUFFIX,
            namespace=node.get_namespace(),
            context=node.context,
            use_global_arguments=False,
            start_parameter_services=False,
        )
        group = MutuallyExclusiveCallbackGroup()
        self._services: list[Service] = []
        for attribute in _QUERY_SERVICES:
            service: Service = getattr(node, attribute)
            node._services.remove(service)
            service.callback_group = group
            group.add_entity(service)
            self._node._services.append(service)
            self._services.append(service)
        self._node.create_timer(tick_s, tick, callback_group=group)
        # Wakes the executor's wait when the queries are stopped.
        self._wake = self._node.create_guard_condition(_nothing)
        self._stop = threading.Event()
        self._log = log
        self._executor = SingleThreadedExecutor(context=node.context)
        self._executor.add_node(self._node)
        self._thread = threading.Thread(target=self._spin, name=QUERY_THREAD, daemon=True)
        self._thread.start()

    def destroy(self) -> None:
        """Stop the thread, give the services back, destroy the helper node; from any thread
        but the queries' own. Idempotent."""
        if self._stop.is_set():
            return
        self._stop.set()
        self._wake.trigger()
        self._thread.join(_STOP_TIMEOUT_S)
        if self._thread.is_alive():
            # Left to the process's exit (daemon): destroying what it waits on would crash it.
            self._log.error(f"{QUERY_THREAD} did not stop within {_STOP_TIMEOUT_S:g} s")
            return
        self._executor.shutdown()
        for service in self._services:
            self._node._services.remove(service)
            self._owner._services.append(service)
        self._services = []
        self._node.destroy_node()

    def _spin(self) -> None:
        try:
            while not self._stop.is_set():
                self._executor.spin_once(timeout_sec=_POLL_S)
        except ExternalShutdownException:
            pass  # the process is shutting rclpy down
        except Exception as exc:  # noqa: BLE001 - the queries go unanswered from now; say why
            self._log.fatal(f"{QUERY_THREAD} stopped: {type(exc).__name__}: {exc}")


def _nothing() -> None:
    """A guard condition's callback; the wake is all it is for."""
