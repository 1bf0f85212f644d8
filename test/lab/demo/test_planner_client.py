"""The planner's action client: every use of the rcl handle goes through one lock."""

from __future__ import annotations

import inspect
import re

from rclpy.action import ActionClient

from sequence_ai_ros.plumbing.action_client import LockedActionClient

# Methods of rclpy's ActionClient that touch `_client_handle` but not from a spinning thread
# or a planner's call at the same time as a take (construction, teardown, discovery).
_UNSHARED = {"__init__", "destroy", "server_is_ready", "__enter__", "__exit__"}


def _handle_users() -> set[str]:
    """Every ActionClient method whose source uses the rcl handle."""
    return {
        name for name, member in inspect.getmembers(ActionClient, inspect.isfunction)
        if re.search(r"\b_client_handle\b", inspect.getsource(member))
    } - _UNSHARED


def test_every_method_that_uses_the_handle_is_overridden_under_the_lock() -> None:
    """rclpy 7.1.5 uses the handle unlocked from the planner's and the executor's threads
    (ros2/rclpy#1123: a result whose future never completes); each such method is wrapped."""
    users = _handle_users()
    assert {"take_data", "add_to_wait_set", "_get_result_async", "send_goal_async"} <= users
    missing = sorted(n for n in users if n not in vars(LockedActionClient))
    assert not missing, f"ActionClient methods using the rcl handle without the lock: {missing}"



def test_the_lock_exists_before_the_client_joins_its_node(monkeypatch) -> None:
    """A thread spinning the node asks a new client for its entities as soon as the base class
    adds it: the lock must already be there (a bench's spinning probe died of it)."""
    asked: list[object] = []

    def joining(self: ActionClient, *args: object, **kwargs: object) -> None:
        # What the executor's thread does the moment the node holds the client.
        asked.append(self._request_lock)

    monkeypatch.setattr(ActionClient, "__init__", joining)
    LockedActionClient(None, object, "act")  # type: ignore[arg-type]
    assert len(asked) == 1
