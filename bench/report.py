"""The report's pieces (sections, tables, figures), the machine facts and the markdown writer."""

from __future__ import annotations

import datetime as dt
import os
import platform
import sys
from dataclasses import dataclass, field
from pathlib import Path

from bench.stats import markdown_table


@dataclass
class Table:
    """One table and the command that reproduces it."""

    title: str
    header: list[str]
    rows: list[list[str]]
    command: str
    note: str = ""


@dataclass
class Section:
    """One numbered section of docs/benchmarks.md."""

    key: str
    title: str
    intro: str = ""
    tables: list[Table] = field(default_factory=list)
    figures: list[tuple[str, str]] = field(default_factory=list)  # (file name, caption)
    notes: list[str] = field(default_factory=list)
    error: str = ""
    seconds: float = 0.0
    number: int = 0


def cpu_model() -> str:
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as handle:
            for line in handle:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def load_average() -> str:
    try:
        return ", ".join(f"{v:.2f}" for v in os.getloadavg())
    except OSError:
        return "n/a"


def machine_facts() -> list[tuple[str, str]]:
    return [
        ("date (UTC)", dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%d %H:%M")),
        ("CPU", cpu_model()),
        ("cores (nproc)", str(os.cpu_count())),
        ("load average at start (1, 5, 15 min)", load_average()),
        ("Python", sys.version.split()[0]),
        ("platform", platform.platform()),
        ("ROS_DISTRO", os.environ.get("ROS_DISTRO", "(wheels: jazzy from PyPI)")),
    ]


def write_markdown(
    path: Path,
    sections: list[Section],
    *,
    facts: list[tuple[str, str]],
    command: str,
    total_s: float,
    quick: bool,
) -> None:
    out: list[str] = []
    out.append("# Benchmarks")
    out.append("")
    out.append(
        "Written by `bench/run.py` (`make bench`); do not edit by hand. Every figure was measured "
        "in the run described below, against the local gateway on loopback; comparisons are "
        "ratios of figures from this same run. Benchmarks report: nothing here is asserted."
    )
    if quick:
        out.append("")
        out.append("**Quick smoke run**: few trials, short runs; the figures are not meaningful.")
    out.append("")
    out.append("## Machine")
    out.append("")
    out.append(markdown_table(["fact", "value"], [[k, v] for k, v in facts]))
    out.append("")
    out.append(f"Whole run: `{command}`, {total_s:.0f} s wall time. The cores are shared with "
               "other work, so the load average above is part of the conditions.")
    out.append("")
    for section in sections:
        out.append(f"## {section.number}. {section.title}")
        out.append("")
        if section.intro:
            out.append(section.intro)
            out.append("")
        if section.error:
            out.append(f"**This section failed in this run:** `{section.error}`")
            out.append("")
        for table in section.tables:
            out.append(f"**{table.title}** — reproduce: `{table.command}`")
            out.append("")
            out.append(markdown_table(table.header, table.rows))
            out.append("")
            if table.note:
                out.append(table.note)
                out.append("")
        for name, caption in section.figures:
            out.append(f"![{caption}]({name})")
            out.append("")
            out.append(f"*{caption}*")
            out.append("")
        for note in section.notes:
            out.append(f"- {note}")
        if section.notes:
            out.append("")
        out.append(f"<sub>section wall time {section.seconds:.0f} s</sub>")
        out.append("")
    path.write_text("\n".join(out), encoding="utf-8")
