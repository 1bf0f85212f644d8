"""A trial's verdict written into its episode file, so an evaluation's episodes are a labelled
dataset: a `sequence_ai.verdict` metadata record (success, reason, judge, condition, seed, ...).

MCAP files are written once: the labelled file is a copy with every record of the original and
the verdict, renamed over it (a kill leaves the original, never half a file).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

from mcap.reader import make_reader
from mcap.writer import CompressionType, Writer

from sequence_ai_lab.episodes.reader import EpisodeError, read
from sequence_ai_ros.episodes.files import VERDICT_RECORD

# Beside an evaluation's episodes: what a killed run recorded but never judged.
UNJUDGED_DIR = "unjudged"


def label(path: Path, verdict: Mapping[str, str]) -> None:
    """Add (or replace) the verdict record of the closed episode file `path`."""
    temporary = path.with_name(path.name + ".labelling")
    with path.open("rb") as source, temporary.open("wb") as target:
        reader = make_reader(source)
        header = reader.get_header()
        writer = Writer(target, compression=CompressionType.ZSTD)
        writer.start(profile=header.profile, library=header.library)
        schemas: dict[int, int] = {}
        channels: dict[int, int] = {}
        for schema, channel, message in reader.iter_messages(log_time_order=False):
            if schema is not None and schema.id not in schemas:
                schemas[schema.id] = writer.register_schema(schema.name, schema.encoding,
                                                            schema.data)
            if channel.id not in channels:
                channels[channel.id] = writer.register_channel(
                    channel.topic, channel.message_encoding,
                    schemas.get(channel.schema_id, 0), dict(channel.metadata))
            writer.add_message(channels[channel.id], message.log_time, message.data,
                               message.publish_time, message.sequence)
        for record in reader.iter_metadata():
            if record.name != VERDICT_RECORD:
                writer.add_metadata(record.name, dict(record.metadata))
        writer.add_metadata(VERDICT_RECORD, {k: str(v) for k, v in verdict.items()})
        for attachment in reader.iter_attachments():
            writer.add_attachment(attachment.create_time, attachment.log_time,
                                  attachment.name, attachment.media_type, attachment.data)
        writer.finish()
    os.replace(temporary, path)


def set_aside_unjudged(folder: Path, done: set[tuple[str, int]]) -> list[Path]:
    """Move every episode of `folder` that no recorded trial judged — no verdict, or one of an
    (arm, seed) not in `done` — into `folder/unjudged/`: what a killed run's last trial
    recorded (that trial runs again). Moved, not deleted: kept for a look, out of the labelled
    dataset. The files moved, at their new place."""
    moved: list[Path] = []
    for path in sorted(folder.glob("*.mcap")):
        try:
            verdict = read(path, messages=False).verdict
        except EpisodeError:
            verdict = {}
        if verdict.get("seed", "").lstrip("-").isdigit() and (
                verdict.get("arm", ""), int(verdict["seed"])) in done:
            continue
        target = folder / UNJUDGED_DIR / path.name
        target.parent.mkdir(exist_ok=True)
        os.replace(path, target)
        moved.append(target)
    for partial in folder.glob("*.labelling"):
        partial.unlink()  # a label a kill interrupted: the original is still there
    return moved
