"""Episodes to a LeRobot dataset: one frame per row the arm played (`action`), with the
observation the model had last seen (`observation.state`, its views' images) and the
instruction in force as the task; `next.done` on its last frame and, for episodes an evaluation
labelled, `next.success` (the verdict, on the last frame). The conversion is ours; the dataset
is written by the `lerobot` library's own writer (Python >= 3.12 and torch: `make lerobot-venv`)."""

from __future__ import annotations

import bisect
import io
import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from sequence_ai_lab.episodes.reader import EpisodeFile, Message, read

STATE = "observation.state"
ACTION = "action"
IMAGE_PREFIX = "observation.images."
DONE = "next.done"
SUCCESS = "next.success"


@dataclass
class EpisodeFrames:
    """One episode as LeRobot frames: frame k has `timestamps[k]` (s from the first row),
    `states[k]`, `actions[k]`, `tasks[k]` and, per view, the JPEG `images[view][k]`."""

    fps: float
    state_names: list[str]
    timestamps: list[float] = field(default_factory=list)
    states: list[list[float]] = field(default_factory=list)
    actions: list[list[float]] = field(default_factory=list)
    tasks: list[str] = field(default_factory=list)
    images: dict[str, list[bytes]] = field(default_factory=dict)
    success: bool | None = None  # the evaluation's verdict; None: not labelled

    def __len__(self) -> int:
        return len(self.actions)


def _played_rows(episode: EpisodeFile) -> list[tuple[int, list[float]]]:
    """(time ns, the row as the arm got it) of each row played before the goal's hold: one per
    step command (its gripper value is published right after it), or each point of a chunk's
    trajectory until the next one replaced it (with the gripper value last sent)."""
    holds = [m.log_time_ns for m in episode.on("event") if m.message.name == "hold"]
    until = holds[0] if holds else None
    commands = [m for m in episode.on("command") if until is None or m.log_time_ns < until]
    grippers = episode.on("command/gripper")
    gripper_times = [m.log_time_ns for m in grippers]

    def gripper(k: int) -> list[float]:
        return [float(v) for v in grippers[k].message.data] if 0 <= k < len(grippers) else []

    rows: list[tuple[int, list[float]]] = []
    for index, message in enumerate(commands):
        msg = message.message
        kind = message.type_name.rsplit("/", 1)[-1]
        after = commands[index + 1].log_time_ns if index + 1 < len(commands) else None
        if kind in ("Float64MultiArray", "JointState"):
            values = msg.data if kind == "Float64MultiArray" else (
                msg.position if len(msg.position) else msg.velocity
            )
            k = bisect.bisect_left(gripper_times, message.log_time_ns)
            same_row = k < len(grippers) and (after is None or gripper_times[k] < after)
            rows.append((message.log_time_ns,
                         [float(v) for v in values] + (gripper(k) if same_row else [])))
            continue
        stamp = msg.header.stamp.sec * 10**9 + msg.header.stamp.nanosec
        start = stamp or message.log_time_ns
        for point in msg.points:
            due = start + point.time_from_start.sec * 10**9 + point.time_from_start.nanosec
            if after is not None and due >= after:
                break
            k = bisect.bisect_right(gripper_times, due) - 1
            rows.append((due, [float(v) for v in point.positions] + gripper(k)))
    return rows


def _latest(messages: Sequence[Message], times: Sequence[int], t: int) -> Message | None:
    """The last of `messages` (sorted by `times`) logged at or before `t`."""
    k = bisect.bisect_right(times, t) - 1
    return messages[k] if k >= 0 else None


