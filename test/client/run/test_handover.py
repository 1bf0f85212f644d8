"""Policy.hand_over(): the running act() takes a new instruction without stopping, drops the
old rows at the new instruction's first chunk, and ends by the new max_seconds."""

from __future__ import annotations

import threading

import pytest
from support.policy_support import PATIENCE_S, Robot, open_policy

from sequence_ai.events import (
    ChunkInstalled,
    HoldCommanded,
    InstructionHandedOver,
    RowPlayed,
    RunEvent,
    UnderrunBegan,
)


def test_hand_over_keeps_playing_and_drops_old_rows_at_the_first_new_chunk(gw) -> None:
    robot = Robot()
    events: list[RunEvent] = []
    handed = threading.Event()
    with open_policy(gw, control_hz=60) as policy:

        def on_chunk(prediction) -> None:
            robot.on_chunk(prediction)
            if len(robot.chunks) == 2 and not handed.is_set():
                assert policy.hand_over("put it back", max_seconds=PATIENCE_S)
                handed.set()

        outcome = policy.act(
            "pick it up", robot.observe, robot.act, max_seconds=PATIENCE_S,
            until=lambda: len(robot.chunks) >= 5, observers=[events.append],
            **{**robot.callbacks(), "on_chunk": on_chunk},
        )
        assert policy.instruction is None
    assert outcome.reason == "until" and robot.holds == 1
    installed = [e for e in events if isinstance(e, ChunkInstalled)]
    texts = [e.prediction.observation.instruction for e in installed]
    first_new = texts.index("put it back")
    assert set(texts[:first_new]) == {"pick it up"}
    assert set(texts[first_new:]) == {"put it back"}
    takeovers = [e for e in events if isinstance(e, InstructionHandedOver)]
    assert len(takeovers) == 1
    takeover = takeovers[0]
    assert (takeover.previous, takeover.instruction) == ("pick it up", "put it back")
    # Published right after the new chunk's installation, before any row of it plays.
    at = events.index(takeover)
    assert events[at - 1] is installed[first_new]
    # No hold and no underrun between the two instructions: only the ending holds.
    holds = [i for i, e in enumerate(events) if isinstance(e, HoldCommanded)]
    assert holds and min(holds) > at
    assert not any(isinstance(e, UnderrunBegan) for e in events[:at])
    # Every row played after it is of the new chunk or a later one.
    chunk_after = {e.chunk for e in events[at:] if isinstance(e, RowPlayed)}
    assert min(chunk_after) >= installed[first_new].number


@pytest.mark.slow  # over half a second of wall time
def test_hand_over_moves_the_deadline(gw) -> None:
    robot = Robot()
    with open_policy(gw, control_hz=60) as policy:

        def on_chunk(prediction) -> None:
            robot.on_chunk(prediction)
            if len(robot.chunks) == 1:
                assert policy.hand_over("stop soon", max_seconds=0.5)

        outcome = policy.act(
            "pick it up", robot.observe, robot.act, max_seconds=PATIENCE_S,
            **{**robot.callbacks(), "on_chunk": on_chunk},
        )
    assert outcome.reason == "timeout" and robot.holds == 1


def test_hand_over_without_a_run_changes_nothing(gw) -> None:
    with open_policy(gw) as policy:
        assert not policy.hand_over("anything", max_seconds=1.0)
        assert policy.instruction is None



def test_a_hand_over_after_the_run_came_to_rest_for_its_deadline_plays_the_new_step(gw) -> None:
    # max_seconds shorter than the first chunk: it is installed coming to rest by then, and
    # the hand-over arrives as its last command plays. The run must fetch the new
    # instruction's chunk from rest, not sit the new max_seconds out holding still.
    robot = Robot()
    installed: list[ChunkInstalled] = []
    handed = threading.Event()
    with open_policy(gw) as policy:

        def act(row: list[float]) -> None:
            robot.act(row)
            if len(installed) == 1 and len(robot.acts) == installed[0].commands:
                assert policy.hand_over("put it back", max_seconds=PATIENCE_S)
                handed.set()

        def observe(event: RunEvent) -> None:
            if isinstance(event, ChunkInstalled):
                installed.append(event)

        outcome = policy.act(
            "pick it up", robot.observe, act, max_seconds=0.4, prefetch=False,
            until=lambda: any(
                e.prediction.observation.instruction == "put it back" for e in installed
            ),
            observers=[observe], **robot.callbacks(),
        )
    assert handed.is_set()
    assert outcome.reason == "until", outcome
    assert installed[-1].prediction.observation.instruction == "put it back"
