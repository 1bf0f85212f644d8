"""Section 8: many robots against one gateway: 8 Policies in threads, then nodes in namespaces."""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field
from typing import Any

from bench import order_policy
from bench.common import ORDER_ECHO, ActClock, Context, accept, fixed_observation, log
from bench.report import Section, Table
from bench.stats import Summary, fmt

LATENCY_MS = 40.0
EXACT = 1e-9


@dataclass
class OrderCheck:
    """What the played steps say about the order of chunks and of steps within them."""

    chunks: int = 0
    out_of_order_chunks: int = 0
    skipped_chunks: int = 0
    out_of_order_steps: int = 0
    other: int = 0  # commands that carry no code (holds)
    start_rows: list[int] = field(default_factory=list)
    anomalies: list[str] = field(default_factory=list)

    def note(self, index: int, previous: tuple[int, int] | None, now: tuple[int, int]) -> None:
        if len(self.anomalies) < 3:
            self.anomalies.append(
                f"#{index}: (request, step) {previous} then {now}"
            )


def check_order(values: list[float]) -> OrderCheck:
    """Walk the joint-7 codes in playing order; every chunk must follow the one before it.

    A chunk may start at a row past 0 (the loop skips rows whose time passed while the
    request was in flight); within a chunk, rows must follow one another.
    """
    result = OrderCheck()
    previous: tuple[int, int] | None = None
    half = order_policy.CODE_WRAP // 2
    for index, value in enumerate(values):
        request, step = order_policy.decode(value)
        if abs(order_policy.encode(request, step) - value) > EXACT:
            result.other += 1
            continue
        if previous is None or request != previous[0]:
            result.chunks += 1
            if previous is not None:
                ahead = (request - previous[0]) % order_policy.CODE_WRAP
                if ahead >= half:
                    result.out_of_order_chunks += 1
                    result.note(index, previous, (request, step))
                elif ahead > 1:
                    result.skipped_chunks += ahead - 1
                    result.note(index, previous, (request, step))
            result.start_rows.append(step)
        elif step != previous[1] + 1:
            result.out_of_order_steps += 1
            result.note(index, previous, (request, step))
        previous = (request, step)
    return result


def _rows(order: OrderCheck) -> str:
    """The rows chunks started at after the first: 'median (min–max)'."""
    later = order.start_rows[1:]
    if not later:
        return "n/a"
    return f"{Summary.of(later).median:.0f} ({min(later)}–{max(later)})"


