"""`python -m sequence_ai_lab.episodes`: list, show, plot and write out the frames of episode
files, repair a killed recording (repair.py); `export-lerobot` turns them into a LeRobot dataset
(export.py). A file that is no readable episode is one line on stderr and exit status 1."""

from __future__ import annotations

import argparse
import math
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path

from sequence_ai_lab.episodes.reader import EpisodeFile, episode_files, read
from sequence_ai_ros.episodes.files import EpisodeError

JOINTS_PLOTTED = 7


def _start(episode: EpisodeFile) -> str:
    started = int(episode.episode.get("started_ns", "0"))
    if not started:
        return "?"
    return datetime.fromtimestamp(started / 1e9, timezone.utc).strftime("%Y-%m-%d %H:%M:%S")


def _outcome(episode: EpisodeFile) -> str:
    if not episode.summary:
        return "cut short (no end recorded{})".format("; repaired" if episode.repaired else "")
    return f"{episode.summary.get('status', '?')} {episode.summary.get('reason', '?')}"


def _count(episode: EpisodeFile, name: str, topic: str) -> str:
    """A count from the summary, or from the messages of a file cut short."""
    if name in episode.summary:
        return episode.summary[name]
    return str(len(episode.on(topic)))


def list_line(episode: EpisodeFile) -> str:
    """start, model, instruction, duration, outcome, chunks, underruns, refusals."""
    elapsed = episode.summary.get("elapsed_s")
    duration = f"{float(elapsed):6.1f} s" if elapsed else "     ? s"
    return (
        f"{_start(episode)}  {episode.model:<12} {episode.instruction[:40]!r:<42} {duration}  "
        f"{_outcome(episode):<24} chunks {_count(episode, 'chunks', 'chunk'):>3}  "
        f"underruns {_count(episode, 'underruns', 'underrun'):>2}  "
        f"refusals {_count(episode, 'recorded_refusals', 'refusal'):>2}  "
        + (f"{_verdict(episode)}  " if episode.verdict else "") + episode.path.name
    )


def _verdict(episode: EpisodeFile) -> str:
    """The evaluation's verdict: success or failure, by which judge, on which seed."""
    v = episode.verdict
    word = "success" if v.get("success") == "true" else "failure"
    return f"{word} ({v.get('judge', '?')}, {v.get('condition', '?')}, seed {v.get('seed', '?')})"


def latencies_s(episode: EpisodeFile) -> list[float]:
    values = []
    for message in episode.on("chunk/info"):
        found = {kv.key: kv.value for kv in message.message.values}.get("latency_s", "")
        if found:
            values.append(float(found))
    return values


def show_text(episode: EpisodeFile) -> str:
    """The summary, latency p50/p99 and the timeline of instructions."""
    lines = [f"{episode.path}", f"  started      {_start(episode)} UTC",
             f"  model        {episode.model}", f"  instruction  {episode.instruction!r}",
             f"  outcome      {_outcome(episode)}"]
    if episode.summary.get("message"):
        lines.append(f"  message      {episode.summary['message']}")
    if episode.verdict:
        lines.append(f"  verdict      {_verdict(episode)}: {episode.verdict.get('reason', '')}")
    for key in ("actions", "chunks", "underruns", "requests", "discarded",
                "recorded_observations", "recorded_commands", "recorded_discarded",
                "recorded_chunks_refused", "recorded_refusals",
                "recorded_underruns", "recorded_holds", "recorded_unanswered", "messages",
                "dropped"):
        if key in episode.summary:
            lines.append(f"  {key:<12} {episode.summary[key]}")
    if "elapsed_s" in episode.summary:
        lines.append(f"  elapsed      {float(episode.summary['elapsed_s']):.2f} s")
    from sequence_ai_ros.core.health import percentile

    latencies = latencies_s(episode)
    p50, p99 = percentile(latencies, 0.5), percentile(latencies, 0.99)
    if p50 is not None and p99 is not None:
        lines.append(f"  latency      p50 {p50 * 1000:.0f} ms, p99 {p99 * 1000:.0f} ms "
                     f"({len(latencies)} chunks)")
    start = int(episode.episode.get("started_ns", "0"))
    lines.append("  instructions")
    for message in episode.on("instruction"):
        offset = (message.log_time_ns - start) / 1e9 if start else math.nan
        lines.append(f"    +{offset:7.3f} s  {message.message.data!r}")
    lines.append("  topics       " + ", ".join(
        f"{topic} ({len(episode.on(topic))})" for topic in episode.topics()))
    return "\n".join(lines)


