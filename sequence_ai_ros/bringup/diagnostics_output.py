"""The node's `/diagnostics`, once a second in every state.

While the node holds a configuration it is published from the node's executor; while it holds
none, beside `get_state` on the lifecycle queries' own thread (lifecycle_queries.py), so a
configure in progress — or one that failed — is visible too.
"""

from __future__ import annotations

from collections.abc import Callable

from diagnostic_msgs.msg import DiagnosticArray
from rclpy.lifecycle import LifecycleNode

from sequence_ai_ros.bringup.configuration import Configured
from sequence_ai_ros.bringup.diagnostics import build_array
from sequence_ai_ros.core.health import HealthRecord
from sequence_ai_ros.plumbing.lifecycle_queries import LifecycleQueries

_PERIOD_S = 1.0


class DiagnosticsOutput:
    """Publishes `health` and the configured parts' input ages and command rate; `configured`
    and `motion` are read at each publish, from whichever thread's turn it is."""

    def __init__(
        self,
        node: LifecycleNode,
        health: HealthRecord,
        configured: Callable[[], Configured | None],
        motion: Callable[[], str],
    ) -> None:
        self._node = node
        self._health = health
        self._configured = configured
        self._motion = motion
        self._publisher = node.create_publisher(DiagnosticArray, "/diagnostics", 10)
        self._timer = node.create_timer(_PERIOD_S, lambda: self._publish(configured_only=True))
        self._queries = LifecycleQueries(
            node, node.get_logger(), lambda: self._publish(configured_only=False), _PERIOD_S
        )

    def destroy(self) -> None:
        """Hands the lifecycle queries back to the node; before the node is destroyed."""
        self._queries.destroy()

    def _publish(self, configured_only: bool) -> None:
        configured = self._configured()
        if (configured is not None) is not configured_only:
            return  # the other thread's turn
        cache = None if configured is None else configured.cache
        gate = None if configured is None else configured.gate
        self._health.update(motion=self._motion(), dry_run=gate is not None and gate.dry_run)
        self._publisher.publish(
            build_array(
                self._health,
                node_name=self._node.get_fully_qualified_name(),
                ages=cache.ages() if cache is not None else {},
                missing=cache.missing() if cache is not None else [],
                stamp_skew_s=cache.stamp_skew_s() if cache is not None else None,
                command_rate_hz=gate.command_rate_hz() if gate is not None else 0.0,
                stamp=self._node.get_clock().now().to_msg(),
            )
        )
