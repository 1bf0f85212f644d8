"""Open-loop replay: each recorded request's observation (the JPEGs and state as sent, and the
instruction) sent again to another model, its chunk set beside the recorded one.

    python -m sequence_ai_lab.episodes replay EPISODE_OR_DIR... --model M --out DIR

Both chunks are taken as absolute joint targets (a delta model's rows offset the observation's
joints), so models of different action spaces compare. Per joint and per episode: MSE, MAE and
range-normalised MSE (MSE over the squared range of the recorded rows of that joint) of the
predicted rows against the recorded rows of the same observation, over the rows both have.
replay.json names each episode by its content hash, the model id and the catalogue revision;
replay_<episode>.png draws the recorded state, the recorded and predicted rows, and the request
points. A low open-loop error is not success: it says the model answers the recorded
observations as the recorded model did, not what would happen once its own actions change what
it sees next.
"""

from __future__ import annotations

import argparse
import base64
import contextlib
import dataclasses
import hashlib
import json
import math
import os
import queue
import sys
import time
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field
from pathlib import Path

import sequence_ai
from sequence_ai_lab.episodes.reader import EpisodeFile, episode_files, read
from sequence_ai_ros.episodes.files import EpisodeError

REPLAY_FILE = "replay.json"
# Each request in flight holds a connection and its episode's observations: more than this is
# no faster against one service and only costs memory.
MAX_IN_FLIGHT = 16


@dataclass
class Request:
    """One recorded request: its capture time, what was sent, and the rows that came back."""

    captured_ns: int
    observation: sequence_ai.Observation
    recorded: list[list[float]] | None  # None: its answer was not installed (discarded)
    predicted: list[list[float]] | None = None


@dataclass
class JointErrors:
    """Sums over the compared rows of one joint (one action dimension)."""

    squared: float = 0.0
    absolute: float = 0.0
    count: int = 0
    low: float = math.inf
    high: float = -math.inf

    def add(self, recorded: float, predicted: float) -> None:
        self.squared += (predicted - recorded) ** 2
        self.absolute += abs(predicted - recorded)
        self.count += 1
        self.low, self.high = min(self.low, recorded), max(self.high, recorded)

    def figures(self) -> dict[str, float | None]:
        if not self.count:
            return {"mse": None, "mae": None, "nmse": None, "range": None}
        mse = self.squared / self.count
        span = self.high - self.low
        return {"mse": mse, "mae": self.absolute / self.count,
                "nmse": mse / span**2 if span > 0 else None, "range": span}


@dataclass
class EpisodeReplay:
    """One episode's replay: what it is, how many requests, and its errors per joint."""

    file: str
    sha256: str
    recorded_model: str
    instruction: str
    requests: int
    compared: int
    joints: dict[str, dict[str, float | None]] = field(default_factory=dict)
    mse: float | None = None
    mae: float | None = None
    nmse: float | None = None


