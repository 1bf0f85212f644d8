"""demo.png: joint targets and measured joints over time, chunks, underruns, the playback speed,
the requests in flight and the preemption.

matplotlib when it is installed (the `test` extra has it), else a plainer picture with Pillow.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sequence_ai_ros.sim.render import IMAGE_SIZE

JOINTS = 7
# Per instruction (the VLM planner's steps too): its target line and its time span.
GOAL_COLOURS = ("#2a9d4b", "#8e44ad", "#e76f51", "#2a6f97", "#b08900", "#6d597a")


@dataclass
class Series:
    """Everything the picture shows, in seconds since the first goal was sent."""

    joint_t: list[float]
    joints: list[list[float]]
    target_t: list[float]
    targets: list[list[float]]
    # label, target, start, end, chunks, underruns, and from the feedback: feedback_t, speed,
    # in_flight
    goals: list[dict[str, Any]]
    preempt: float | None
    title: str


def _series(demo: Any) -> Series:
    t0 = demo.t0
    with demo.recording.lock:
        joint_t = [t - t0 for t in demo.recording.joint_t]
        joints = [list(q) for q in demo.recording.joints]
        target_t = [t - t0 for t in demo.recording.target_t]
        targets = [list(q) for q in demo.recording.targets]
    goals = []
    for goal in demo.goals:
        if math.isnan(goal.sent_t):
            continue
        end = goal.end_t if not math.isnan(goal.end_t) else (joint_t[-1] + t0 if joint_t else t0)
        reason = goal.result.reason if goal.result is not None else "no result"
        goals.append(
            {
                "label": f"goal {goal.number} {goal.instruction!r} ({reason})",
                "target": goal.target,
                "start": goal.sent_t - t0,
                "end": end - t0,
                "chunks": [t - t0 for t in goal.chunk_times],
                "underruns": [t - t0 for t in goal.underrun_times],
                "feedback_t": [t - t0 for t, _ in goal.feedback],
                "speed": [fb.speed for _, fb in goal.feedback],
                "in_flight": [fb.in_flight for _, fb in goal.feedback],
            }
        )
    preempt = None if math.isnan(demo.preempt_t) else demo.preempt_t - t0
    args = demo.args
    width, height = IMAGE_SIZE
    underruns = sum(
        goal.result.underruns if hasattr(goal.result, "underruns") else len(goal.underrun_times)
        for goal in demo.goals
    )
    in_flight = max((goal.max_in_flight() for goal in demo.goals), default=0)
    speeds = [fb.speed for goal in demo.goals for _, fb in goal.feedback if fb.speed > 0]
    speed = f"{min(speeds):.2f}-{max(speeds):.2f}" if speeds else "n/a"
    title = (
        "sequence_ai demo: pi05-droid (local gateway, realistic latency) driving the simulated "
        f"DROID arm\nprefetch {args.prefetch}, up to {in_flight} requests in flight, playback "
        f"speed {speed}, {underruns} underruns\ngoals of max_seconds {args.max_seconds:g}, "
        + (
            f"VLM planner (sim-planner) on {args.task!r}: {len(demo.goals)} steps, each "
            "handed over without a stop"
            if getattr(args, "planner", "scripted") == "vlm"
            else f"preemption after {args.preempt_after:g} s of goal 1"
        )
        + f", cameras {width}x{height}, config/droid.yaml"
    )
    return Series(joint_t, joints, target_t, targets, goals, preempt, title)


def _distance(q: list[float], target: list[float]) -> float:
    return math.sqrt(sum((a - b) ** 2 for a, b in zip(q, target)))


def draw(demo: Any, out: Path) -> str:
    """Write the picture of a finished demo run; returns the path written."""
    series = _series(demo)
    out.parent.mkdir(parents=True, exist_ok=True)
    try:
        import matplotlib
    except ImportError:
        _draw_pillow(series, out)
    else:
        matplotlib.use("Agg")  # no display needed, and none is assumed
        _draw_matplotlib(series, out)
    return str(out)


def _draw_matplotlib(series: Series, out: Path) -> None:
    import matplotlib.pyplot as plt
    from matplotlib.lines import Line2D

    fig, axes = plt.subplots(5, 2, figsize=(15, 13.5), sharex=True)
    panels = list(axes.flat)
    for j in range(JOINTS):
        ax = panels[j]
        ax.plot(series.joint_t, [q[j] for q in series.joints], color="#1f5fbf", lw=1.4)
        ax.plot(series.target_t, [q[j] for q in series.targets], ".", color="#f08c00", ms=2.5)
        for goal, colour in zip(series.goals, GOAL_COLOURS):
            ax.hlines(
                goal["target"][j],
                goal["start"],
                goal["end"],
                colors=colour,
                linestyles="--",
                lw=1.2,
            )
        ax.set_ylabel(f"panda_joint{j + 1} (rad)")
    ax = panels[JOINTS]
    for goal, colour in zip(series.goals, GOAL_COLOURS):
        ax.plot(
            series.joint_t,
            [_distance(q, goal["target"]) for q in series.joints],
            color=colour,
            lw=1.4,
        )
    ax.set_ylabel("distance to target (rad)")
    for index, (key, label) in enumerate(
        (("speed", "playback speed"), ("in_flight", "requests in flight"))
    ):
        ax = panels[JOINTS + 1 + index]
        for goal, colour in zip(series.goals, GOAL_COLOURS):
            ax.step(goal["feedback_t"], goal[key], where="post", color=colour, lw=1.4)
        ax.set_ylabel(label)
    panels[JOINTS + 1].set_ylim(0, 1.1)
    for ax in panels:
        for goal, colour in zip(series.goals, GOAL_COLOURS):
            ax.axvspan(goal["start"], goal["end"], color=colour, alpha=0.06)
            for t in goal["chunks"]:
                ax.axvline(t, color="#999999", lw=0.6, ls=":")
            for t in goal["underruns"]:
                ax.axvline(t, color="#d62728", lw=1.2, alpha=0.8)
        if series.preempt is not None:
            ax.axvline(series.preempt, color="black", lw=2.0, ls="--")
        else:
            # The VLM planner's steps: each start after the first is a hand-over.
            for goal in series.goals[1:]:
                ax.axvline(goal["start"], color="black", lw=1.4, ls="-.")
        ax.grid(alpha=0.25)
    for ax in panels[-2:]:
        ax.set_xlabel("time since the first goal was sent (s)")
    legend = [
        Line2D([], [], color="#1f5fbf", lw=1.4, label="measured joint position"),
        Line2D([], [], color="#f08c00", marker=".", ls="", label="joint target sent by the node"),
        Line2D([], [], color="#999999", lw=0.8, ls=":", label="chunk arrived (feedback, ±0.2 s)"),
        Line2D([], [], color="#d62728", lw=1.2, label="underrun"),
        Line2D([], [], color="black", lw=2.0, ls="--", label="preemption by the 2nd instruction")
        if series.preempt is not None
        else Line2D([], [], color="black", lw=1.4, ls="-.", label="next step (hand-over)"),
    ]
    legend += [
        Line2D([], [], color=colour, ls="--", label=f"{goal['label']}: target")
        for goal, colour in zip(series.goals, GOAL_COLOURS)
    ]
    fig.legend(handles=legend, loc="lower center", ncol=3, fontsize=9, frameon=False)
    fig.suptitle(series.title, fontsize=13)
    fig.tight_layout(rect=(0, 0.07, 1, 0.95))
    fig.savefig(out, dpi=90)
    plt.close(fig)


def _draw_pillow(series: Series, out: Path) -> None:
    from PIL import Image, ImageDraw

    width, height, cols, rows = 1350, 1230, 2, 5
    margin_x, margin_top, margin_bottom = 60, 50, 70
    panel_w = (width - margin_x * (cols + 1)) // cols
    panel_h = (height - margin_top - margin_bottom) // rows - 20
    image = Image.new("RGB", (width, height), "white")
    pen = ImageDraw.Draw(image)
    pen.text((margin_x, 15), series.title, fill="black")
    t_start = min([*series.joint_t, *series.target_t, 0.0])
    t_end = max([*series.joint_t, *series.target_t, t_start + 1.0])

    def box(index: int) -> tuple[int, int]:
        return (
            margin_x + (index % cols) * (panel_w + margin_x),
            margin_top + (index // cols) * (panel_h + 20),
        )

    for index in range(JOINTS + 3):
        x0, y0 = box(index)
        feedback_key = {JOINTS + 1: "speed", JOINTS + 2: "in_flight"}.get(index)
        if feedback_key is not None:
            curves = [
                (g["feedback_t"], g[feedback_key], (42, 157, 75) if n == 0 else (142, 68, 173))
                for n, g in enumerate(series.goals)
            ]
            dots, levels = ([], []), []
            label = "playback speed" if feedback_key == "speed" else "requests in flight"
        elif index < JOINTS:
            curves = [(series.joint_t, [q[index] for q in series.joints], (31, 95, 191))]
            dots = (series.target_t, [q[index] for q in series.targets])
            levels = [(g["target"][index], g["start"], g["end"]) for g in series.goals]
            label = f"panda_joint{index + 1} (rad)"
        else:
            curves = [
                (
                    series.joint_t,
                    [_distance(q, g["target"]) for q in series.joints],
                    (42, 157, 75) if n == 0 else (142, 68, 173),
                )
                for n, g in enumerate(series.goals)
            ]
            dots, levels, label = ([], []), [], "distance to target (rad)"
        values = [v for _, ys, _ in curves for v in ys] + dots[1] + [lv for lv, _, _ in levels]
        lo, hi = (min(values), max(values)) if values else (0.0, 1.0)
        hi = hi if hi > lo else lo + 1.0

        def xy(
            t: float, v: float, x0: int = x0, y0: int = y0, lo: float = lo, hi: float = hi
        ) -> tuple[float, float]:
            x = x0 + panel_w * (t - t_start) / (t_end - t_start)
            return (x, y0 + panel_h * (1 - (v - lo) / (hi - lo)))

        pen.rectangle((x0, y0, x0 + panel_w, y0 + panel_h), outline=(120, 120, 120))
        pen.text((x0 + 4, y0 + 2), label, fill="black")
        for goal in series.goals:
            for t in goal["chunks"]:
                pen.line((xy(t, lo)[0], y0, xy(t, lo)[0], y0 + panel_h), fill=(200, 200, 200))
            for t in goal["underruns"]:
                pen.line((xy(t, lo)[0], y0, xy(t, lo)[0], y0 + panel_h), fill=(214, 39, 40))
        if series.preempt is not None:
            x = xy(series.preempt, lo)[0]
            pen.line((x, y0, x, y0 + panel_h), fill="black", width=3)
        for level, start, end in levels:
            pen.line((*xy(start, level), *xy(end, level)), fill=(42, 157, 75), width=1)
        for ts, ys, colour in curves:
            if len(ts) > 1:
                pen.line([xy(t, v) for t, v in zip(ts, ys)], fill=colour, width=2)
        for t, v in zip(*dots):
            x, y = xy(t, v)
            pen.rectangle((x - 1, y - 1, x + 1, y + 1), fill=(240, 140, 0))
    pen.text(
        (margin_x, height - 45),
        "blue: measured joints   orange: joint targets   dashed/green: instruction targets   "
        f"grey: chunk arrived   red: underrun   black: preemption   x: {t_start:.1f} .. "
        f"{t_end:.1f} s since the first goal was sent",
        fill="black",
    )
    image.save(out)
