"""ClientWatch: a goal whose every possible sender left the graph ends once, held; told by
callables, so no ROS graph is needed."""

from __future__ import annotations

import pytest

from sequence_ai_ros.goals import client_watch
from sequence_ai_ros.goals.client_watch import ClientWatch
from sequence_ai_ros.goals.stop_policy import StopCause


class _Runner:
    def __init__(self, goal_ids: list[bytes]) -> None:
        self.ids = goal_ids
        self.stopped: list[tuple[bytes, StopCause]] = []

    def goal_ids(self) -> list[bytes]:
        return self.ids

    def stop(self, goal_id: bytes, cause: StopCause) -> None:
        self.stopped.append((goal_id, cause))


def test_a_goal_is_gone_once_when_every_sender_it_had_left_the_graph() -> None:
    graph = [(1,), (2,)]
    watch = ClientWatch(lambda: list(graph), lambda: 0.0, lambda _: None)
    watch.accepted(b"goal")
    assert watch.gone([b"goal"], 0.0) == []
    graph[:] = [(2,)]
    assert watch.gone([b"goal"], 0.0) == []  # one of its possible senders is still there
    graph[:] = [(3,)]  # a client that arrived later did not send it
    assert watch.gone([b"goal"], 0.0) == [b"goal"]
    assert watch.gone([b"goal"], 0.0) == []


def test_orphans_end_held_with_their_cause_and_a_warning_and_a_zero_grace_is_off(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    now = [100.0]
    monkeypatch.setattr(client_watch.time, "monotonic", lambda: now[0])
    graph, grace, warnings = [(1,)], [0.0], []
    watch = ClientWatch(lambda: list(graph), lambda: grace[0], warnings.append)
    runner = _Runner([b"goal"])
    watch.accepted(b"goal")
    graph.clear()
    watch.end_orphans(runner)  # type: ignore[arg-type]
    assert runner.stopped == [] and warnings == []
    grace[0] = 2.0
    watch.end_orphans(runner)  # type: ignore[arg-type]
    now[0] = 101.9
    watch.end_orphans(runner)  # type: ignore[arg-type]
    assert runner.stopped == []
    now[0] = 102.0
    watch.end_orphans(runner)  # type: ignore[arg-type]
    assert runner.stopped == [(b"goal", StopCause.CLIENT_GONE)]
    assert len(warnings) == 1 and "end_goal_without_client_s" in warnings[0]
