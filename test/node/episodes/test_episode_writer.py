"""The episode writer on its own: a full queue drops and counts, a killed process leaves a file
that reads back to its last flushed chunk, and the messages stored are exactly the CDR of the
message. The folder's bound (record_max_mb) is in test_episode_files.py."""

from __future__ import annotations

import threading
from datetime import datetime, timezone
from pathlib import Path

import pytest
from rclpy.serialization import deserialize_message
from sensor_msgs.msg import JointState
from std_msgs.msg import Float64MultiArray, String
from support.episode_files import INSTRUCTION, KILLED_MESSAGES, killed_recording
from support.waiting import wait_for

from sequence_ai_lab.episodes import reader
from sequence_ai_ros.episodes import writer
from sequence_ai_ros.episodes.cdr import cdr_length
from sequence_ai_ros.episodes.recorder import episode_name

TOPIC = "/robot/sequence_ai/episode/command"


def _summary(stats: writer.WriterStats) -> dict[str, dict[str, str]]:
    return {reader.SUMMARY_RECORD: {"messages": str(stats.written),
                                    "dropped": str(stats.dropped)}}


def test_a_writer_that_falls_behind_drops_and_counts_and_never_blocks(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The writer thread is held inside its first message until released.
    release, inside = threading.Event(), threading.Event()
    serialize = writer.serialize_message

    def held(message: object) -> bytes:
        inside.set()
        release.wait()
        return serialize(message)

    monkeypatch.setattr(writer, "serialize_message", held)
    path = tmp_path / "episode.mcap"
    errors: list[str] = []
    totals: list[int] = []
    episode = writer.EpisodeWriter(path, errors.append, on_drop=totals.append, queue_messages=2)
    episode.metadata(reader.EPISODE_RECORD, {"topics": "/robot/sequence_ai/episode"})
    episode.put(TOPIC, Float64MultiArray(data=[0.0]))
    assert inside.wait(10.0)
    for k in range(1, 6):  # 2 fit in the queue, 3 are dropped: put never waits
        episode.put(TOPIC, Float64MultiArray(data=[float(k)]))
    assert episode.stats().dropped == 3 and totals == [1, 2, 3]
    release.set()
    episode.finish(_summary)
    assert episode.wait_closed(10.0)
    stats = episode.stats()
    assert (stats.written, stats.dropped, stats.error, errors) == (3, 3, "", [])
    recorded = reader.read(path)
    assert [list(m.message.data) for m in recorded.messages] == [[0.0], [1.0], [2.0]]
    assert recorded.summary == {"messages": "3", "dropped": "3"}


@pytest.mark.slow
def test_a_killed_process_leaves_a_file_that_reads_back(tmp_path: Path) -> None:
    path = killed_recording(tmp_path / "killed.mcap", "a" * 32)
    episode = reader.read(path)
    assert episode.cut and not episode.summary and not episode.finished
    assert episode.instruction == INSTRUCTION
    assert [m.message.data for m in episode.messages] == [str(k) for k in range(KILLED_MESSAGES)]
    assert {m.topic for m in episode.messages} == {"instruction"}


def test_an_unwritable_path_fails_at_once(tmp_path: Path) -> None:
    (tmp_path / "file").write_text("not a folder", encoding="utf-8")
    with pytest.raises(OSError):
        writer.EpisodeWriter(tmp_path / "file" / "episode.mcap", print)


def test_an_episode_is_named_by_start_model_and_instruction() -> None:
    started = datetime(2026, 12, 1, 17, 5, 9, 123456, tzinfo=timezone.utc)
    name = episode_name(started, "pi05-droid", "Put the cup in the sink, please!")
    assert name == "20261201T170509_123456Z_pi05-droid_put-the-cup-in-the-sink-please.mcap"
    assert episode_name(started, "m", "???").endswith("_m_goal.mcap")


@pytest.mark.parametrize("message", [
    JointState(name=["a", "b"], position=[1.0, 2.0]),
    JointState(),
    String(data="abc"),
    Float64MultiArray(data=[1.0, 2.0, 3.0]),
], ids=lambda m: type(m).__name__)
def test_the_stored_bytes_are_exactly_the_message(message: object) -> None:
    from rosbags.typesys import Stores, get_typestore

    from sequence_ai_ros.episodes.schemas import type_name

    data = writer.serialize_message(message)[: cdr_length(message)]
    assert deserialize_message(data, type(message)) == message
    # A strict reader refuses a single trailing byte more.
    get_typestore(Stores.ROS2_HUMBLE).deserialize_cdr(data, type_name(type(message)))


def test_a_goal_that_never_ran_leaves_a_file_with_its_goal_and_result(tmp_path: Path) -> None:
    import sequence_ai
    from sequence_ai_interfaces.action import Act
    from sequence_ai_ros.core.health import HealthRecord
    from sequence_ai_ros.core.node_config import NodeConfig
    from sequence_ai_ros.episodes.recorder import EpisodeRecorder
    from sequence_ai_ros.params.spec_table import SPECS

    values = {name: spec.default for name, spec in SPECS.items()}
    config = NodeConfig.from_values(values | {"record": "goals", "record_dir": str(tmp_path)})
    errors: list[str] = []
    recorder = EpisodeRecorder(
        node_name="/robot/sequence_ai", model=sequence_ai.Model(id="pi05-droid", control_hz=15.0),
        state_names=["j1"], period_s=1 / 15, health=HealthRecord(),
        live_config=lambda: config, error=errors.append, frames=dict,
    )
    goal = Act.Goal(instruction="stack the blocks", max_seconds=5.0)
    result = Act.Result(reason="preempted", stopped_early=True,
                        message="preempted by a newer goal; it never started")
    recorder.goal_ended(b"\x01" * 16, goal, result, None, "aborted")
    # Told again (the node failed while ending it): still one file.
    recorder.goal_ended(b"\x01" * 16, goal, result, None, "aborted")
    recorder.close(10.0)
    (path,) = wait_for(lambda: reader.episode_files(tmp_path), what="the episode file")
    episode = wait_for(lambda: (e := reader.read(path)) and not e.cut and e, what="its close")
    assert errors == [] and episode.episode["ran"] == "false"
    assert (episode.summary["status"], episode.summary["reason"]) == ("aborted", "preempted")
    assert [m.topic for m in episode.messages] == ["goal", "instruction", "result"]


def test_the_recorder_records_the_runs_discarded_and_refused_chunks_from_its_events(
    tmp_path: Path,
) -> None:
    import time

    import sequence_ai
    from sequence_ai import Ending
    from sequence_ai.events import (
        ChunkDiscarded,
        ChunkRefused,
        HoldCommanded,
        RunEnded,
        UnderrunEnded,
    )
    from sequence_ai_interfaces.action import Act
    from sequence_ai_ros.core.health import HealthRecord
    from sequence_ai_ros.core.node_config import NodeConfig
    from sequence_ai_ros.episodes.recorder import EpisodeRecorder
    from sequence_ai_ros.params.spec_table import SPECS

    values = {name: spec.default for name, spec in SPECS.items()}
    config = NodeConfig.from_values(values | {"record": "goals", "record_dir": str(tmp_path)})
    recorder = EpisodeRecorder(
        node_name="/robot/sequence_ai", model=sequence_ai.Model(id="pi05-droid", control_hz=15.0),
        state_names=["j1"], period_s=1 / 15, health=HealthRecord(),
        live_config=lambda: config, error=print, frames=dict,
    )
    now = time.monotonic()
    # No goal runs: an event is not recorded anywhere.
    recorder.on_event(ChunkDiscarded(time=now, sequence=0))
    goal = Act.Goal(instruction="stack the blocks", max_seconds=5.0)
    recorder.goal_started(b"\x02" * 16, goal, config)
    for event in (
        ChunkDiscarded(time=now, sequence=3),
        ChunkRefused(time=now, sequence=4),
        UnderrunEnded(time=now, waited_s=0.25),
        HoldCommanded(time=now, error=None),
        RunEnded(time=now, ending=Ending.INTERRUPTED, error=None),
    ):
        recorder.on_event(event)
    result = Act.Result(reason="canceled", stopped_early=True, message="canceled")
    recorder.goal_ended(b"\x02" * 16, goal, result, None, "canceled")
    recorder.close(10.0)
    (path,) = reader.episode_files(tmp_path)
    episode = reader.read(path)
    infos = [(m.message.message, {kv.key: kv.value for kv in m.message.values})
             for m in episode.on("chunk/info")]
    assert [(message, values["sequence"]) for message, values in infos] == [
        ("discarded", "3"), ("refused", "4")]
    assert infos[0][1]["reason"] == "overtaken"
    assert [m.message.name for m in episode.on("event")] == ["underrun", "hold_called",
                                                             "run_ended"]
    assert episode.on("event")[2].message.message == "interrupted"
    counts = {k: episode.summary[f"recorded_{k}"]
              for k in ("discarded", "chunks_refused", "underruns", "chunks")}
    assert counts == {"discarded": "1", "chunks_refused": "1", "underruns": "1", "chunks": "0"}
