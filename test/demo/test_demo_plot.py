"""demo.png from a recorded run: with matplotlib, and with Pillow alone without it."""

from __future__ import annotations

import sys
import types
from pathlib import Path

import pytest

from sequence_ai_ros.demo.plot import draw
from sequence_ai_ros.demo.run import Demo, _parse

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
            (begin + k * 0.2, types.SimpleNamespace(speed=1.0 - 0.02 * (k % 10), in_flight=k % 3))
            for k in range(25)
        ]
    first.result = types.SimpleNamespace(reason="preempted")
    second.result = types.SimpleNamespace(reason="timeout")
    return demo


def colours(path: Path) -> int:
    with Image.open(path) as picture:
        assert picture.format == "PNG" and picture.width >= 800
        return len(picture.convert("RGB").getcolors(maxcolors=1 << 20) or [])


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
