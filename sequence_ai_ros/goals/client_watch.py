"""The safety net for a vanished action client (`end_goal_without_client_s`, docs/node.md
"A goal whose client is gone").

ROS 2 lets a goal run on when its action client is gone: nothing in the action protocol ties a
goal to its client, and rclpy does not tell the server which client sent a goal. What the graph
does show is who subscribes to the action's feedback — every action client does. So a goal's
possible senders are the feedback subscribers present when it was accepted; once none of them
has been in the graph for the grace time, the goal's client is certainly gone.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable

from sequence_ai_ros.goals.runner import GoalRunner
from sequence_ai_ros.goals.stop_policy import StopCause

__all__ = ["ClientWatch"]

Gid = tuple[int, ...]


class ClientWatch:
    """Each goal's possible senders, and since when none of them is in the graph. Used on the
    executor's thread only (the goal and timer callbacks). Told by the node, not holding it:
    `subscribers` lists the action's feedback subscribers in the graph, `grace_s` reads
    end_goal_without_client_s, `warn` logs."""

    def __init__(
        self,
        subscribers: Callable[[], Iterable[Gid]],
        grace_s: Callable[[], float],
        warn: Callable[[str], object],
    ) -> None:
        self._graph_subscribers = subscribers
        self._grace_s = grace_s
        self._warn = warn
        # Per goal id: the feedback subscribers when it was accepted (empty: none discovered
        # yet, looked for again); since when none of them is in the graph.
        self._senders: dict[bytes, frozenset[Gid]] = {}
        self._gone_since: dict[bytes, float] = {}
        # Goals already reported gone (ending now): reported once.
        self._reported: set[bytes] = set()

    def accepted(self, goal_id: bytes) -> None:
        self._senders[goal_id] = self._subscribers()

    def end_orphans(self, runner: GoalRunner | None) -> None:
        """End, held, each goal whose every possible sender has been gone from the graph for
        the node's end_goal_without_client_s (0: off, as ROS 2 does)."""
        grace_s = self._grace_s()
        if grace_s <= 0 or runner is None:
            return
        for goal_id in self.gone(runner.goal_ids(), grace_s):
            self._warn(
                f"a goal's action client left the graph {grace_s:g} s ago "
                "(end_goal_without_client_s): the goal ends, held"
            )
            runner.stop(goal_id, StopCause.CLIENT_GONE)

    def gone(self, goal_ids: Iterable[bytes], grace_s: float) -> list[bytes]:
        """Of the goals `goal_ids` (the ones not ended), those whose every possible sender has
        been out of the graph for `grace_s`; forgets the others' entries."""
        live = set(goal_ids)
        for known in set(self._senders) - live:
            self._senders.pop(known, None)
            self._gone_since.pop(known, None)
        self._reported &= live
        live -= self._reported
        if not live:
            return []
        present = self._subscribers()
        now = time.monotonic()
        ended = []
        for goal_id in live:
            senders = self._senders.get(goal_id) or present
            # A goal accepted before its sender's subscription was discovered: now it is.
            self._senders[goal_id] = senders
            if not senders or senders & present:
                self._gone_since.pop(goal_id, None)
                continue
            since = self._gone_since.setdefault(goal_id, now)
            if now - since >= grace_s:
                ended.append(goal_id)
                self._reported.add(goal_id)
        return ended

    def _subscribers(self) -> frozenset[Gid]:
        return frozenset(self._graph_subscribers())
