"""The trial loop over ROS: apply an arm to the node through its lifecycle, reset the world
with the trial's seed, send the task as one `act` goal, judge it, record it, move on.

The node is driven only through what any planner has: its lifecycle services, its parameters,
its `act` action and /diagnostics. A condition is applied by deactivate, cleanup, parameters,
configure, activate — never by a restart, which a real robot's node may not allow.
"""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path

from diagnostic_msgs.msg import DiagnosticArray, DiagnosticStatus
from rcl_interfaces.msg import ParameterValue
from rclpy.node import Node
from rclpy.parameter import Parameter, parameter_value_to_python

from sequence_ai_interfaces.action import Act
from sequence_ai_interfaces.msg import TaskState
from sequence_ai_lab.demo.planner import ActClient, LifecycleClient, ParameterClient, Planner
from sequence_ai_lab.evaluation.conditions import Arm, Perturbation
from sequence_ai_lab.evaluation.conditions import ParameterValue as Value
from sequence_ai_lab.evaluation.labels import label, set_aside_unjudged
from sequence_ai_lab.evaluation.metrics import EpisodeMetrics, episode_metrics
from sequence_ai_lab.evaluation.planned import PlannedTask, combined, is_fault
from sequence_ai_lab.evaluation.results import Results, TrialResult, save
from sequence_ai_lab.evaluation.vlm_judge import VlmJudge
from sequence_ai_lab.evaluation.world import OperatorDesk, World, WorldError

READY_TIMEOUT_S = 120.0
WORLD_TIMEOUT_S = 20.0
# Inputs younger than this in two reports running: the node will not end a goal on a stale frame.
STEADY_AGE_S = 0.25
STEADY_REPORTS = 2
EPISODE_CLOSE_S = 15.0
RESULT_GRACE_S = 30.0
# How long a failed switch waits for the node's diagnostics to say why (it reports each second).
PROBLEM_WAIT_S = 3.0


class TrialFault(RuntimeError):
    """Something other than the task went wrong in a trial; the trial fails with this reason."""


class TransitionFailed(TrialFault):
    """The node refused a lifecycle transition (its diagnostics may say why)."""


@dataclass
class TrialSettings:
    """How each trial runs."""

    task: str
    max_seconds: float
    settle_s: float = 1.0
    stop_on_success: bool = True
    judge: str = "world"  # world | operator | vlm
    perturb: Perturbation | None = None
    record_dir: Path | None = None


class NodeHealth:
    """The node's /diagnostics status, for "ready with fresh inputs" and the model it runs.
    Written by the executor's thread, read by the trial's; `_lock` guards both fields."""

    def __init__(self, node: Node, node_path: str) -> None:
        self._prefix = f"{node_path}:"
        # Lock order: a leaf (nothing is taken under it).
        self._lock = threading.Condition()
        self._values: dict[str, str] = {}
        self._steady = 0
        self._problem = ""  # the message of its last report at ERROR level ("" otherwise)
        node.create_subscription(DiagnosticArray, "/diagnostics", self._on_diagnostics, 10)

    def _on_diagnostics(self, msg: DiagnosticArray) -> None:
        for status in msg.status:
            if not status.name.startswith(self._prefix):
                continue
            values = {kv.key: kv.value for kv in status.values}
            ages = [_seconds(v) for k, v in values.items() if k.endswith("_age_s")]
            fresh = bool(ages) and all(a < STEADY_AGE_S for a in ages)
            steady = fresh and values.get("ready") == "true" and values.get("lifecycle") == (
                "active")
            with self._lock:
                self._values = values
                self._problem = status.message if status.level == DiagnosticStatus.ERROR else ""
                self._steady = self._steady + 1 if steady else 0
                self._lock.notify_all()

    def forget(self) -> None:
        """Reports before now do not count (the node was just reconfigured)."""
        with self._lock:
            self._steady = 0
            self._problem = ""

    def wait_problem(self, timeout_s: float) -> str:
        """The problem the node reports (say, why its configure failed), waiting up to
        `timeout_s` for a report of one; "" when none came."""
        with self._lock:
            self._lock.wait_for(lambda: bool(self._problem), timeout_s)
            return self._problem

    def wait_steady(self, timeout_s: float) -> None:
        with self._lock:
            if not self._lock.wait_for(lambda: self._steady >= STEADY_REPORTS, timeout_s):
                raise TrialFault(
                    f"the node did not report a ready model and fresh inputs within "
                    f"{timeout_s:g} s (last report: {self._values or 'none'})"
                )

    def value(self, key: str) -> str:
        with self._lock:
            return self._values.get(key, "")


