"""demo.png from a recorded run: with matplotlib, and with Pillow alone without it; for the DROID
arm, the two-arm robot and a Cartesian arm."""

from __future__ import annotations

import sys
import types
from pathlib import Path

import pytest

from sequence_ai_lab.demo import robots
from sequence_ai_lab.demo.plot import draw, layout, panel_label
from sequence_ai_lab.demo.run import Demo, _parse

Image = pytest.importorskip("PIL.Image")


def recorded_demo() -> Demo:
    """A run as the demo records it: the arm goes to target 1, then (preempted) to target 2."""
    demo = Demo(_parse(["--max-seconds", "10", "--planner", "scripted"]))
    first, second = demo.goals
    demo.t0 = 100.0
    start = [0.0, -0.785, 0.0, -2.356, 0.0, 1.571, 0.785]
    for i in range(200):
        t = 100.0 + i * 0.05
        goal = first if t < 105.0 else second
        k = min(1.0, ((t - 100.0) % 5.0) / 2.0)
        origin = start if goal is first else first.target
        q = [o + k * (g - o) for o, g in zip(origin, goal.target)]
        demo.recording.joint_t.append(t)
        demo.recording.joints.append(q)
        if i % 4 == 0:
            demo.recording.target_t.append(t)
            demo.recording.targets.append(q)
    first.sent_t, first.end_t, demo.preempt_t = 100.0, 105.0, 105.0
    second.sent_t, second.end_t = 105.0, 110.0
    first.chunk_times, first.underrun_times = [100.7, 101.5, 102.3], [101.4]
    second.chunk_times, second.underrun_times = [105.8, 106.6], [106.5]
    # The node's feedback at 5 Hz: speed and requests in flight as the picture shows them.
    for goal, begin in ((first, 100.0), (second, 105.0)):
        goal.feedback = [
            (begin + k * 0.2, types.SimpleNamespace(speed=1.0 - 0.02 * (k % 10), in_flight=k % 3,
                                                  observation_age_s=0.1 * (k % 7)))
            for k in range(25)
        ]
    first.result = types.SimpleNamespace(reason="preempted")
    second.result = types.SimpleNamespace(reason="timeout")
    return demo


def _stand_in_target(instruction: str) -> list[float]:
    # Stands in for the gateway's ee target function (merged later): a point in the target box.
    return [0.5, 0.2, 0.4] if "pick" in instruction else [0.4, -0.2, 0.25]


@pytest.fixture
def cartesian(monkeypatch: pytest.MonkeyPatch) -> str:
    """`--model sim-ee-absolute-reach` with a stand-in target: the demo's Cartesian path."""
    model = "sim-ee-absolute-reach"
    monkeypatch.setitem(
        robots.ROBOTS, model, robots.cartesian_robot(model, "ee_absolute", _stand_in_target)
    )
    return model


def recorded_run(model: str) -> Demo:
    """Any robot's run: each channel the target covers moves to goal 1's, then to goal 2's;
    the node's commands arrive on each command topic as the robot names them."""
    demo = Demo(_parse(["--max-seconds", "10", "--planner", "scripted", "--model", model]))
    robot = demo.robot
    first, second = demo.goals
    demo.t0 = 100.0
    start = [0.0] * len(robot.channels)
    for i in range(200):
        t = 100.0 + i * 0.05
        goal = first if t < 105.0 else second
        k = min(1.0, ((t - 100.0) % 5.0) / 2.0)
        origin = start if goal is first else first.target + start[len(first.target):]
        aim = goal.target + [1.0 if k > 0.9 else 0.0] * (len(start) - len(goal.target))
        q = [o + k * (g - o) for o, g in zip(origin, aim)]
        demo.recording.joint_t.append(t)
        demo.recording.joints.append(q)
        for command in robot.commands if i % 4 == 0 else ():
            values = q[command.first:]
            msg = types.SimpleNamespace(
                data=values,
                pose=types.SimpleNamespace(position=types.SimpleNamespace(
                    x=values[0], y=values[1 % len(values)], z=values[2 % len(values)])),
            )
            demo.recording.target_t.append(t)
            demo.recording.targets.append(robot.command_row(command, msg))
    first.sent_t, first.end_t, demo.preempt_t = 100.0, 105.0, 105.0
    second.sent_t, second.end_t = 105.0, 110.0
    first.chunk_times, second.chunk_times = [100.7, 101.5], [105.8]
    for goal, begin in ((first, 100.0), (second, 105.0)):
        goal.feedback = [
            (begin + k * 0.2,
             types.SimpleNamespace(speed=1.0, in_flight=k % 3, observation_age_s=0.3))
            for k in range(25)
        ]
    first.result = types.SimpleNamespace(reason="preempted")
    second.result = types.SimpleNamespace(reason="timeout")
    return demo


def colours(path: Path) -> int:
    with Image.open(path) as picture:
        assert picture.format == "PNG" and picture.width >= 800
        return len(picture.convert("RGB").getcolors(maxcolors=1 << 20) or [])


@pytest.mark.slow  # over half a second of wall time
def test_matplotlib_picture(tmp_path: Path) -> None:
    pytest.importorskip("matplotlib")
    out = tmp_path / "demo.png"
    assert draw(recorded_demo(), out) == str(out)
    assert colours(out) > 20  # curves, markers and spans, not an empty canvas