@dataclass
class PlotSeries:
    """What `plot` draws, in seconds since the episode's first message."""

    target_t: list[float]
    targets: list[list[float]]
    measured_t: list[float]
    measured: list[list[float]]
    chunks: list[float]
    underruns: list[float]
    holds: list[float]


def plot_series(episode: EpisodeFile) -> PlotSeries:
    t0 = min((m.log_time_ns for m in episode.messages), default=0)
    series = PlotSeries([], [], [], [], [], [], [])
    for message in episode.on("command"):
        msg = message.message
        kind = message.type_name.rsplit("/", 1)[-1]
        if kind == "JointTrajectory":
            base = msg.header.stamp.sec * 1e9 + msg.header.stamp.nanosec or message.log_time_ns
            for point in msg.points:
                offset = point.time_from_start.sec * 1e9 + point.time_from_start.nanosec
                series.target_t.append((base + offset - t0) / 1e9)
                series.targets.append(list(point.positions))
            continue
        values = list(msg.data) if kind == "Float64MultiArray" else list(msg.position)
        if values:
            series.target_t.append((message.log_time_ns - t0) / 1e9)
            series.targets.append(values)
    for message in episode.on("observation/state"):
        series.measured_t.append((message.log_time_ns - t0) / 1e9)
        series.measured.append(list(message.message.position))
    series.chunks = [(m.log_time_ns - t0) / 1e9 for m in episode.on("chunk")]
    for message in episode.on("event"):
        when = (message.log_time_ns - t0) / 1e9
        if message.message.name == "underrun":
            series.underruns.append(when)
        elif message.message.name == "hold":
            series.holds.append(when)
    return series


def plot(episode: EpisodeFile, out: Path) -> Path:
    """A PNG like demo.png: joint targets vs measured, chunk arrivals, underruns, holds."""
    import matplotlib

    matplotlib.use("Agg")  # no display is assumed
    import matplotlib.pyplot as plt

    series = plot_series(episode)
    fig, axes = plt.subplots(4, 2, figsize=(14, 10), sharex=True)
    for j, ax in enumerate(axes.flat):
        if j >= JOINTS_PLOTTED:
            ax.set_axis_off()
            continue
        pairs = [(t, q[j]) for t, q in zip(series.measured_t, series.measured) if len(q) > j]
        ax.plot([t for t, _ in pairs], [v for _, v in pairs], "o-", color="#1f5fbf", ms=3,
                lw=1.2, label="measured (as sent to the model)")
        pairs = [(t, q[j]) for t, q in zip(series.target_t, series.targets) if len(q) > j]
        ax.plot([t for t, _ in pairs], [v for _, v in pairs], ".", color="#f08c00", ms=2.5,
                label="target (as commanded)")
        for t in series.chunks:
            ax.axvline(t, color="#9aa5b1", lw=0.6, alpha=0.6)
        for t in series.underruns:
            ax.axvline(t, color="#d62828", lw=1.2, ls="--")
        for t in series.holds:
            ax.axvline(t, color="#2a9d4b", lw=1.4)
        names = episode.state_names()
        ax.set_ylabel(f"{names[j] if j < len(names) else f'joint {j + 1}'} (rad)")
    axes.flat[0].legend(loc="best", fontsize=8)
    axes.flat[-2].set_xlabel("s since the episode's first message")
    fig.suptitle(
        f"{episode.model}: {episode.instruction!r} — {_outcome(episode)}\n"
        f"grey: chunk arrivals ({len(series.chunks)}), red dashed: underruns "
        f"({len(series.underruns)}), green: holds ({len(series.holds)})"
    )
    fig.tight_layout()
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out, dpi=90)
    plt.close(fig)
    return out