def _seconds(text: str) -> float:
    try:
        return float(text)
    except ValueError:
        return math.inf


def _python(value: ParameterValue) -> Value | None:
    converted = parameter_value_to_python(value)
    return converted if not hasattr(converted, "tolist") else converted.tolist()


@dataclass
class NodeControl:
    """The node's lifecycle and parameters, and what it ran with before any condition."""

    lifecycle: LifecycleClient
    parameters: ParameterClient
    baseline: dict[str, Value | None] = field(default_factory=dict)

    # The lifecycle state the node was in before the evaluation (restored at its end).
    initial_state: str = ""

    def read_baseline(self, timeout_s: float = READY_TIMEOUT_S) -> dict[str, Value | None]:
        self.initial_state = self.lifecycle.state(timeout_s)
        self.baseline = {name: _python(v) for name, v in self.parameters.values().items()}
        return self.baseline

    def restore(self, values: Mapping[str, Value], timeout_s: float) -> None:
        """Back to `values` and the lifecycle state read with the baseline: down to
        unconfigured, set, then up again as far as the node was."""
        state = self.lifecycle.state(timeout_s)
        steps = {"active": ("deactivate", "cleanup"), "inactive": ("cleanup",)}.get(state, ())
        for transition in steps:
            if not self.lifecycle.transition(transition, timeout_s):
                raise TrialFault(f"{transition} of {self.lifecycle.target} failed")
        self.set(values)
        up = {"active": ("configure", "activate"), "inactive": ("configure",)}
        for transition in up.get(self.initial_state, ()):
            if not self.lifecycle.transition(transition, timeout_s):
                raise TrialFault(f"{transition} of {self.lifecycle.target} with its own "
                                 f"parameters failed")

    def check(self, values: Mapping[str, Value]) -> None:
        """The node holds `values` (read back): a condition runs as it says, or not at all."""
        actual = {name: _python(v) for name, v in self.parameters.values().items()}
        wrong = {n: actual.get(n) for n, v in values.items() if actual.get(n) != v}
        if wrong:
            raise TrialFault(f"the node holds {wrong} after the condition set "
                             f"{ {n: values[n] for n in wrong} }")

    def bring_up(self, values: Mapping[str, Value], timeout_s: float) -> None:
        """From any state to active with `values` set while unconfigured."""
        state = self.lifecycle.state(timeout_s)
        steps = {"active": ("deactivate", "cleanup"), "inactive": ("cleanup",)}.get(state, ())
        for transition in steps:
            if not self.lifecycle.transition(transition, timeout_s):
                raise TrialFault(f"{transition} of {self.lifecycle.target} failed")
        self.set(values)
        self.check(values)
        for transition in ("configure", "activate"):
            if not self.lifecycle.transition(transition, timeout_s):
                raise TransitionFailed(
                    f"{transition} of {self.lifecycle.target} failed with {dict(values)}"
                )

    def set(self, values: Mapping[str, Value]) -> None:
        if not values:
            return
        typed = {n: Parameter(n, value=v).get_parameter_value() for n, v in values.items()}
        for name, outcome in zip(typed, self.parameters.set_values(typed)):
            if not outcome.successful:
                raise TrialFault(f"the node refused {name}={values[name]!r}: {outcome.reason}")


