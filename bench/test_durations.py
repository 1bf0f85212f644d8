"""Section test_durations: where `make test`'s time goes, from the JUnit report of its last run.

`make pytest` writes build/test-report.xml; this section reads it (it runs no test itself), so
the table describes the newest full suite run on this machine, dated by the report's own stamp.
Per folder of test/: tests, seconds, share of the run; then the slowest tests, as pytest's
`--durations` would list them (setup, call and teardown together).
"""

from __future__ import annotations

import xml.etree.ElementTree as ElementTree
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path

from bench.common import ROOT, Context
from bench.report import Section, Table

REPORT = ROOT / "build" / "test-report.xml"
SLOWEST = 15
NAME_CHARS = 100


@dataclass(frozen=True)
class TestTime:
    folder: str
    name: str
    seconds: float


def read_report(path: Path) -> tuple[list[TestTime], str]:
    """Every test case of a JUnit report and the run's timestamp."""
    root = ElementTree.parse(path).getroot()
    suites = [root] if root.tag == "testsuite" else list(root.iter("testsuite"))
    stamp = suites[0].get("timestamp", "") if suites else ""
    times = []
    for case in root.iter("testcase"):
        # classname is dotted from the rootdir: test.safety.test_gate.TestX -> safety
        parts = case.get("classname", "").split(".")
        folder = parts[1] if len(parts) > 2 and parts[0] == "test" else "(top)"
        name = f"{'/'.join(parts[1:] if parts[0] == 'test' else parts)}.py::{case.get('name')}"
        # Parametrised ids can run to hundreds of characters; the start identifies the test.
        name = name if len(name) <= NAME_CHARS else name[: NAME_CHARS - 1] + "…"
        times.append(TestTime(folder, name, float(case.get("time", 0.0))))
    return times, stamp


def run(ctx: Context) -> Section:
    section = Section("test_durations", "Test durations")
    if not REPORT.exists():
        section.intro = f"No {REPORT.relative_to(ROOT)}: run `make test` (or `make pytest`) first."
        return section
    times, stamp = read_report(REPORT)
    total = sum(t.seconds for t in times) or 1.0
    section.intro = (
        f"From the JUnit report of the last `make pytest` on this machine ({stamp}): "
        f"{len(times)} tests, {total:.0f} s of test time. `pytest -m \"not slow\"` skips the "
        "tests that start processes or ROS nodes."
    )
    folders: dict[str, list[float]] = defaultdict(list)
    for t in times:
        folders[t.folder].append(t.seconds)
    rows = [
        [name, str(len(secs)), f"{sum(secs):.1f}", f"{100 * sum(secs) / total:.0f} %"]
        for name, secs in sorted(folders.items(), key=lambda kv: -sum(kv[1]))
    ]
    section.tables.append(Table(
        "Per folder of test/", ["folder", "tests", "seconds", "share"], rows,
        command="make pytest; " + ctx.command("test_durations"),
    ))
    slowest = sorted(times, key=lambda t: -t.seconds)[:SLOWEST]
    section.tables.append(Table(
        f"The {SLOWEST} slowest tests", ["test", "seconds"],
        [[t.name, f"{t.seconds:.1f}"] for t in slowest],
        command="make pytest; " + ctx.command("test_durations"),
    ))
    return section
