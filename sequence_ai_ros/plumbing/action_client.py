"""An rclpy ActionClient whose rcl handle is used by one thread at a time.

rclpy 7.1.5 sends, takes and adds the handle to a wait set from whichever thread calls, without
a lock (ros2/rclpy#1123, fixed upstream after this release): a planner thread's request racing
the spinning threads can leave its future never completed, and a response handled before its
request is recorded is dropped as "unexpected" (both seen under load). A planner that waits for
a goal's acceptance, its cancel or its result needs those futures to complete.
"""

from __future__ import annotations

import threading
from typing import Any

from rclpy.action import ActionClient
from rclpy.action.client import ClientGoalHandle
from rclpy.node import Node
from rclpy.task import Future

__all__ = ["LockedActionClient"]


class LockedActionClient(ActionClient):
    """One re-entrant lock around every use of the handle and around handling responses;
    re-entrant so a feedback callback may send. Feedback callbacks must not block: `execute`
    holds the lock while it calls them."""

    def __init__(self, node: Node, action_type: Any, name: str) -> None:
        # Lock order: first; held while feedback callbacks run, so before any lock they take.
        # Made before the base class adds this client to the node: a thread spinning the node
        # meanwhile asks it for its entities at once.
        self._request_lock = threading.RLock()
        super().__init__(node, action_type, name)

    def send_goal_async(self, *args: Any, **kwargs: Any) -> Future:
        with self._request_lock:
            return super().send_goal_async(*args, **kwargs)

    def _cancel_goal_async(self, goal_handle: ClientGoalHandle) -> Future:
        with self._request_lock:
            return super()._cancel_goal_async(goal_handle)

    def _get_result_async(self, goal_handle: ClientGoalHandle) -> Future:
        with self._request_lock:
            return super()._get_result_async(goal_handle)

    def is_ready(self, wait_set: Any) -> bool:
        with self._request_lock:
            return super().is_ready(wait_set)

    def take_data(self) -> Any:
        with self._request_lock:
            return super().take_data()

    def add_to_wait_set(self, wait_set: Any) -> None:
        with self._request_lock:
            super().add_to_wait_set(wait_set)

    def get_num_entities(self) -> Any:
        with self._request_lock:
            return super().get_num_entities()

    async def execute(self, taken_data: Any) -> None:
        with self._request_lock:
            await super().execute(taken_data)
