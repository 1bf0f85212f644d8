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

from collections.abc import Callable

from rclpy.callback_groups import MutuallyExclusiveCallbackGroup
from rclpy.impl.rcutils_logger import RcutilsLogger
from rclpy.lifecycle import LifecycleNode
from rclpy.service import Service

from sequence_ai_ros.plumbing.side_executor import SideExecutor

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


class LifecycleQueries:
    """Serves `node`'s lifecycle queries on `QUERY_THREAD` from construction to `destroy()`,
    which hands them back to `node` (rclpy destroys them with it); calls `tick` there every
    `tick_s`."""

    def __init__(
        self, node: LifecycleNode, log: RcutilsLogger, tick: Callable[[], None], tick_s: float
    ) -> None:
        self._owner = node
        self._side = SideExecutor(
            node.context,
            node.get_name() + QUERY_NODE_SUFFIX,
            node.get_namespace(),
            QUERY_THREAD,
            log,
        )
        group = MutuallyExclusiveCallbackGroup()
        self._services: list[Service] = []
        for attribute in _QUERY_SERVICES:
            service: Service = getattr(node, attribute)
            node._services.remove(service)
            service.callback_group = group
            group.add_entity(service)
            self._side.node._services.append(service)
            self._services.append(service)
        self._side.node.create_timer(tick_s, tick, callback_group=group)
        self._side.start()

    def destroy(self) -> None:
        """Stop the thread, give the services back, destroy the helper node; from any thread
        but the queries' own. Idempotent."""
        if self._side.stopped or not self._side.stop():
            return
        for service in self._services:
            self._side.node._services.remove(service)
            self._owner._services.append(service)
        self._services = []
        self._side.node.destroy_node()