def write_frames(episode: EpisodeFile, out: Path) -> list[Path]:
    """Every observation's JPEGs, as the model got them: `<observation>_<view>.jpg`."""
    out.mkdir(parents=True, exist_ok=True)
    numbers: dict[str, int] = {}
    written = []
    for message in episode.messages:
        if not message.topic.startswith("observation/") or message.topic in (
            "observation/state", "observation/info"
        ):
            continue
        view = message.topic.split("/", 1)[1]
        numbers[view] = number = numbers.get(view, 0) + 1
        path = out / f"{number:05d}_{view}.jpg"
        path.write_bytes(bytes(message.message.data))
        written.append(path)
    return written


PROG = "python -m sequence_ai_lab.episodes"


def _complain(error: EpisodeError | str) -> None:
    """One line on stderr: the file and what is wrong with it."""
    print(f"{PROG}: {error}", file=sys.stderr)


def _list(folder: Path) -> int:
    """A line per episode; a line on stderr per entry that is not one (exit 1 if any)."""
    if not folder.is_dir():
        _complain(f"{folder}: {'no such folder' if not folder.exists() else 'not a folder'}")
        return 1
    files = episode_files(folder)
    if not files:
        _complain(f"no episode files in {folder}")
        return 1
    bad = 0
    for path in files:
        try:
            episode = read(path, messages=False)
            # A file cut short has no summary: its counts come from its messages.
            print(list_line(read(path) if episode.cut else episode))
        except EpisodeError as exc:
            _complain(exc)
            bad += 1
    return 1 if bad else 0


def _repair(path: Path) -> int:
    from sequence_ai_ros.episodes.repair import repair

    done = repair(path)
    if done is None:
        print(f"{path}: finished (it has its MCAP summary); nothing to repair")
    else:
        print(f"{path}: repaired: {done.messages} messages kept, an unfinished tail of "
              f"{done.dropped_bytes} bytes left out")
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog=PROG,
                                     description="Inspect and export recorded act episodes.")
    verbs = parser.add_subparsers(dest="verb", required=True)
    verbs.add_parser("list", help="one line per episode of a folder").add_argument("dir", type=Path)
    verbs.add_parser("show", help="one episode's summary").add_argument("file", type=Path)
    plotting = verbs.add_parser("plot", help="a PNG of one episode")
    plotting.add_argument("file", type=Path)
    plotting.add_argument("--out", type=Path, help="default: the file's name with .png")
    frames = verbs.add_parser("frames", help="the JPEGs the model saw")
    frames.add_argument("file", type=Path)
    frames.add_argument("--out", type=Path, help="default: a folder named after the file")
    verbs.add_parser(
        "repair", help="give a file cut short (a killed node's) its MCAP summary, in place",
    ).add_argument("file", type=Path)
    export = verbs.add_parser("export-lerobot", help="episodes to a LeRobot dataset")
    export.add_argument("dir", type=Path)
    export.add_argument("out", type=Path)
    export.add_argument("--repo-id", default="local/sequence_ai_episodes")
    replaying = verbs.add_parser("replay", help="recorded observations through another model "
                                 "(open loop): per-joint MSE/MAE, replay.json and plots")
    # The evaluation room owns replay (it is an evaluation); imported only for this verb.
    from sequence_ai_lab.evaluation.replay import add_arguments, run

    add_arguments(replaying)
    args = parser.parse_args(argv)
    if args.verb == "replay":
        return run(args)

    try:
        if args.verb == "list":
            return _list(args.dir)
        if args.verb == "show":
            print(show_text(read(args.file)))
        elif args.verb == "plot":
            print(plot(read(args.file), args.out or args.file.with_suffix(".png")))
        elif args.verb == "frames":
            written = write_frames(read(args.file), args.out or args.file.with_suffix(""))
            print(f"{len(written)} JPEGs in {written[0].parent if written else args.out}")
        elif args.verb == "repair":
            return _repair(args.file)
        else:
            from sequence_ai_lab.episodes.export import export_lerobot

            print(export_lerobot(episode_files(args.dir), args.out, repo_id=args.repo_id))
    except EpisodeError as exc:
        _complain(exc)
        return 1
    return 0