def content_hash(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as stream:
        for block in iter(lambda: stream.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def _stamp_ns(message: object) -> int:
    stamp = message.header.stamp  # type: ignore[attr-defined]
    return int(stamp.sec) * 1_000_000_000 + int(stamp.nanosec)


def requests_of(episode: EpisodeFile, split: tuple[int, int] | None) -> list[Request]:
    """The episode's requests in order, rebuilt as they were sent: each view's JPEG bytes, the
    state (joints, then gripper, as `split` of the recorded model's layout says) and the
    instruction in force when they were captured."""
    images: dict[int, list[sequence_ai.ImageFrame]] = {}
    states: dict[int, list[float]] = {}
    instructions: list[tuple[int, str]] = []
    chunks: dict[int, list[list[float]]] = {}
    for m in episode.messages:
        if m.topic == "instruction":
            instructions.append((m.log_time_ns, str(m.message.data)))
        elif m.topic == "observation/state":
            states[_stamp_ns(m.message)] = [float(v) for v in m.message.position]
        elif m.topic.startswith("observation/") and m.topic != "observation/info":
            frame = sequence_ai.ImageFrame(
                view=m.topic.split("/", 1)[1],
                data=base64.b64encode(bytes(m.message.data)).decode("ascii"),
            )
            images.setdefault(_stamp_ns(m.message), []).append(frame)
        elif m.topic == "chunk":
            chunks[_stamp_ns(m.message)] = [[float(v) for v in p.positions]
                                            for p in m.message.points]
    requests = []
    for captured in sorted(states):
        said = [text for t, text in instructions if t <= captured]
        state = states[captured]
        joints = split[0] if split else len(state)
        proprio = sequence_ai.Proprioception(
            joint_positions=state[:joints], gripper=state[joints:] or None
        )
        observation = sequence_ai.Observation(
            images=images.get(captured, []), proprioception=proprio,
            instruction=said[-1] if said else episode.instruction,
        )
        requests.append(Request(captured, observation, chunks.get(captured)))
    return requests


def compare(requests: Sequence[Request], names: Sequence[str]) -> tuple[
    dict[str, JointErrors], int
]:
    """Per-joint errors over the rows both the recorded and the predicted chunk have."""
    joints: dict[str, JointErrors] = {}
    compared = 0
    for request in requests:
        if request.recorded is None or request.predicted is None:
            continue
        compared += 1
        for recorded, predicted in zip(request.recorded, request.predicted):
            for j, (r, p) in enumerate(zip(recorded, predicted)):
                name = names[j] if j < len(names) else f"dim{j + 1}"
                joints.setdefault(name, JointErrors()).add(r, p)
    return joints, compared


def _pooled(joints: dict[str, JointErrors]) -> tuple[float | None, float | None, float | None]:
    count = sum(e.count for e in joints.values())
    if not count:
        return None, None, None
    nmse = [f["nmse"] for e in joints.values() if (f := e.figures())["nmse"] is not None]
    return (sum(e.squared for e in joints.values()) / count,
            sum(e.absolute for e in joints.values()) / count,
            sum(nmse) / len(nmse) if nmse else None)  # type: ignore[arg-type]


def joint_positions(rows: list[list[float]], model: sequence_ai.Model | None,
                    observation: sequence_ai.Observation) -> list[list[float]]:
    """A chunk's rows as absolute joint targets (what the arm is told), so models of different
    action spaces compare: a delta model's rows offset the observation's joints by the
    catalogue's verified conversion; absolute rows, or rows with no conversion, as they are."""
    if model is None or model.action_space == "joint_absolute" or not rows:
        return rows
    chunk = sequence_ai.ActionChunk(
        steps=rows, robot=model.robot or "", action_space=model.action_space or "",
        action_dim=len(rows[0]), control_frequency_hz=model.control_hz or 0.0,
        covers_seconds=len(rows) / (model.control_hz or 1.0),
    )
    try:
        return [list(r) for r in sequence_ai.to_joint_positions(
            chunk, observation.proprioception.joint_positions, model)]
    except ValueError:
        return rows


def fit_views(observation: sequence_ai.Observation, views: Sequence[str],
              substitutes: dict[str, str]) -> sequence_ai.Observation:
    """The observation with the target model's views, in its order: a recorded view as it was,
    a missing one from the recorded view `substitutes` names (say, the other DROID model's
    exterior_2 from exterior_1), views the model does not take left out."""
    if not views:
        return observation
    recorded = {frame.view: frame for frame in observation.images}
    frames = []
    for view in views:
        source = view if view in recorded else substitutes.get(view, "")
        if source in recorded:
            frames.append(sequence_ai.ImageFrame(view=view, data=recorded[source].data))
    return dataclasses.replace(observation, images=frames)


def _row_of(rows: Sequence[sequence_ai.Model], model: str) -> sequence_ai.Model | None:
    return next((r for r in rows if model in (r.id, r.short_id)), None)


def draw(requests: Sequence[Request], names: Sequence[str], period_s: float, title: str,
         out: Path) -> Path:
    """Per joint: the recorded state, recorded (solid) and predicted (dashed) rows from each
    request point (grey lines)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    dims = max((len(r.recorded[0]) for r in requests if r.recorded), default=0)
    if not requests or not dims:
        raise ValueError("no recorded chunk to draw")
    t0 = requests[0].captured_ns
    cols = 2
    rows = math.ceil(dims / cols)
    figure, axes = plt.subplots(rows, cols, figsize=(12, 2.2 * rows), sharex=True, squeeze=False)
    for j in range(dims):
        axis = axes.flat[j]
        state = [(r.captured_ns - t0) / 1e9 for r in requests]
        values = [_state_value(r, j) for r in requests]
        axis.plot(state, values, "o-", color="#1f5fbf", ms=2.5, lw=1, label="recorded state")
        for r in requests:
            start = (r.captured_ns - t0) / 1e9
            axis.axvline(start, color="#9aa5b1", lw=0.5, alpha=0.5)
            for chunk, style, colour, label in ((r.recorded, "-", "#2a9d4b", "recorded rows"),
                                                (r.predicted, "--", "#d62828", "predicted rows")):
                if chunk:
                    times = [start + k * period_s for k in range(len(chunk))]
                    axis.plot(times, [row[j] for row in chunk if j < len(row)], style,
                              color=colour, lw=0.8, label=label)
        axis.set_ylabel(names[j] if j < len(names) else f"dim{j + 1}", fontsize=8)
    handles, labels = axes.flat[0].get_legend_handles_labels()
    unique = dict(zip(labels, handles))
    axes.flat[0].legend(unique.values(), unique.keys(), fontsize=7, loc="best")
    figure.suptitle(title, fontsize=9)
    figure.tight_layout()
    figure.savefig(out, dpi=80)
    plt.close(figure)
    return out


def _state_value(request: Request, j: int) -> float:
    proprio = request.observation.proprioception
    state = list(proprio.joint_positions) + list(proprio.gripper or [])
    return state[j] if j < len(state) else math.nan


def replay(paths: Sequence[Path], model: str, out: Path, *, base_url: str | None = None,
           api_key: str | None = None, plots: bool = True,
           substitutes: dict[str, str] | None = None, in_flight: int = 1) -> dict[str, object]:
    """Replay every episode of `paths` through `model`; write and return replay.json."""
    rows = sequence_ai.models(base_url=base_url)
    catalogue = hashlib.sha256(
        json.dumps([r.raw for r in rows], sort_keys=True).encode("utf-8")).hexdigest()
    target = _row_of(rows, model)
    if target is None:
        raise ValueError(f"--model {model!r}: not in the catalogue at "
                         f"{base_url or 'SEQUENCES_BASE_URL'}; expected one of "
                         f"{', '.join(r.short_id for r in rows)}")
    # Every file reads as an episode, and its model is known, before any request goes out.
    unknown = [(path, model_of) for path in paths
               if _row_of(rows, model_of := read(path, messages=False).model) is None]
    if unknown:
        path, model_of = unknown[0]
        raise ValueError(
            f"{path}: recorded by {model_of or 'no model'!r}, which the catalogue does not list: "
            "its split of the state (joints, gripper) and its action space are unknown, so its "
            f"requests cannot be sent again or its rows compared faithfully ({len(unknown)} of "
            f"{len(paths)} episodes)")
    out.mkdir(parents=True, exist_ok=True)
    episodes: list[EpisodeReplay] = []
    sent = 0
    started = time.monotonic()
    # One Policy per request in flight (each its own kept-alive connection); the requests of an
    # episode are independent, so they go out `in_flight` at a time.
    policies: queue.Queue[sequence_ai.Policy] = queue.Queue()
    with contextlib.ExitStack() as connections:
        for _ in range(in_flight):
            policies.put(connections.enter_context(sequence_ai.connect(
                model, api_key=api_key, base_url=base_url, validate="warn")))

        def predict(request: Request) -> list[list[float]]:
            policy = policies.get()
            try:
                sent_observation = fit_views(request.observation, target.camera_views,
                                             substitutes or {})
                return [list(row) for row in policy.predict(sent_observation).action_chunk.steps]
            finally:
                policies.put(policy)

        with ThreadPoolExecutor(max_workers=in_flight, thread_name_prefix="replay") as pool:
            for path in paths:
                episode = read(path)
                recorded = _row_of(rows, episode.model)
                split = recorded.state_split if recorded is not None else None
                requests = requests_of(episode, split)
                for request, predicted in zip(requests, pool.map(predict, requests)):
                    sent += 1
                    request.predicted = joint_positions(predicted, target, request.observation)
                    if request.recorded is not None:
                        request.recorded = joint_positions(request.recorded, recorded,
                                                           request.observation)
                names = episode.state_names()
                joints, compared = compare(requests, names)
                mse, mae, nmse = _pooled(joints)
                episodes.append(EpisodeReplay(
                    path.name, content_hash(path), episode.model, episode.instruction,
                    len(requests), compared, {n: e.figures() for n, e in joints.items()},
                    mse, mae, nmse,
                ))
                if plots and compared:
                    period_s = 1.0 / (target.control_hz or 15.0)
                    draw(requests, names, period_s,
                         f"{path.name}: recorded {episode.model}, predicted {model} — "
                         f"MSE {mse:.3g}, MAE {mae:.3g}", out / f"replay_{path.stem}.png")
    elapsed = time.monotonic() - started
    report: dict[str, object] = {
        "model": target.id, "catalogue_revision": f"sha256:{catalogue[:16]}",
        "base_url": base_url or os.environ.get("SEQUENCES_BASE_URL", ""),
        "requests": sent, "in_flight": in_flight, "seconds": elapsed,
        "requests_per_s": sent / elapsed if elapsed > 0 else None,
        "episodes": [asdict(e) for e in episodes],
        "note": "open-loop error: the model's answers to the recorded observations against the "
                "recorded answers; a low error is not success (its own actions would change "
                "what it sees next).",
    }
    (out / REPLAY_FILE).write_text(json.dumps(report, indent=2) + "\n", encoding="utf-8")
    return report


def _episode_paths(given: Sequence[Path]) -> list[Path]:
    paths: list[Path] = []
    for path in given:
        paths.extend(episode_files(path) if path.is_dir() else [path])
    return paths


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("episodes", type=Path, nargs="+", help="episode files or folders")
    parser.add_argument("--model", required=True, help="the model to replay them through")
    parser.add_argument("--out", type=Path, required=True, help="folder of replay.json and plots")
    parser.add_argument("--base-url", default=None,
                        help="API base URL (default SEQUENCES_BASE_URL, else the hosted API); the "
                        "key comes from SEQUENCES_API_KEY")
    parser.add_argument("--no-plots", action="store_true", help="replay.json only")
    parser.add_argument("--in-flight", type=int, default=1,
                        help=f"requests sent at once, 1 to {MAX_IN_FLIGHT} (default %(default)s)")
    parser.add_argument("--substitute-view", action="append", default=[], metavar="MISSING=VIEW",
                        help="send the recorded VIEW where the model wants a view the episode "
                        "lacks (e.g. exterior_2=exterior_1); repeatable")


def run(args: argparse.Namespace) -> int:
    if not 1 <= args.in_flight <= MAX_IN_FLIGHT:
        print(f"replay: --in-flight {args.in_flight}: expected 1 to {MAX_IN_FLIGHT}",
              file=sys.stderr)
        return 2
    if args.out.exists() and not args.out.is_dir():
        print(f"replay: --out {args.out}: is a file, expected a folder (new or existing)",
              file=sys.stderr)
        return 2
    paths = _episode_paths(args.episodes)
    if not paths:
        print(f"replay: no episode files in {', '.join(map(str, args.episodes))}",
              file=sys.stderr)
        return 1
    substitutes = {}
    for item in args.substitute_view:
        missing, sep, view = item.partition("=")
        if not sep or not missing or not view:
            print(f"--substitute-view {item!r}: expected MISSING=VIEW", file=sys.stderr)
            return 2
        substitutes[missing] = view
    try:
        report = replay(paths, args.model, args.out, base_url=args.base_url,
                        plots=not args.no_plots, substitutes=substitutes,
                        in_flight=args.in_flight)
    except (ValueError, sequence_ai.SequencesError) as exc:
        print(f"replay: {exc}", file=sys.stderr)
        return 2
    except (EpisodeError, OSError) as exc:  # a file that is no episode; --out not writable
        print(f"replay: {exc}", file=sys.stderr)
        return 1
    for e in report["episodes"]:  # type: ignore[union-attr]
        print(f"{e['file']}: {e['compared']}/{e['requests']} requests compared, "
              f"MSE {e['mse']}, MAE {e['mae']}, range-normalised MSE {e['nmse']}")
    print(f"{report['requests']} requests at {report['requests_per_s']:.1f}/s; "
          f"wrote {args.out / REPLAY_FILE}")
    return 0
