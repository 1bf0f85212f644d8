"""Episode files built in a test: a small finished episode, one a killed writer left unfinished,
a user's bag, and each kind of entry the episode tools must refuse with one line."""

from __future__ import annotations

import base64
import os
import signal
import struct
import subprocess
import sys
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING

from support.waiting import wait_for

if TYPE_CHECKING:
    from sequence_ai_ros.episodes.recorder import EpisodeRecorder

TOPICS = "/robot/sequence_ai/episode"
INSTRUCTION = "stack the blocks"
KILLED_MESSAGES = 100
CHUNK_OPCODE = 0x06


def identity(recorder: str) -> dict[str, str]:
    from sequence_ai_ros.episodes.files import RECORDER

    return {"recorder": RECORDER, "recorder_id": recorder}


def write_episode(
    path: Path,
    recorder: str | None,
    *,
    messages: int = 10,
    pad_bytes: int = 0,
    record: Mapping[str, str] | None = None,
    summary: Mapping[str, str] | None = None,
) -> Path:
    """A finished episode of `messages` instructions; `pad_bytes` of incompressible metadata
    make it that much bigger. `recorder` None: written without the recorder's record. `record`
    and `summary` override fields of the episode's records (its model, its start...)."""
    from std_msgs.msg import String

    from sequence_ai_ros.episodes.files import EPISODE_RECORD, SUMMARY_RECORD
    from sequence_ai_ros.episodes.writer import EpisodeWriter

    errors: list[str] = []
    writer = EpisodeWriter(
        path, errors.append, identity=identity(recorder) if recorder is not None else None
    )
    writer.metadata(
        EPISODE_RECORD,
        {"topics": TOPICS, "instruction": INSTRUCTION, "model": "pi05-droid", **(record or {})},
    )
    if pad_bytes:
        writer.metadata(
            "pad", {"bytes": base64.b64encode(os.urandom(pad_bytes * 3 // 4)).decode("ascii")}
        )
    for k in range(messages):
        writer.put(f"{TOPICS}/instruction", String(data=str(k)))
    writer.finish(
        lambda stats: {
            SUMMARY_RECORD: {
                "status": "succeeded",
                "reason": "completed",
                "messages": str(stats.written),
                "dropped": str(stats.dropped),
                **(summary or {}),
            }
        }
    )
    assert writer.wait_closed(30.0) and not errors, errors
    return path


def users_bag(path: Path, size: int, *, like_episode: bool = False) -> Path:
    """A valid MCAP file the recorder did not write (`like_episode`: with an episode's record,
    never the recorder's)."""
    from mcap.writer import Writer

    from sequence_ai_ros.episodes.files import EPISODE_RECORD

    with open(path, "wb") as stream:
        writer = Writer(stream)
        writer.start(profile="ros2", library="a user's own tool")
        if like_episode:
            writer.add_metadata(EPISODE_RECORD, {"topics": "/mine", "instruction": "mine"})
        writer.add_metadata(
            "pad", {"bytes": base64.b64encode(os.urandom(size * 3 // 4)).decode("ascii")}
        )
        writer.finish()
    return path


_KILLED_CHILD = """
import sys, time
from pathlib import Path
from std_msgs.msg import String
from sequence_ai_ros.episodes.files import RECORDER
from sequence_ai_ros.episodes.files import EPISODE_RECORD
from sequence_ai_ros.episodes.writer import EpisodeWriter
episode = EpisodeWriter(Path(sys.argv[1]), print,
                        identity={"recorder": RECORDER, "recorder_id": sys.argv[2]})
episode.metadata(EPISODE_RECORD, {"topics": sys.argv[3], "instruction": sys.argv[4]})
for k in range(int(sys.argv[5])):
    episode.put(sys.argv[3] + "/instruction", String(data=str(k)))
print("written", flush=True)
time.sleep(600)
"""


def killed_recording(
    path: Path, recorder: str, while_alive: Callable[[Path], None] | None = None
) -> Path:
    """A writer SIGKILLed once its messages reached the disk: a file without its summary.
    `while_alive` runs while the writer still holds the file."""
    from sequence_ai_ros.episodes.files import layout, open_regular

    def flushed() -> bool:
        from sequence_ai_lab.episodes import reader
        from sequence_ai_ros.episodes.files import EpisodeError

        try:
            return len(reader.read(path).messages) == KILLED_MESSAGES
        except EpisodeError:
            return False  # not there yet, or only its first records

    child = subprocess.Popen(
        [
            sys.executable,
            "-c",
            _KILLED_CHILD,
            str(path),
            recorder,
            TOPICS,
            INSTRUCTION,
            str(KILLED_MESSAGES),
        ],
        stdout=subprocess.PIPE,
        text=True,
        env=dict(os.environ),
    )
    try:
        assert child.stdout is not None and child.stdout.readline().strip() == "written"
        # Flushed within the writer's flush period of the first message.
        wait_for(flushed, timeout_s=30.0, what="the killed writer's chunk on disk")
        if while_alive is not None:
            while_alive(path)
    finally:
        child.send_signal(signal.SIGKILL)
        child.wait(30.0)
    with open_regular(path) as stream:
        assert not layout(path, stream).finished
    return path


def first_chunk(path: Path) -> tuple[int, int]:
    """The offset and length of a file's first chunk record."""
    data = path.read_bytes()
    offset = 8
    while offset < len(data):
        opcode, length = struct.unpack_from("<BQ", data, offset)
        if opcode == CHUNK_OPCODE:
            return offset, length
        offset += 9 + length
    raise AssertionError(f"{path} has no chunk")


def bad_entries(folder: Path, recorder: str) -> Mapping[str, Path]:
    """Each kind of `*.mcap` entry that is not a readable episode, by name (the missing one
    is only a path)."""
    made = {
        "missing": folder / "missing.mcap",
        "directory": folder / "a_directory.mcap",
        "zero_bytes": folder / "zero_bytes.mcap",
        "text": folder / "notes.mcap",
        "magic_only": folder / "magic_only.mcap",
        "corrupted_chunk": folder / "corrupted_chunk.mcap",
        "fifo": folder / "a_fifo.mcap",
    }
    made["directory"].mkdir()
    made["zero_bytes"].write_bytes(b"")
    made["text"].write_text("these are my notes, not a recording\n", encoding="utf-8")
    made["magic_only"].write_bytes(b"\x89MCAP0\r\n")
    good = write_episode(made["corrupted_chunk"], recorder)
    offset, length = first_chunk(good)
    data = bytearray(good.read_bytes())
    data[offset + 9 + length // 2] ^= 0xFF  # a flipped byte inside the compressed messages
    good.write_bytes(bytes(data))
    os.mkfifo(made["fifo"])
    return made


def start_recorder(
    folder: Path, info: Callable[[str], object], error: Callable[[str], object]
) -> EpisodeRecorder:
    """An `EpisodeRecorder` recording into `folder`, as a node's configure makes it (its start
    repairs the folder's unfinished files on a thread of its own)."""
    import sequence_ai
    from sequence_ai_ros.core.health import HealthRecord
    from sequence_ai_ros.core.node_config import NodeConfig
    from sequence_ai_ros.episodes.recorder import EpisodeRecorder
    from sequence_ai_ros.params.spec_table import SPECS

    values = {name: spec.default for name, spec in SPECS.items()}
    config = NodeConfig.from_values(values | {"record": "goals", "record_dir": str(folder)})
    return EpisodeRecorder(
        node_name="/robot/sequence_ai",
        model=sequence_ai.Model(id="pi05-droid", control_hz=15.0),
        state_names=["j1"],
        period_s=1 / 15,
        health=HealthRecord(),
        live_config=lambda: config,
        error=error,
        frames=dict,
        info=info,
    )


def opens_in_mcap_and_rosbags(path: Path) -> int:
    """The messages of a file as `rosbags` decodes them, once `mcap` read its summary (either
    raises on a file without one)."""
    from mcap.reader import make_reader
    from rosbags.highlevel import AnyReader

    with open(path, "rb") as stream:
        summary = make_reader(stream).get_summary()
    assert summary is not None and summary.statistics is not None, f"{path} has no summary"
    with AnyReader([path]) as bag:
        decoded = [bag.deserialize(raw, c.msgtype) for c, _, raw in bag.messages()]
    assert len(decoded) == summary.statistics.message_count
    return len(decoded)
