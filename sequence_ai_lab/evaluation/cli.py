"""`python -m sequence_ai_lab.evaluation` / `ros2 run sequence_ai_ros evaluate`: seeded, interleaved
trials of a task per condition, judged, into results.json, report.md and report.png.

    python -m sequence_ai_lab.evaluation --sim --task "pick up the cup" --trials 20 \\
        --condition default= --condition one=params:one_in_flight.yaml \\
        --time-mode both --out eval/

Without --sim it drives a node and a world (or a real robot and its operator) already running.
docs/evaluation.md explains each option and metric.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import math
import os
import secrets
import signal
import sys
from collections.abc import Sequence
from pathlib import Path

from sequence_ai_lab.evaluation import report
from sequence_ai_lab.evaluation.claims import Claim, Claimed, claim_folder, claim_node
from sequence_ai_lab.evaluation.conditions import (
    Arm,
    ConditionError,
    Perturbation,
    parse_condition,
    schedule,
    time_modes,
    with_model_files,
)
from sequence_ai_lab.evaluation.results import (
    Results,
    ResultsError,
    check_same,
    load,
    save,
)
from sequence_ai_lab.evaluation.world import WorldMissing

DEFAULT_TASK = "pick up the cup"
# Exit status when no world answers (the bench reports the section as not run).
NO_WORLD = 3
# Trials per arm: each takes seconds of world time, so more is a typo, not an evaluation (and
# its plan alone would not fit in memory).
MAX_TRIALS = 10_000
# The parameters the report names beside the conditions (what a reader compares first).
REPORTED_PARAMETERS = ("model", "prefetch", "max_in_flight", "playback_speed", "smooth_seam",
                       "command_mode", "max_state_age_s", "max_image_age_s")


def parse(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m sequence_ai_lab.evaluation",
        description="Evaluate a task: seeded, interleaved trials per condition, judged by the "
        "world's task state or an operator; results.json, report.md, report.png in --out.",
    )
    parser.add_argument("--out", required=True, type=Path,
                        help="folder of results.json (continued if it exists), the report and "
                        "the episodes")
    parser.add_argument("--task", default=DEFAULT_TASK, help="the act goal's instruction and "
                        "the world's task (default %(default)r)")
    parser.add_argument("--trials", type=int, default=20,
                        help="trials per arm, one per seed (default %(default)s)")
    parser.add_argument("--first-seed", type=int, default=0,
                        help="layout seeds first-seed .. first-seed + trials - 1")
    parser.add_argument("--order-seed", type=int, default=0,
                        help="seed of the interleaved trial order (default %(default)s)")
    parser.add_argument("--condition", action="append", default=[], metavar="NAME=SPEC",
                        help="NAME=model:MODEL, NAME=params:FILE.yaml, both comma-separated, or "
                        "NAME= for the node as it is; repeatable (default: default=)")
    parser.add_argument("--time-mode", default="realtime",
                        help="the world's time_mode: realtime, frozen or both")
    parser.add_argument("--perturb", default=None, metavar="OBJECT:DX,DY@SECONDS",
                        help="move the object by (dx, dy) m this many seconds into each goal")
    parser.add_argument("--judge", choices=("world", "operator", "vlm"), default="world",
                        help="world: the world's ~/task_state; operator: a verdict through "
                        "this evaluator's ~/verdict service (a real robot); vlm: the "
                        "--vlm-judge model's")
    parser.add_argument("--vlm-judge", default="", metavar="CHAT_MODEL",
                        help="also ask this chat model for a verdict on the node's last frames "
                        "after each goal (a second opinion, or the verdict with --judge vlm); "
                        "its key: SEQUENCES_API_KEY")
    parser.add_argument("--planner", default="", metavar="CHAT_MODEL",
                        help="send the task through the VLM planner on this chat model: its "
                        "steps as act goals, each handed over to the next (default: the task "
                        "as one act goal); its key: SEQUENCES_API_KEY")
    parser.add_argument("--max-seconds", type=float, default=30.0,
                        help="the act goal's max_seconds, each step's with --planner (default "
                        "%(default)s)")
    parser.add_argument("--task-seconds", type=float, default=120.0,
                        help="with --planner: the whole task's time, all steps together "
                        "(default %(default)s)")
    parser.add_argument("--settle-s", type=float, default=1.0,
                        help="world seconds after a reset before the goal (default %(default)s)")
    parser.add_argument("--keep-going", action="store_true",
                        help="let a goal run on after the world judged success (default: "
                        "cancel it then)")
    parser.add_argument("--sim", action="store_true",
                        help="start the local gateway, the simulated world and the node, and "
                        "stop them at the end")
    parser.add_argument("--model", default="pi05-droid",
                        help="with --sim: the model the node starts with (its robot and "
                        "parameters files; default %(default)s)")
    parser.add_argument("--namespace", default="", help="namespace of the node and the world")
    parser.add_argument("--node", default="", help="the node's full name (default "
                        "/<namespace>/sequence_ai)")
    parser.add_argument("--world", default="", help="the world node's full name (default "
                        "/<namespace>/sim_robot); 'none': the operator resets the scene and "
                        "calls ~/ready")
    parser.add_argument("--report-only", action="store_true",
                        help="only write report.md and report.png from --out's results.json")
    args = parser.parse_args(argv)
    if args.judge == "vlm" and not args.vlm_judge:
        parser.error("--judge vlm: expected --vlm-judge CHAT_MODEL")
    if not 1 <= args.trials <= MAX_TRIALS:
        parser.error(f"--trials {args.trials}: expected 1 to {MAX_TRIALS}")
    if args.out.exists() and not args.out.is_dir():
        parser.error(f"--out {args.out}: is a file; expected a folder (new or an evaluation's)")
    for name in ("max_seconds", "settle_s", "task_seconds"):
        value = getattr(args, name)
        if not (math.isfinite(value) and value >= 0) or (name != "settle_s" and value == 0):
            parser.error(f"--{name.replace('_', '-')} {value}: expected a positive number")
    return args


def build_arms(args: argparse.Namespace) -> dict[str, Arm]:
    conditions = [parse_condition(c) for c in (args.condition or ["default="])]
    if args.sim:
        # The started robot's model files; a real robot's node keeps its own topics and views.
        conditions = [with_model_files(c, args.model) for c in conditions]
    names = [c.name for c in conditions]
    if len(set(names)) != len(names):
        raise ConditionError(f"conditions {names}: expected distinct names")
    modes = time_modes(args.time_mode)
    arms = [Arm(c, m) for c in conditions for m in modes]
    return {arm.key(len(modes) > 1): arm for arm in arms}


def evaluation_settings(args: argparse.Namespace, arms: dict[str, Arm]) -> dict[str, object]:
    seeds = list(range(args.first_seed, args.first_seed + args.trials))
    perturb = Perturbation.parse(args.perturb).text() if args.perturb else None
    return {
        "task": args.task, "arms": list(arms), "seeds": seeds, "order_seed": args.order_seed,
        "perturb": perturb, "judge": args.judge,
        "conditions": {a.condition.name: a.condition.spec for a in arms.values()},
        "overlays": {a.condition.name: a.condition.overlay() for a in arms.values()},
        "max_seconds": args.max_seconds, "settle_s": args.settle_s,
        "stop_on_success": not args.keep_going, "vlm_judge": args.vlm_judge or None,
        "planner": args.planner or None,
        "task_seconds": args.task_seconds if args.planner else None,
    }


def catalogue_revision(base_url: str) -> str:
    """A content hash of the catalogue the models came from (GET /v1/models needs no key)."""
    import sequence_ai

    try:
        rows = [model.raw for model in sequence_ai.models(base_url=base_url or None)]
    except Exception as exc:  # noqa: BLE001 - provenance only: say why it is missing
        return f"unavailable ({type(exc).__name__}: {exc})"
    digest = hashlib.sha256(json.dumps(rows, sort_keys=True).encode("utf-8")).hexdigest()
    return f"sha256:{digest[:16]} of GET /v1/models ({len(rows)} models)"


def package_version() -> str:
    from importlib import metadata

    try:
        return metadata.version("sequence_ai_ros")
    except metadata.PackageNotFoundError:
        import sequence_ai

        return f"{sequence_ai.__version__} (source tree)"


def main(argv: Sequence[str] | None = None) -> int:
    args = parse(argv)
    out: Path = args.out
    lock: Claim | None = None
    try:
        arms = build_arms(args)
        settings = evaluation_settings(args, arms)
        if not args.report_only:
            # Before reading results.json: another evaluation may be writing it.
            lock = claim_folder(out)
        previous = load(out)
        if previous is not None:
            check_same(previous, settings, out)
    except (ConditionError, ResultsError, Claimed) as exc:
        if lock is not None:
            lock.release()
        print(f"evaluate: {exc}", file=sys.stderr)
        return 2
    if lock is None:
        if previous is None:
            print(f"evaluate: {out}/results.json does not exist", file=sys.stderr)
            return 2
        print("wrote " + ", ".join(map(str, report.write(previous, out))))
        return 0
    try:
        return _evaluate(args, arms, previous or Results(settings, {}, []))
    finally:
        lock.release()


def _evaluate(args: argparse.Namespace, arms: dict[str, Arm], results: Results) -> int:
    out: Path = args.out
    seeds = list(range(args.first_seed, args.first_seed + args.trials))
    order = [(t.index, t.arm, t.seed) for t in schedule(list(arms), seeds, args.order_seed)]
    os.environ.setdefault("ROS_AUTOMATIC_DISCOVERY_RANGE", "LOCALHOST")
    # SIGTERM ends the run like Ctrl+C: the processes started are stopped, the results kept.
    signal.signal(signal.SIGTERM, signal.default_int_handler)
    code = 0
    try:
        _run(args, arms, results, order)
    except KeyboardInterrupt:
        print("evaluate: interrupted; run the same command again to continue", flush=True)
        code = 130
    except WorldMissing as exc:
        print(f"evaluate: {exc}", file=sys.stderr, flush=True)
        code = NO_WORLD
    except Claimed as exc:
        print(f"evaluate: {exc}", file=sys.stderr, flush=True)
        code = 2
    except Exception as exc:  # noqa: BLE001 - report what failed; results so far are kept
        print(f"evaluate: {type(exc).__name__}: {exc}", file=sys.stderr, flush=True)
        code = 1
    if results.trials:
        save(out, results)
        print("wrote " + ", ".join(map(str, report.write(results, out))), flush=True)
    return code


def _run(args: argparse.Namespace, arms: dict[str, Arm], results: Results,
         order: list[tuple[int, str, int]]) -> None:
    from sequence_ai_lab.demo.planner import Planner
    from sequence_ai_lab.evaluation import processes
    from sequence_ai_lab.evaluation.planned import PlannedTask
    from sequence_ai_lab.evaluation.runner import Evaluator, TrialSettings
    from sequence_ai_lab.evaluation.vlm_judge import VlmJudge
    from sequence_ai_ros.params.launch import SIM_KEY_ENV

    out: Path = args.out
    namespace = args.namespace.strip("/")
    prefix = f"/{namespace}" if namespace else ""
    node_path = args.node or f"{prefix}/sequence_ai"
    world_path = "" if args.world == "none" else (args.world or f"{prefix}/sim_robot")
    sim = None
    planner = None
    built: Evaluator | None = None
    api_key = os.environ.get("SEQUENCES_API_KEY")
    # Before anything starts: a second evaluation of the node would preempt this one's goals.
    claim = claim_node(node_path)
    try:
        if args.sim:
            # The launch's gateway takes this key: the VLM judge's chat calls use it too.
            api_key = os.environ[SIM_KEY_ENV] = secrets.token_urlsafe(24)
            sim = processes.start(args.model, namespace, out / "logs")
            print(f"started {sim.pids()} (logs in {out / 'logs'})", flush=True)
            node_path = args.node or sim.node_path
            world_path = args.world if args.world and args.world != "none" else sim.world_path
        planner = Planner("sequence_ai_evaluate", namespace=f"/{namespace}")
        trial_settings = TrialSettings(
            task=args.task, max_seconds=args.max_seconds, settle_s=args.settle_s,
            stop_on_success=not args.keep_going, judge=args.judge,
            perturb=Perturbation.parse(args.perturb) if args.perturb else None,
            record_dir=out / "episodes",
        )
        evaluator = built = Evaluator(
            planner, node_path=node_path, world_path=world_path, arms=arms,
            settings=trial_settings, out=out, log=lambda line: print(line, flush=True))
        baseline = evaluator.control.read_baseline()
        saved = results.provenance.get("node_parameters")
        if isinstance(saved, dict) and results.trials and not args.sim:
            # A killed run cannot restore the node: its own values are the first run's.
            left = {n: v for n, v in evaluator.own_values().items() if saved.get(n) != v}
            if left:
                print(f"the node's {left} differ from before this evaluation began: using "
                      f"{ {n: saved.get(n) for n in left} }", flush=True)
            baseline = evaluator.control.baseline = dict(saved)
        base_url = str(baseline.get("base_url") or "")
        if args.vlm_judge:
            evaluator.vlm = VlmJudge(planner.node, node_path, args.vlm_judge,
                                     base_url=base_url or None, api_key=api_key)
        if args.planner:
            if api_key:
                # The planner's client reads its key where the node's does.
                os.environ["SEQUENCES_API_KEY"] = api_key
            evaluator.planned = PlannedTask(
                planner, task=args.task, chat_model=args.planner, node_path=node_path,
                base_url=base_url, step_seconds=args.max_seconds, task_seconds=args.task_seconds,
            )
        results.provenance.update({
            "package_version": package_version(),
            "catalogue_revision": catalogue_revision(base_url),
            "base_url": base_url or "(SEQUENCES_BASE_URL or the hosted API)",
            "node": node_path, "world": world_path or "(operator)",
            "parameters": {k: baseline.get(k) for k in REPORTED_PARAMETERS},
            "node_parameters": dict(baseline),
        })
        save(out, results)
        evaluator.run(results, order)
    finally:
        # A node the evaluation did not start goes back to its own settings, however the run
        # ends (a started one is stopped below).
        if built is not None and sim is None:
            try:
                built.restore()
            except Exception as exc:  # noqa: BLE001 - the run's own ending stands; say this too
                print(f"evaluate: could not restore the node ({type(exc).__name__}: {exc}); "
                      "set its parameters back by hand", file=sys.stderr, flush=True)
        if planner is not None:
            planner.close()
        if sim is not None:
            print(f"stopped {sim.stop()}", flush=True)
        claim.release()