def episode_frames(episode: EpisodeFile) -> EpisodeFrames:
    """The frames of one episode (none when no row was played)."""
    row = json.loads(episode.episode.get("catalogue_row", "{}"))
    frames = EpisodeFrames(fps=float(row.get("control_hz") or 15.0),
                           state_names=episode.state_names(),
                           success=(episode.verdict.get("success") == "true"
                                    if episode.verdict else None))
    rows = _played_rows(episode)
    states = episode.on("observation/state")
    state_times = [m.log_time_ns for m in states]
    views = sorted(t.split("/", 1)[1] for t in episode.topics()
                   if t.startswith("observation/") and t not in ("observation/state",
                                                                  "observation/info"))
    view_messages = {v: episode.on(f"observation/{v}") for v in views}
    view_times = {v: [m.log_time_ns for m in ms] for v, ms in view_messages.items()}
    instructions = episode.on("instruction")
    instruction_times = [m.log_time_ns for m in instructions]
    first = rows[0][0] if rows else 0
    for t, action in rows:
        state = _latest(states, state_times, t)
        images = {v: _latest(view_messages[v], view_times[v], t) for v in views}
        if state is None or any(image is None for image in images.values()):
            continue  # a row before any observation was recorded (none is, in practice)
        instruction = _latest(instructions, instruction_times, t)
        frames.timestamps.append((t - first) / 1e9)
        frames.states.append([float(v) for v in state.message.position])
        frames.actions.append(action)
        frames.tasks.append(instruction.message.data if instruction else episode.instruction)
        for view, image in images.items():
            assert image is not None
            frames.images.setdefault(view, []).append(bytes(image.message.data))
    return frames


def features(frames: EpisodeFrames, image_shapes: dict[str, tuple[int, int, int]],
             labelled: bool = False) -> dict[str, dict[str, object]]:
    """LeRobot's feature description of these frames (`labelled`: with next.success)."""
    described: dict[str, dict[str, object]] = {
        STATE: {"dtype": "float32", "shape": (len(frames.states[0]),),
                "names": frames.state_names[: len(frames.states[0])]},
        ACTION: {"dtype": "float32", "shape": (len(frames.actions[0]),),
                 "names": frames.state_names[: len(frames.actions[0])]},
    }
    for flag in (DONE, SUCCESS) if labelled else (DONE,):
        described[flag] = {"dtype": "bool", "shape": (1,), "names": None}
    for view, shape in image_shapes.items():
        described[IMAGE_PREFIX + view] = {
            "dtype": "image", "shape": shape, "names": ["height", "width", "channels"],
        }
    return described


def export_lerobot(paths: Sequence[Path], out: Path, *, repo_id: str) -> str:
    """Write the episodes that played rows as a LeRobot dataset at `out`; what was written."""
    import numpy as np
    from lerobot.datasets.lerobot_dataset import LeRobotDataset
    from PIL import Image

    def decode(jpeg: bytes) -> np.ndarray:
        return np.asarray(Image.open(io.BytesIO(jpeg)).convert("RGB"))

    played = [(path, frames) for path in paths if len(frames := episode_frames(read(path)))]
    if not played:
        raise SystemExit(f"no episode in {len(paths)} files played a row: nothing to export")
    episodes, left_out = with_verdicts(played)
    first = episodes[0]
    labelled = first.success is not None
    shapes = {v: decode(jpegs[0]).shape for v, jpegs in first.images.items()}
    dataset = LeRobotDataset.create(
        repo_id=repo_id, fps=round(first.fps), root=out, robot_type="sequence_ai",
        features=features(first, shapes, labelled), use_videos=False,
    )
    for frames in episodes:
        for k in range(len(frames)):
            frame: dict[str, object] = {
                STATE: np.asarray(frames.states[k], dtype=np.float32),
                ACTION: np.asarray(frames.actions[k], dtype=np.float32),
                "task": frames.tasks[k],
                DONE: np.asarray([k == len(frames) - 1]),
            }
            if labelled:
                frame[SUCCESS] = np.asarray([k == len(frames) - 1 and bool(frames.success)])
            for view, jpegs in frames.images.items():
                frame[IMAGE_PREFIX + view] = decode(jpegs[k])
            dataset.add_frame(frame)
        dataset.save_episode()
    dataset.finalize()
    total = sum(len(e) for e in episodes)
    written = f"{len(episodes)} episodes, {total} frames at {first.fps:g} fps in {out}"
    if left_out:
        written += (f"; left out {len(left_out)} without a verdict (next.success needs one): "
                    + ", ".join(p.name for p in left_out))
    return written


def with_verdicts(
    played: Sequence[tuple[Path, EpisodeFrames]],
) -> tuple[list[EpisodeFrames], list[Path]]:
    """What the export writes, and the files it leaves out: every episode when none carries a
    verdict; else those that do, labelled (next.success is every frame's or none's, and a
    verdict is never guessed)."""
    judged = [frames for _, frames in played if frames.success is not None]
    if not judged:
        return [frames for _, frames in played], []
    return judged, [path for path, frames in played if frames.success is None]
