"""A small evaluation end to end: the local gateway, the simulated arm and the real node started
by `evaluate --sim`, a stand-in world (support.task_world) that judges from the arm's commands;
two conditions (the node as it is, and a dry run that commands nothing) on three seeds, one of
which the world refuses to lay out. The run resumes from a results.json that already holds a
trial. Its episodes are then replayed open loop through their own model and the other one."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from support.gateway_fixture import GatewayHandle
from support.ros_domains import EVALUATION_TESTS, domain

from sequence_ai_lab.evaluation.conditions import schedule
from sequence_ai_lab.evaluation.replay import replay
from sequence_ai_lab.evaluation.results import Results, TrialResult, load, save

pytest.importorskip("rclpy")

pytestmark = [pytest.mark.slow, pytest.mark.timeout(420)]

TEST_DIR = Path(__file__).resolve().parents[2]
FAULTY_SEED = 2
ARGUMENTS = ["--trials", "3", "--order-seed", "3", "--max-seconds", "6", "--settle-s", "0.5",
             "--condition", "default=", "--condition", "dry=params:dry.yaml",
             # The simulated chat model plans, it does not judge: it refuses the judge's prompt.
             "--vlm-judge", "sim-planner"]
# Far above the run's own ~2 minutes: the bound only stops a hung run before pytest does.
RUN_TIMEOUT_S = 360


def _environment() -> dict[str, str]:
    path = os.environ.get("PYTHONPATH", "")
    return {
        **os.environ,
        "ROS_DOMAIN_ID": str(domain(EVALUATION_TESTS)),
        "ROS_AUTOMATIC_DISCOVERY_RANGE": "LOCALHOST",
        "ROS_LOCALHOST_ONLY": "1",
        "PYTHONPATH": f"{TEST_DIR}{os.pathsep}{path}" if path else str(TEST_DIR),
    }


def _seeded_trial() -> TrialResult:
    # What a killed run left: the first scheduled trial, judged already.
    first = schedule(["default", "dry"], [0, 1, 2], order_seed=3)[0]
    return TrialResult(first.index, first.arm, first.arm, "realtime", first.seed, True,
                       "recorded before the kill", "world")


@pytest.fixture(scope="module")
def evaluation(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict]:
    work = tmp_path_factory.mktemp("evaluation")
    (work / "dry.yaml").write_text("/**/sequence_ai:\n  ros__parameters:\n    dry_run: true\n",
                                   encoding="utf-8")
    out = work / "out"
    settings = {"task": "pick up the cup", "arms": ["default", "dry"], "seeds": [0, 1, 2],
                "order_seed": 3, "perturb": None, "judge": "world", "vlm_judge": "sim-planner"}
    save(out, Results(settings, {}, [_seeded_trial()]))
    env = _environment()
    world_log = (work / "world.log").open("wb")
    world = subprocess.Popen(
        [sys.executable, "-c", "from support.task_world import main; main()", "--ros-args",
         "-p", f"fail_reset_seeds:=[{FAULTY_SEED}]"],
        stdout=world_log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, env=env,
    )
    evaluator = subprocess.Popen(
        [sys.executable, "-m", "sequence_ai_lab.evaluation", "--sim", "--world", "/task_world",
         "--out", str(out), *ARGUMENTS],
        cwd=work, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
    )
    try:
        output, _ = evaluator.communicate(timeout=RUN_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        # SIGTERM: the evaluator stops the processes it started, then exits.
        evaluator.send_signal(signal.SIGTERM)
        output, _ = evaluator.communicate(timeout=60)
    finally:
        world.send_signal(signal.SIGTERM)
        world.wait(timeout=30)
        world_log.close()
    yield {"code": evaluator.returncode, "output": output, "out": out,
           "results": load(out)}


def _explain(run: dict) -> str:
    logs = run["out"] / "logs" / "node.log"
    tail = logs.read_text(encoding="utf-8")[-3000:] if logs.exists() else "(no node log)"
    return f"evaluator output:\n{run['output'][-5000:]}\nnode log:\n{tail}"


def test_the_evaluation_ends_cleanly_and_resumed_the_trial_already_done(evaluation: dict) -> None:
    assert evaluation["code"] == 0, _explain(evaluation)
    assert "resuming: 1 trials done, 5 to go" in evaluation["output"], _explain(evaluation)
    results = evaluation["results"]
    assert results.trials[0] == _seeded_trial()
    assert len(results.trials) == 6
    assert "stopped {'node': 0" in evaluation["output"], _explain(evaluation)


def test_trials_ran_interleaved_in_the_seeded_order_on_shared_seeds(evaluation: dict) -> None:
    results = evaluation["results"]
    planned = [(t.arm, t.seed) for t in schedule(["default", "dry"], [0, 1, 2], order_seed=3)]
    assert [(t.arm, t.seed) for t in results.trials] == planned
    assert [t.index for t in results.trials] == list(range(6))
    for arm in ("default", "dry"):
        assert sorted(t.seed for t in results.of_arm(arm)) == [0, 1, 2]


def test_the_world_judges_a_dry_run_a_failure_and_the_driven_arm_a_success(
    evaluation: dict,
) -> None:
    results = evaluation["results"]
    ran = [t for t in results.trials[1:] if t.seed != FAULTY_SEED]
    assert ran, _explain(evaluation)
    for trial in ran:
        if trial.arm == "default":
            assert trial.success, (trial, _explain(evaluation))
            assert trial.time_to_success_s > 0 and trial.commands > 0
            assert trial.act_reason == "interrupted"  # cancelled once the world said success
        else:
            assert not trial.success and trial.reason.startswith("not achieved"), trial
        # The VLM judge took the node's last frames to the chat model, which (a planner)
        # refused the question: no verdict, and why.
        assert trial.vlm_success is None
        assert "the simulated planner needs" in trial.vlm_reason, trial
        # Every goal that ran left an episode, and its real-time figures come from it.
        assert Path(trial.episode).is_file(), trial
        assert trial.requests > 0 and trial.latency_p50_s > 0, trial


def test_a_forced_fault_is_a_failure_with_its_reason_never_dropped(evaluation: dict) -> None:
    faulted = [t for t in evaluation["results"].trials if t.seed == FAULTY_SEED]
    assert len(faulted) == 2, _explain(evaluation)
    for trial in faulted:
        assert not trial.success and trial.faulted
        assert "reset refused" in trial.reason and "forced fault" in trial.reason


def test_the_report_is_written_with_both_arms_and_their_difference(evaluation: dict) -> None:
    report = (evaluation["out"] / "report.md").read_text(encoding="utf-8")
    assert "| default |" in report and "| dry |" in report
    assert "| default | dry |" in report
    assert (evaluation["out"] / "report.png").stat().st_size > 0
    raw = json.loads((evaluation["out"] / "results.json").read_text(encoding="utf-8"))
    assert raw["provenance"]["catalogue_revision"].startswith("sha256:")


def test_replaying_the_episodes_through_their_own_model_gives_no_error_and_another_model_some(
    evaluation: dict, gateway: GatewayHandle, tmp_path: Path,
) -> None:
    episodes = sorted((evaluation["out"] / "episodes").glob("*.mcap"))
    assert episodes, _explain(evaluation)
    same = replay(episodes, "pi05-droid", tmp_path / "same", base_url=gateway.url,
                  api_key=gateway.api_key, plots=False)
    other = replay(episodes, "cosmos3-edge-policy-droid", tmp_path / "other",
                   base_url=gateway.url, api_key=gateway.api_key, plots=False,
                   substitutes={"exterior_2": "exterior_1"})
    compared = [e for e in same["episodes"] if e["compared"]]
    assert compared and all(e["mse"] == pytest.approx(0.0, abs=1e-12) for e in compared)
    assert all(len(e["sha256"]) == 64 for e in same["episodes"])
    assert same["requests"] == sum(e["requests"] for e in same["episodes"])
    assert max(e["mse"] or 0.0 for e in other["episodes"]) > 1e-4
    assert json.loads((tmp_path / "other" / "replay.json").read_text(encoding="utf-8"))[
        "model"].endswith("cosmos3-edge-policy-droid")


def test_each_episode_carries_its_trials_verdict_into_the_export(evaluation: dict) -> None:
    from sequence_ai_lab.episodes.export import DONE, SUCCESS, episode_frames, features
    from sequence_ai_lab.episodes.reader import read

    ran = [t for t in evaluation["results"].trials if t.episode]
    assert ran, _explain(evaluation)
    for trial in ran:
        episode = read(Path(trial.episode))
        assert episode.verdict["success"] == str(trial.success).lower()
        assert (episode.verdict["condition"], episode.verdict["seed"]) == (
            trial.condition, str(trial.seed))
        assert episode.verdict["reason"] == trial.reason
        frames = episode_frames(episode)
        assert frames.success is trial.success
        if len(frames):
            described = features(frames, {}, labelled=True)
            assert described[DONE]["dtype"] == described[SUCCESS]["dtype"] == "bool"
