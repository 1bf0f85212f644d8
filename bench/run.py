"""``make bench``: run every section, write docs/benchmarks.md and the docs/bench_*.png plots.

    bench/run.py                 full run (about 8-12 minutes on 2 cores) → docs/
    bench/run.py --quick         smoke run (about a minute) → a temporary directory
    bench/run.py --only pacing   one section (comma-separated keys) → a temporary directory

Only a full run of every section writes docs/; quick and partial runs never touch it.
Exit status 1 when a section raised (its error is also written into the report).
"""

from __future__ import annotations

import argparse
import importlib
import os
import sys
import tempfile
import time
import traceback
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
# Run as a script, the repo root (home of sequence_ai and bench) is not on the path; test/ holds
# the gateway fixture (run_gateway) the benchmarks start their gateways with.
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))
if str(ROOT / "test") not in sys.path:
    sys.path.append(str(ROOT / "test"))

SECTIONS = (
    "stop_latency",
    "continuity",
    "connection_reuse",
    "pacing",
    "observation_cost",
    "node_e2e",
    "command_modes",
    "many_robots",
    "recording",
    "bringup",
    "reliability",
    "handover",
    "models",
    "request_rate",
    "evaluation",
    "test_durations",
    "world",
    "gateway_vision",
)


def _parse(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="short smoke run (about a minute)")
    parser.add_argument("--only", default="", help=f"comma-separated sections of {SECTIONS}")
    parser.add_argument("--out", default="", help="directory for the report and plots")
    args = parser.parse_args(argv)
    keys = [k.strip() for k in args.only.split(",") if k.strip()]
    unknown = [k for k in keys if k not in SECTIONS]
    if unknown:
        parser.error(f"--only {args.only!r}: unknown {unknown}; expected keys of {SECTIONS}")
    args.keys = [k for k in SECTIONS if k in keys] if keys else list(SECTIONS)
    return args


def _out_dir(args: argparse.Namespace) -> tuple[Path, str]:
    """Where to write and the report's file name; docs/ only for a full run of everything."""
    if args.out:
        return Path(args.out), "benchmarks-quick.md" if args.quick else "benchmarks.md"
    if args.quick:
        return Path(tempfile.gettempdir()) / "sequence_ai_bench_quick", "benchmarks-quick.md"
    if args.keys != list(SECTIONS):
        return Path(tempfile.gettempdir()) / "sequence_ai_bench_partial", "benchmarks.md"
    return ROOT / "docs", "benchmarks.md"


def main(argv: list[str] | None = None) -> int:
    args = _parse(argv)
    # Child processes (gateway, sim_robot, nodes) import this checkout and stay on loopback.
    paths = [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]
    if str(ROOT) not in paths:
        os.environ["PYTHONPATH"] = os.pathsep.join([str(ROOT), *paths])
    os.environ.setdefault("ROS_AUTOMATIC_DISCOVERY_RANGE", "LOCALHOST")
    os.environ.setdefault("ROS_LOCALHOST_ONLY", "1")
    # Every ROS process of the bench (and this one) with the launch plan's transport profile.
    from sequence_ai_ros.params.launch import dds_profile_env

    os.environ.update(dds_profile_env())
    import matplotlib

    matplotlib.use("Agg")

    from support.gateway_fixture import run_gateway

    import sequence_ai
    from bench.common import ORDER_POLICY_SPEC, Context, log
    from bench.report import Section, load_average, machine_facts, write_markdown

    out_dir, name = _out_dir(args)
    out_dir.mkdir(parents=True, exist_ok=True)
    facts = machine_facts()
    command = "make bench" + (" QUICK=1" if args.quick else "")
    if args.keys != list(SECTIONS):
        command += f" ARGS='--only {','.join(args.keys)}'"
    started = time.monotonic()
    sections: list[Section] = []
    # One gateway process for every section but the TLS one: it is the "cloud", so it runs
    # outside this process and its work does not share this interpreter's GIL.
    with run_gateway(subprocess=True, policies=[ORDER_POLICY_SPEC]) as gateway:
        rows = sequence_ai.models(endpoint="act", api_key=gateway.api_key, base_url=gateway.url)
        ctx = Context(
            quick=args.quick,
            out_dir=out_dir,
            gateway=gateway,
            models={row.short_id: row for row in rows},
            # Process logs and probe files never go into docs/.
            log_dir=Path(tempfile.mkdtemp(prefix="sequence_ai_bench_logs_")),
        )
        log(f"process logs in {ctx.log_dir}")
        for key in args.keys:
            log(f"section {key}")
            t0 = time.monotonic()
            module = importlib.import_module(f"bench.{key}")
            try:
                section = module.run(ctx)
            except Exception as exc:  # reported in the document; the run goes on
                traceback.print_exc()
                section = Section(key, key.replace("_", " "), error=f"{type(exc).__name__}: {exc}")
            section.seconds = time.monotonic() - t0
            section.number = SECTIONS.index(key) + 1
            sections.append(section)
            gateway.clear_faults()
    total = time.monotonic() - started
    facts.append(("load average at end (1, 5, 15 min)", load_average()))
    path = out_dir / name
    write_markdown(path, sections, facts=facts, command=command, total_s=total, quick=args.quick)
    failed = [s.key for s in sections if s.error]
    log(f"wrote {path} in {total:.0f} s" + (f"; FAILED sections: {failed}" if failed else ""))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