class Evaluator:
    """Runs scheduled trials of the arms, writing results.json after each one."""

    def __init__(
        self,
        planner: Planner,
        *,
        node_path: str,
        world_path: str,
        arms: Mapping[str, Arm],
        settings: TrialSettings,
        out: Path,
        log: Callable[[str], None] = print,
    ) -> None:
        self.node_path = node_path
        self.arms = dict(arms)
        self.settings = settings
        self.out = out
        self.log = log
        node = planner.node
        self.control = NodeControl(planner.lifecycle(node_path), planner.parameters(node_path))
        self.act: ActClient = planner.act(f"{node_path.rsplit('/', 1)[0]}/act")
        self.health = NodeHealth(node, node_path)
        self.world = World(node, world_path) if world_path else None
        self.desk = OperatorDesk(node) if settings.judge == "operator" or not world_path else None
        self.vlm: VlmJudge | None = None
        # Set: the task goes through the VLM planner's steps instead of one act goal.
        self.planned: PlannedTask | None = None
        self._arm: str | None = None
        self._time_mode: str | None = None
        # The world's number of the trial running (its reset's), None before its reset.
        self._trial_number: int | None = None
        self.models: dict[str, str] = {}
        # A condition was applied: the node's parameters differ from its own until restored.
        self._touched = False

    # ----- arms -----

    def recording(self) -> dict[str, Value]:
        if self.settings.record_dir is None:
            return {}
        return {"record": "goals", "record_dir": str(self.settings.record_dir.resolve())}

    def own_values(self) -> dict[str, Value]:
        """The node's values from before the evaluation of every parameter it sets."""
        touched = {name for a in self.arms.values() for name in a.condition.overlay()}
        return {name: value for name in touched | set(self.recording())
                if (value := self.control.baseline.get(name)) is not None}

    def condition_values(self, arm: Arm) -> dict[str, Value]:
        """The node's parameters for `arm`: its own values before the evaluation wherever the
        condition is silent, so one condition's overlay never leaks into the next."""
        return self.own_values() | arm.condition.overlay() | self.recording()

    def restore(self) -> None:
        """The node as it was before the evaluation (its parameters and lifecycle state), once
        a condition touched it; on every ending of the run."""
        if not self._touched:
            return
        self.log(f"restoring the node: set {self.own_values()}, back to "
                 f"{self.control.initial_state or 'its state'}")
        self.control.restore(self.own_values(), READY_TIMEOUT_S)
        self._touched = False

    def apply(self, key: str) -> None:
        """Bring the node (and the world's time mode) to arm `key`, if not there already."""
        arm = self.arms[key]
        if self.world is not None and arm.time_mode != self._time_mode:
            try:
                self.world.set(time_mode=arm.time_mode)
            except WorldError as exc:
                raise TrialFault(str(exc)) from None
            self._time_mode = arm.time_mode
        current = self.arms[self._arm].condition if self._arm is not None else None
        if current != arm.condition:
            self._arm = None  # a failed switch leaves the node in no known condition
            self.log(f"condition {arm.condition.name}: deactivate, cleanup, set "
                     f"{arm.condition.overlay() or 'nothing'}, configure, activate")
            self.health.forget()
            self._touched = True
            try:
                self.control.bring_up(self.condition_values(arm), READY_TIMEOUT_S)
            except TransitionFailed as exc:
                raise TrialFault(self._why(exc)) from None
        self._arm = key
        self.health.wait_steady(READY_TIMEOUT_S)
        self.models[arm.condition.name] = self.health.value("model")

    def _why(self, exc: TransitionFailed) -> str:
        problem = self.health.wait_problem(PROBLEM_WAIT_S)
        return f"{exc}: {problem}" if problem else (
            f"{exc} (no problem reported on /diagnostics within {PROBLEM_WAIT_S:g} s: see the "
            "node's log)")

    # ----- one trial -----

    def run_trial(self, index: int, key: str, seed: int) -> TrialResult:
        arm = self.arms[key]
        trial = TrialResult(index, key, arm.condition.name, arm.time_mode, seed, False, "",
                            self.settings.judge,
                            started_utc=datetime.now(timezone.utc).isoformat(timespec="seconds"))
        before = self._episodes()
        self._trial_number = None
        try:
            self.apply(key)
            self._judge(trial, self._drive(seed))
        except (TrialFault, WorldError) as exc:
            trial.success, trial.reason = False, f"fault: {exc}"
        episodes = self._measure(trial, before)
        for episode in episodes:
            self._label(trial, episode)
        return trial

    def _label(self, trial: TrialResult, episode: Path) -> None:
        verdict = {"success": str(trial.success).lower(), "reason": trial.reason,
                   "judge": trial.judge, "condition": trial.condition, "arm": trial.arm,
                   "time_mode": trial.time_mode, "seed": str(trial.seed),
                   "time_to_success_s": str(trial.time_to_success_s), "task": self.settings.task}
        try:
            label(episode, verdict)
        except (OSError, ValueError) as exc:
            # The trial stands without its label; results.json has the verdict either way.
            self.log(f"  could not label {episode}: {exc}")

    def _drive(self, seed: int) -> Act.Result:
        """Reset, settle, send the task, stop it at success; the act result (the steps'
        results combined, for a planned task)."""
        start = self._reset(seed)
        settings = self.settings
        if settings.perturb is not None and self.world is not None:
            p = settings.perturb
            self.log(f"  perturb: {self.world.perturb(p.object, p.offset, start + p.at_s)}")
        if self.planned is not None:
            return self._drive_planned(self.planned, seed)
        run = self.act.send(settings.task, settings.max_seconds, timeout_s=READY_TIMEOUT_S)
        if not run.accepted:
            raise TrialFault(f"the node rejected the goal {settings.task!r}")
        deadline = time.monotonic() + settings.max_seconds + RESULT_GRACE_S
        cancelled = False
        while not run.done():
            if time.monotonic() > deadline:
                run.cancel()
                raise TrialFault(f"no result within max_seconds + {RESULT_GRACE_S:g} s")
            state = self.world.wait_next(0.2) if self.world is not None else None
            if state is None and self.world is None:
                time.sleep(0.1)  # nothing to wait on at a real robot but the result itself
            if (settings.stop_on_success and not cancelled and state is not None
                    and self._this_trial(state, seed) and state.success):
                run.cancel()
                cancelled = True
        _status, result = run.result()
        return result

    def _drive_planned(self, planned: PlannedTask, seed: int) -> Act.Result:
        stop = threading.Event()
        codes: list[int] = []
        thread = threading.Thread(target=lambda: codes.append(planned.run(stop)),
                                  name="evaluate-planner", daemon=True)
        started = time.monotonic()
        deadline = started + planned.task_seconds + RESULT_GRACE_S
        thread.start()
        while thread.is_alive():
            if time.monotonic() > deadline:
                stop.set()
                thread.join(RESULT_GRACE_S)
                raise TrialFault(f"the planner did not end within its task_seconds + "
                                 f"{RESULT_GRACE_S:g} s")
            state = self.world.wait_next(0.2) if self.world is not None else None
            if state is None and self.world is None:
                thread.join(0.1)  # nothing to wait on at a real robot but the planner itself
            if (self.settings.stop_on_success and state is not None
                    and self._this_trial(state, seed) and state.success):
                stop.set()
        thread.join()
        if not codes:
            raise TrialFault("the planner failed (its log says why)")
        steps = planned.results(RESULT_GRACE_S)
        self.log(f"  planner: {planned.outcome or 'stopped at success'}; {len(steps)} steps")
        return combined(steps, time.monotonic() - started)

    def _reset(self, seed: int) -> float:
        """A new trial at `seed`; the world time (s into the trial) once it settled."""
        if self.world is None:
            assert self.desk is not None
            self.log(f"reset the scene for seed {seed}, then call {self.desk.ready_service} "
                     "(std_srvs/srv/Trigger)")
            self.desk.wait_ready()
            return 0.0
        self.world.set(layout_seed=seed, task=self.settings.task)
        last = self.world.latest()
        previous = -1 if last is None else int(last.trial)
        self.log(f"  reset: {self.world.reset()}")
        # Frozen time does not pass while the arm waits: the world settles in its reset.
        settle_s = 0.0 if self._time_mode == "frozen" else self.settings.settle_s
        state = self.world.wait_state(
            lambda s: s.seed == seed and s.trial > previous and s.trial_s >= settle_s,
            READY_TIMEOUT_S, f"seed {seed} settled for {settle_s:g} s",
        )
        self._trial_number = state.trial
        return float(state.trial_s)

    def _this_trial(self, state: TaskState, seed: int) -> bool:
        number = self._trial_number
        return state.seed == seed and (number is None or state.trial == number)

    def _judge(self, trial: TrialResult, result: Act.Result) -> None:
        reason = str(result.reason)
        trial.act_reason = reason
        trial.elapsed_s = float(result.elapsed_s)
        trial.underruns = int(result.underruns)
        trial.commands = int(result.actions)
        trial.requests = int(result.requests)
        if is_fault(reason):
            message = str(result.message)
            raise TrialFault(f"goal ended {reason}" + (f" ({message})" if message else ""))
        if reason == "preempted" and self.planned is None:
            # One goal at a time from here: another client's goal replaced it.
            raise TrialFault("goal ended preempted: another client's goal took the node")
        if self.vlm is not None:
            opinion = self.vlm.judge(self.settings.task)
            trial.vlm_success, trial.vlm_reason = opinion.success, opinion.reason
        if self.settings.judge == "vlm":
            if trial.vlm_success is None:
                raise TrialFault(f"the VLM judge gave no verdict: {trial.vlm_reason}")
            trial.success = trial.vlm_success
            trial.reason = ("succeeded" if trial.success else "failed") + (
                f" (VLM: {trial.vlm_reason})" if trial.vlm_reason else "")
            return
        if self.settings.judge == "operator" or self.world is None:
            assert self.desk is not None
            self.log(f"verdict? call {self.desk.verdict_service} "
                     "(sequence_ai_interfaces/srv/Verdict: success, reason)")
            verdict = self.desk.wait_verdict()
            assert verdict is not None
            trial.success, note = verdict
            trial.reason = ("succeeded" if trial.success else "failed") + (
                f": {note}" if note else "")
            return
        # The world's word after the goal ended: the next state of this trial.
        self.world.wait_next(2.0)
        state = self.world.latest()
        if state is None or not self._this_trial(state, trial.seed):
            raise TrialFault(
                f"the world reported no state of this trial (seed {trial.seed}, trial "
                f"{self._trial_number}) after the goal; last: "
                + ("none" if state is None else f"seed {state.seed}, trial {state.trial}")
            )
        if dict(zip(state.names, state.values)).get("fault") == 1.0:
            raise TrialFault("the world voided the trial: its physics went unstable (sim_robot's "
                             "log says when and where)")
        trial.success = bool(state.success)
        if trial.success:
            trial.time_to_success_s = float(state.success_s)
            trial.reason = f"succeeded at {state.success_s:.1f} s of world time"
        else:
            trial.reason = f"not achieved (goal ended: {reason})"

    # ----- episodes and metrics -----

    def _episodes(self) -> set[Path]:
        folder = self.settings.record_dir
        return set(folder.glob("*.mcap")) if folder is not None and folder.is_dir() else set()

    def _measure(self, trial: TrialResult, before: set[Path]) -> list[Path]:
        """The trial's real-time figures from the episodes its goals recorded; those files."""
        new = sorted(self._episodes() - before)
        if not new:
            return []
        trial.episode = str(new[-1])
        trial.goals = len(new)
        metrics = self._closed_metrics(new)
        trial.latency_p50_s = metrics.latency_p50_s
        trial.latency_p95_s = metrics.latency_p95_s
        trial.latency_p99_s = metrics.latency_p99_s
        trial.stale_action_ratio = metrics.stale_action_ratio
        trial.effective_control_hz = metrics.effective_control_hz
        trial.nominal_control_hz = metrics.nominal_control_hz
        return new

    def _closed_metrics(self, paths: list[Path]) -> EpisodeMetrics:
        from sequence_ai_lab.episodes.reader import read

        # The node closes the file on its writer thread after the result: wait for its summary.
        deadline = time.monotonic() + EPISODE_CLOSE_S
        while not read(paths[-1], messages=False).summary and time.monotonic() < deadline:
            time.sleep(0.2)
        return episode_metrics(paths)

    # ----- the run -----

    def run(self, results: Results, schedule: list[tuple[int, str, int]]) -> Results:
        """Every scheduled (index, arm, seed) not yet in `results`, saved after each."""
        if self.world is not None:
            self.world.check_present(WORLD_TIMEOUT_S)
        done = results.done()
        left = [s for s in schedule if (s[1], s[2]) not in done]
        if done:
            self.log(f"resuming: {len(done)} trials done, {len(left)} to go")
        folder = self.settings.record_dir
        if folder is not None and folder.is_dir():
            moved = set_aside_unjudged(folder, done)
            if moved:
                self.log(f"moved {len(moved)} episodes no trial judged (a killed run's) to "
                         f"{moved[0].parent}: {', '.join(p.name for p in moved)}")
        for number, (index, key, seed) in enumerate(left, 1):
            self.log(f"trial {index} ({number}/{len(left)}): {key}, seed {seed}")
            trial = self.run_trial(index, key, seed)
            self.log(f"  {'SUCCESS' if trial.success else 'failure'}: {trial.reason}")
            results.trials.append(trial)
            models = results.provenance.setdefault("models", {})
            models.update(self.models)  # type: ignore[union-attr]
            save(self.out, results)
        return results