def test_pillow_picture_when_matplotlib_is_missing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(sys.modules, "matplotlib", None)  # import matplotlib -> ImportError
    out = tmp_path / "sub" / "demo.png"
    assert draw(recorded_demo(), out) == str(out)
    assert colours(out) > 5


def test_the_droid_arm_keeps_its_ten_panels() -> None:
    demo = recorded_demo()
    grid = layout(demo.robot)
    labels = [panel_label(demo.robot, p) for row in grid for p in row if p is not None]
    assert labels == [
        *(f"panda_joint{j} (rad)" for j in range(1, 8)),
        "distance to target (rad)", "playback speed", "requests in flight",
    ]
    assert [len(row) for row in grid] == [2] * 5


def test_the_two_arm_robot_gets_a_column_per_arm() -> None:
    robot = robots.ROBOTS["sim-bimanual-reach"]
    grid = layout(robot)
    columns = [[panel_label(robot, row[c]) for row in grid if row[c] is not None]
               for c in range(2)]
    for column, side in zip(columns, ("left", "right")):
        assert column[:8] == [
            *(f"{side}_joint{j} (rad)" for j in range(1, 7)),
            f"{side}_gripper (0 open, 1 closed)",
            f"{side} arm: distance to target (rad)",
        ]
    assert [columns[0][8], columns[1][8]] == ["playback speed", "requests in flight"]


def test_a_cartesian_arm_shows_x_y_z_and_the_distance_in_metres(cartesian: str) -> None:
    robot = robots.ROBOTS[cartesian]
    labels = [panel_label(robot, p) for row in layout(robot) for p in row if p is not None]
    assert labels == ["x (m)", "y (m)", "z (m)", "distance to target (m)", "playback speed",
                      "requests in flight"]


@pytest.mark.slow  # over half a second of wall time
@pytest.mark.parametrize("model", ["sim-bimanual-reach", "sim-ee-absolute-reach"])
@pytest.mark.parametrize("backend", ["matplotlib", "pillow"])
def test_any_robots_picture(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, cartesian: str, model: str, backend: str
) -> None:
    if backend == "matplotlib":
        pytest.importorskip("matplotlib")
    else:
        monkeypatch.setitem(sys.modules, "matplotlib", None)
    demo = recorded_run(model)
    out = tmp_path / "demo.png"
    assert draw(demo, out) == str(out)
    with Image.open(out) as picture:
        # One row of panels per channel pair (or per arm joint), each the same height.
        rows = len(layout(demo.robot))
        assert picture.height >= 200 * rows
    assert colours(out) > 5


def _judged(demo: Demo) -> Demo:
    """The run with a physics world's task state: the cup lifted from 6 s, success at 8 s."""
    for i in range(100):
        t = 100.0 + i * 0.1
        demo.recording.task_t.append(t)
        demo.recording.task_values.setdefault("cup_height", []).append(
            max(0.0, (t - 106.0) * 0.05))
        demo.recording.task_values.setdefault("cup_block_distance", []).append(0.3)
    demo.recording.success_t = 108.0
    return demo


def test_a_judging_world_adds_the_cups_panels_and_marks_success() -> None:
    demo = _judged(recorded_demo())
    grid = layout(demo.robot, task=True)
    labels = [panel_label(demo.robot, p) for row in grid for p in row if p is not None]
    assert labels[-2:] == ["cup above the table (m)", "cup to block, across the table (m)"]
    from sequence_ai_lab.demo.plot import _series, panel_data

    series = _series(demo)
    assert series.success_t == pytest.approx(8.0)
    ((ts, heights, _),) = panel_data(series, ("task", "cup_height")).curves
    assert ts[0] == pytest.approx(0.0) and max(heights) == pytest.approx(0.195)


@pytest.mark.slow  # over half a second of wall time
@pytest.mark.parametrize("backend", ["matplotlib", "pillow"])
def test_the_judged_picture_is_taller_by_a_row(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, backend: str
) -> None:
    if backend == "matplotlib":
        pytest.importorskip("matplotlib")
    else:
        monkeypatch.setitem(sys.modules, "matplotlib", None)
    plain, judged = tmp_path / "plain.png", tmp_path / "judged.png"
    draw(recorded_demo(), plain)
    draw(_judged(recorded_demo()), judged)
    with Image.open(plain) as a, Image.open(judged) as b:
        assert b.height > a.height


def test_a_judged_run_draws_no_instruction_targets_and_shows_the_observations_age() -> None:
    from sequence_ai_lab.demo.plot import _series, panel_data

    demo = _judged(recorded_demo())
    labels = [panel_label(demo.robot, p) for row in layout(demo.robot, task=True) for p in row
              if p is not None]
    assert "distance to target (rad)" not in labels
    assert "observation age behind the step (s)" in labels
    series = _series(demo)
    assert series.judged
    assert panel_data(series, ("channel", 0)).levels == []
    # Without a judging world the targets are what the simulated models aim at: drawn.
    assert panel_data(_series(recorded_demo()), ("channel", 0)).levels
    # Nor does the demo say how much closer each goal came to a target it did not aim at.
    demo.recording.task_state = object()
    assert demo.report() == []