def _policies(ctx: Context, section: Section) -> None:
    robots = 8
    seconds = ctx.pick(20.0, 3.0)
    ctx.latency(LATENCY_MS)
    model = ctx.models[ORDER_ECHO]
    before = ctx.gateway.counters()
    outcomes: list[Any] = [None] * robots
    errors: list[str] = [""] * robots
    clocks = [ActClock(record_rows=True) for _ in range(robots)]
    start = threading.Barrier(robots)

    def drive(i: int) -> None:
        observation = fixed_observation(model, instruction=f"robot {i}: put the cup in the sink")
        try:
            with ctx.connect(ORDER_ECHO) as policy:
                start.wait(30.0)
                outcomes[i] = policy.run(
                    lambda: observation, clocks[i], max_actions=1_000_000,
                    max_seconds=seconds, validate=accept, progress=False,
                )
        except Exception as exc:  # counted and shown; the other robots go on
            errors[i] = f"{type(exc).__name__}: {exc}"

    log(f"many robots: {robots} Policies for {seconds:g} s")
    threads = [threading.Thread(target=drive, args=(i,), daemon=True) for i in range(robots)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(seconds + 120.0)
    after = ctx.gateway.counters()
    rows = []
    for i in range(robots):
        out = outcomes[i]
        order = check_order([row[6] for row in clocks[i].rows])
        if order.anomalies:
            section.notes.append(f"robot {i}: " + "; ".join(order.anomalies))
        intervals = [b - a for a, b in zip(clocks[i].times, clocks[i].times[1:])]
        period = Summary.of(intervals).scaled(1000.0)
        rows.append([
            f"robot {i}", "error: " + errors[i] if errors[i] else (out.reason if out else "n/a"),
            str(out.actions if out else len(clocks[i].times)), str(order.chunks),
            str(out.underruns if out else "n/a"), fmt(out.underrun_s if out else None, 2),
            str(order.out_of_order_chunks), str(order.out_of_order_steps),
            str(order.skipped_chunks), _rows(order), fmt(period.p99, 1),
        ])
    requests = after["requests"]["act"] - before["requests"]["act"]
    depth = after["max_queue_depth"].get(ORDER_ECHO, "n/a")
    section.tables.append(Table(
        f"8 Policies, one thread each, {seconds:g} s, gateway latency median {LATENCY_MS:g} ms",
        ["robot", "ended", "steps", "chunks played", "underruns", "underrun s",
         "chunks out of order", "steps out of order", "chunks skipped", "first row played",
         "step interval p99 ms"],
        rows, ctx.command("many_robots"),
        note=(
            f"{requests} act requests; the gateway's queue for the model reached depth {depth} "
            "(one simulated GPU per model serves requests first come, first served)."
        ),
    ))


def _nodes(ctx: Context, section: Section) -> None:
    try:
        from bench.ros_rig import RosProbe, start_robot, stop_robots, unique_namespace
    except ImportError as exc:
        section.notes.append(f"nodes not measured: {exc} (needs the ROS workspace: make setup)")
        return
    count = ctx.pick(4, 2)
    seconds = ctx.pick(15.0, 3.0)
    ctx.latency(LATENCY_MS)
    probe = RosProbe()
    robots = []
    results: list[Any] = []
    try:
        for i in range(count):
            log(f"many robots: starting robot {i} (sim_robot + node)")
            robots.append(start_robot(
                ctx, unique_namespace(f"robot{i}"), model=ORDER_ECHO,
                views=("exterior_1", "wrist_left"), fps=30.0,
            ))
        watches = [probe.watch(robot) for robot in robots]
        for robot in robots:
            probe.wait_for_joint_states(robot)
        time.sleep(1.0)
        log(f"many robots: {count} goals of {seconds:g} s at once")
        goals = [probe.send_goal(robot, f"{robot.namespace}: put the cup in the sink", seconds)
                 for robot in robots]
        for goal in goals:
            try:
                results.append(goal.result(seconds + 60.0)[1])
            except RuntimeError as exc:
                results.append(exc)
    finally:
        stop_robots(robots)
        probe.close()
    rows = []
    for i, (watch, result) in enumerate(zip(watches, results)):
        # The node publishes one command per step, then the hold (measured joints, which may
        # equal an earlier target exactly): only the steps are checked.
        played = getattr(result, "actions", len(watch.commands))
        order = check_order([values[6] for _, values in watch.commands[:played]
                             if len(values) > 6])
        if order.anomalies:
            section.notes.append(f"node {i}: " + "; ".join(order.anomalies))
        times = [t for t, _ in watch.commands]
        intervals = [b - a for a, b in zip(times, times[1:])]
        period = Summary.of(intervals[1:-1] if len(intervals) > 2 else intervals)
        ended = (f"error: {result}" if isinstance(result, Exception)
                 else f"{result.reason}")
        rows.append([
            f"node {i}", ended,
            str(getattr(result, "actions", "n/a")), str(order.chunks),
            str(getattr(result, "underruns", "n/a")),
            fmt(getattr(result, "underrun_s", None), 2),
            str(order.out_of_order_chunks), str(order.out_of_order_steps),
            str(order.skipped_chunks), _rows(order), fmt(period.median * 1000, 1),
            fmt(period.p99 * 1000, 1),
        ])
    section.tables.append(Table(
        f"{count} nodes in namespaces, each with its own sim_robot (light feed: two 1280×720 "
        f"rgb8 cameras at 30 Hz, joint states at 100 Hz), one {seconds:g} s goal each at the "
        "same time, config/droid.yaml's limits",
        ["node", "ended", "steps", "chunks played", "underruns", "underrun s",
         "chunks out of order", "steps out of order", "chunks skipped", "first row played",
         "command period p50 ms", "command period p99 ms"],
        rows, ctx.command("many_robots"),
        note=(
            "Order is read from the commands each node published (received by a subscriber in "
            "the bench); the hold published after the last step is not counted. Real-size "
            "frames: the nodes take only the frames their requests use (section 6)."
        ),
    ))


def run(ctx: Context) -> Section:
    section = Section(
        "many_robots",
        "Many robots against one gateway",
        intro=(
            "Every robot uses the bench's plug-in model `bench-order-echo-droid` "
            "(bench/order_policy.py): pi05-droid's geometry (two views, 15 Hz, 8 of 15 steps "
            "played), whose rows hold the observed joints and write into joint 7 a code for the "
            "request number (per robot, in the order the gateway served them) and the step "
            "index. A chunk played after a newer one, a repeated or skipped step within a chunk, "
            "or a chunk never played shows in the played values. *First row played*: the row "
            "each chunk after the first started at (the loop skips the rows whose time passed "
            "while the request was in flight), median (min–max). Gateway latency median "
            f"{LATENCY_MS:g} ms, lognormal sigma 0.3, prefetch on."
        ),
    )
    _policies(ctx, section)
    _nodes(ctx, section)
    return section
