"""demo.png: the node's commands and the measured state (joints, or the end-effector position)
over time, chunks, underruns, the playback speed, the requests in flight and the preemption.

One panel per channel of the model's robot (demo/robots.py), then the distance to each
instruction's target per group of channels; a two-arm robot gets a column per arm. A physics
world that judges its task adds the cup's height and its distance to the block, and marks the
moment its task succeeded; there the models look at the cup, so no instruction's target is
drawn: the age of the observation behind each step takes the distance's panel.
matplotlib when it is installed (the `test` extra has it), else a plainer picture with Pillow.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from sequence_ai_lab.demo.robots import DemoRobot, Group

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
    robot: DemoRobot
    # The world's task state over time (sim_robot's ~/task_state); empty without a judging world.
    task_t: list[float] = field(default_factory=list)
    task_values: dict[str, list[float]] = field(default_factory=dict)
    success_t: float | None = None  # when the world first judged the task done

    @property
    def judged(self) -> bool:
        """A world judges the task: its models aim at what they see, not at a target."""
        return bool(self.task_t)


# A panel: ("channel", index), ("distance", group), ("feedback", "speed" | "in_flight") or
# ("task", a quantity of the world's task state).
Panel = tuple[str, "int | Group | str"]
FEEDBACK_LABELS = {
    "speed": "playback speed",
    "in_flight": "requests in flight",
    "observation_age_s": "observation age behind the step (s)",
}
TASK_LABELS = {
    "cup_height": "cup above the table (m)",
    "cup_block_distance": "cup to block, across the table (m)",
}


def layout(robot: DemoRobot, task: bool = False) -> list[list[Panel | None]]:
    """Rows of panels: one group's channels flow over two columns, then its distance, then the
    feedback (and the task's quantities when a world judges one, the observation's age in
    place of the distance); several groups get a column each (channels, distance), the
    feedback below."""
    feedback: list[Panel] = [("feedback", "speed"), ("feedback", "in_flight")]
    if task:
        feedback += [("task", name) for name in TASK_LABELS]
    if len(robot.groups) == 1:
        (group,) = robot.groups
        flat: list[Panel] = [("channel", c) for c in group.channels]
        aim: Panel = ("feedback", "observation_age_s") if task else ("distance", group)
        flat += [aim, *feedback]
        rows = [flat[i: i + 2] for i in range(0, len(flat), 2)]
        return [[*row, *[None] * (2 - len(row))] for row in rows]
    columns = [[("channel", c) for c in g.channels] + [("distance", g)] for g in robot.groups]
    height = max(len(column) for column in columns)
    columns = [column + [None] * (height - len(column)) for column in columns]
    rows: list[list[Panel | None]] = [list(row) for row in zip(*columns)]
    padding = [None] * (len(columns) - len(feedback))
    return [*rows, [*feedback, *padding][: max(len(columns), len(feedback))]]


def panel_label(robot: DemoRobot, panel: Panel) -> str:
    kind, what = panel
    if kind == "channel":
        return robot.label(int(what))  # type: ignore[arg-type]
    if kind == "distance":
        assert isinstance(what, Group)
        prefix = f"{what.label}: " if what.label else ""
        return f"{prefix}distance to target ({robot.unit})"
    if kind == "task":
        return TASK_LABELS[str(what)]
    return FEEDBACK_LABELS[str(what)]


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
                "observation_age_s": [fb.observation_age_s for _, fb in goal.feedback],
            }
        )
    preempt = None if math.isnan(demo.preempt_t) else demo.preempt_t - t0
    args = demo.args
    robot = demo.robot
    underruns = sum(
        goal.result.underruns if hasattr(goal.result, "underruns") else len(goal.underrun_times)
        for goal in demo.goals
    )
    in_flight = max((goal.max_in_flight() for goal in demo.goals), default=0)
    speeds = [fb.speed for goal in demo.goals for _, fb in goal.feedback if fb.speed > 0]
    speed = f"{min(speeds):.2f}-{max(speeds):.2f}" if speeds else "n/a"
    title = (
        f"sequence_ai demo: {robot.model} (local gateway, realistic latency) driving "
        f"{robot.name}\nprefetch {args.prefetch}, up to {in_flight} requests in flight, playback "
        f"speed {speed}, {underruns} underruns\ngoals of max_seconds {args.max_seconds:g}, "
        + (
            f"VLM planner (sim-planner) on {args.task!r}: {len(demo.goals)} steps, each "
            "handed over without a stop"
            if getattr(args, "planner", "scripted") == "vlm"
            else f"preemption after {args.preempt_after:g} s of goal 1"
        )
        + f"\ncameras {robot.cameras}, parameters {' + '.join(demo.params_files)}"
    )
    with demo.recording.lock:
        task_t = [t - t0 for t in demo.recording.task_t]
        task_values = {name: list(v) for name, v in demo.recording.task_values.items()}
        success_t = demo.recording.success_t
    if success_t is not None:
        success_t -= t0
    return Series(joint_t, joints, target_t, targets, goals, preempt, title, robot,
                  task_t, task_values, success_t)


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


@dataclass
class PanelData:
    """What one panel draws: curves (times, values, the goal's index or -1 for the measured
    state), the node's commands as dots, each goal's target level and span."""

    label: str
    curves: list[tuple[list[float], list[float], int]]
    dots: tuple[list[float], list[float]]
    levels: list[tuple[float, float, float, int]]
    steps: bool = False  # feedback: held between reports


def panel_data(series: Series, panel: Panel) -> PanelData:
    kind, what = panel
    label = panel_label(series.robot, panel)
    if kind == "channel":
        c = int(what)  # type: ignore[arg-type]
        dots = [(t, row[c]) for t, row in zip(series.target_t, series.targets)
                if math.isfinite(row[c])]
        return PanelData(
            label,
            [(series.joint_t, [q[c] for q in series.joints], -1)],
            ([t for t, _ in dots], [v for _, v in dots]),
            [] if series.judged else [
                (g["target"][c], g["start"], g["end"], n) for n, g in enumerate(series.goals)
                if c < len(g["target"])
            ],
        )
    if kind == "distance":
        assert isinstance(what, Group)
        curves = [
            (series.joint_t, [series.robot.distance(q, g["target"], what) for q in series.joints],
             n)
            for n, g in enumerate(series.goals)
        ]
        return PanelData(label, curves, ([], []), [])
    if kind == "task":
        return PanelData(label, [(series.task_t, series.task_values.get(str(what), []), -1)],
                         ([], []), [])
    curves = [(g["feedback_t"], g[str(what)], n) for n, g in enumerate(series.goals)]
    return PanelData(label, curves, ([], []), [], steps=True)


def _draw_matplotlib(series: Series, out: Path) -> None:
    import matplotlib.pyplot as plt
    from matplotlib.lines import Line2D
    from matplotlib.patches import Patch

    grid = layout(series.robot, task=series.judged)
    rows, cols = len(grid), len(grid[0])
    fig, axes = plt.subplots(rows, cols, figsize=(7.5 * cols, 2.7 * rows), sharex=True,
                             squeeze=False)
    panels = []
    for ax, panel in zip(axes.flat, (p for row in grid for p in row)):
        if panel is None:
            ax.set_visible(False)
            continue
        panels.append(ax)
        data = panel_data(series, panel)
        for ts, ys, n in data.curves:
            if n >= len(GOAL_COLOURS):
                continue
            colour = "#1f5fbf" if n < 0 else GOAL_COLOURS[n]
            if data.steps:
                ax.step(ts, ys, where="post", color=colour, lw=1.4)
            else:
                ax.plot(ts, ys, color=colour, lw=1.4)
        if data.dots[0]:
            ax.plot(*data.dots, ".", color="#f08c00", ms=2.5)
        for level, start, end, n in data.levels:
            if n < len(GOAL_COLOURS):
                ax.hlines(level, start, end, colors=GOAL_COLOURS[n], linestyles="--", lw=1.2)
        ax.set_ylabel(data.label)
        if panel == ("feedback", "speed"):
            ax.set_ylim(0, 1.1)
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
        if series.success_t is not None:
            ax.axvline(series.success_t, color="#2a9d4b", lw=3.0, alpha=0.7)
        ax.grid(alpha=0.25)
    for ax in axes[-1]:
        ax.set_xlabel("time since the first goal was sent (s)")
    robot = series.robot
    legend = [Line2D([], [], color="#1f5fbf", lw=1.4, label=robot.measured_label)]
    if robot.commands:
        legend.append(
            Line2D([], [], color="#f08c00", marker=".", ls="", label=robot.command_label)
        )
    legend += [
        Line2D([], [], color="#999999", lw=0.8, ls=":", label="chunk arrived (feedback, ±0.2 s)"),
        Line2D([], [], color="#d62728", lw=1.2, label="underrun"),
        Line2D([], [], color="black", lw=2.0, ls="--", label="preemption by the 2nd instruction")
        if series.preempt is not None
        else Line2D([], [], color="black", lw=1.4, ls="-.", label="next step (hand-over)"),
    ]
    if series.success_t is not None:
        legend.append(Line2D([], [], color="#2a9d4b", lw=3.0, alpha=0.7,
                             label=f"task succeeded (the world's judge), {series.success_t:.1f} s"))
    legend += [
        Patch(color=colour, alpha=0.25, label=goal["label"]) if series.judged
        else Line2D([], [], color=colour, ls="--", label=f"{goal['label']}: target")
        for goal, colour in zip(series.goals, GOAL_COLOURS)
    ]
    fig.legend(handles=legend, loc="lower center", ncol=3, fontsize=9, frameon=False)
    fig.suptitle(series.title, fontsize=13)
    # Room for the legend below and the title above, the same in inches at any height.
    height = fig.get_figheight()
    fig.tight_layout(rect=(0, 0.945 / height, 1, 1 - 0.9 / height))
    fig.savefig(out, dpi=90)
    plt.close(fig)


def _draw_pillow(series: Series, out: Path) -> None:
    from PIL import Image, ImageDraw

    grid = layout(series.robot, task=series.judged)
    rows, cols = len(grid), len(grid[0])
    margin_x, margin_top, margin_bottom = 60, 50, 70
    width, height = 60 + 645 * cols, margin_top + margin_bottom + 222 * rows
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

    for index, panel in enumerate(p for row in grid for p in row):
        if panel is None:
            continue
        x0, y0 = box(index)
        data = panel_data(series, panel)
        # NaN (a figure before its first value) is left out, as matplotlib leaves a gap.
        curves = [
            ([t for t, v in zip(ts, ys) if math.isfinite(v)],
             [v for v in ys if math.isfinite(v)],
             (31, 95, 191) if n < 0 else (42, 157, 75) if n == 0 else (142, 68, 173))
            for ts, ys, n in data.curves
        ]
        dots, label = data.dots, data.label
        levels = [(level, start, end) for level, start, end, _ in data.levels]
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
        if series.success_t is not None:
            x = xy(series.success_t, lo)[0]
            pen.line((x, y0, x, y0 + panel_h), fill=(42, 157, 75), width=4)
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
        f"blue: {series.robot.measured_label}   orange: {series.robot.command_label}   "
        + ("" if series.judged else "dashed/green: instruction targets   ")
        + "grey: chunk arrived   red: underrun   black: preemption   thick green: task "
        f"succeeded   x: {t_start:.1f} .. "
        f"{t_end:.1f} s since the first goal was sent",
        fill="black",
    )
    image.save(out)
