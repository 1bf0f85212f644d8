"""Conditions, the interleaved seeded order, resuming from results.json, the real-time metrics."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from sequence_ai_lab.evaluation import results
from sequence_ai_lab.evaluation.conditions import (
    ConditionError,
    Perturbation,
    parse_condition,
    schedule,
    time_modes,
)
from sequence_ai_lab.evaluation.metrics import (
    InstalledChunk,
    effective_control_hz,
    stale_action_ratio,
)


def test_conditions_take_a_model_a_ros_params_file_or_both(tmp_path: Path) -> None:
    overlay = tmp_path / "one.yaml"
    overlay.write_text(
        "/**/sequence_ai:\n  ros__parameters:\n    max_in_flight: 1\n    prefetch: false\n",
        encoding="utf-8",
    )
    assert parse_condition("cosmos=model:cosmos3-edge-policy-droid").model == (
        "cosmos3-edge-policy-droid"
    )
    one = parse_condition(f"one=params:{overlay}")
    assert (one.name, one.model, dict(one.parameters)) == (
        "one", "", {"max_in_flight": 1, "prefetch": False}
    )
    both = parse_condition("both=model:m1,params:one.yaml", base_dir=tmp_path)
    assert both.overlay() == {"max_in_flight": 1, "prefetch": False, "model": "m1"}
    assert parse_condition("default=").overlay() == {}


@pytest.mark.parametrize(
    ("text", "match"),
    [
        ("nameless", "expected NAME=model"),
        ("a=weights:x", "expected model: or params:"),
        ("a b=model:m", "may not contain"),
        ("a=params:/no/such/file.yaml", "cannot be read"),
    ],
)
def test_bad_conditions_are_refused_with_what_was_expected(text: str, match: str) -> None:
    with pytest.raises(ConditionError, match=match):
        parse_condition(text)


def test_time_modes_and_perturbations_parse_or_say_why_not() -> None:
    assert time_modes("both") == ("realtime", "frozen")
    assert time_modes("frozen") == ("frozen",)
    with pytest.raises(ConditionError, match="realtime, frozen or both"):
        time_modes("slow")
    perturb = Perturbation.parse("cup:0.05,-0.02@1.5")
    assert (perturb.object, perturb.offset, perturb.at_s) == ("cup", (0.05, -0.02, 0.0), 1.5)
    assert Perturbation.parse(perturb.text()) == perturb
    with pytest.raises(ConditionError, match="object cup or block"):
        Perturbation.parse("plate:0,0@1")


@pytest.mark.parametrize("text, match", [
    ("cup:0,0,10@0", "a z offset lifts the object off the table"),
    ("cup:nan,0@1", "a planar move of at most 0.5 m"),
    ("cup:0,inf@1", "a planar move of at most 0.5 m"),
    ("block:0.6,0@1", "a planar move of at most 0.5 m"),
    ("cup:0,0@inf", "at a finite time"),
    ("cup:0,0@nan", "at a finite time"),
])
def test_perturbations_are_planar_moves_within_the_table(text: str, match: str) -> None:
    with pytest.raises(ConditionError, match=match):
        Perturbation.parse(text)


def test_every_arm_runs_every_seed_interleaved_in_a_seeded_order() -> None:
    arms, seeds = ["a", "b", "c"], list(range(10, 20))
    plan = schedule(arms, seeds, order_seed=7)
    assert [t.index for t in plan] == list(range(30))
    # The same seeds for every arm.
    for arm in arms:
        assert sorted(t.seed for t in plan if t.arm == arm) == seeds
    # Interleaved: each consecutive block of len(arms) trials holds every arm once, on one seed.
    for start in range(0, len(plan), len(arms)):
        block = plan[start:start + len(arms)]
        assert sorted(t.arm for t in block) == arms and len({t.seed for t in block}) == 1
    # Seeded and shuffled: the same seed repeats the order, another seed gives another one,
    # and the arms do not always run in one fixed order.
    assert schedule(arms, seeds, order_seed=7) == plan
    assert schedule(arms, seeds, order_seed=8) != plan
    assert len({tuple(t.arm for t in plan[s:s + 3]) for s in range(0, 30, 3)}) > 1


def _trial(index: int, arm: str, seed: int, success: bool) -> results.TrialResult:
    return results.TrialResult(index, arm, arm, "realtime", seed, success,
                               "succeeded" if success else "fault: reset refused", "world")


def test_results_round_trip_and_a_resumed_run_must_be_the_same_evaluation(
    tmp_path: Path,
) -> None:
    settings = {"task": "pick up the cup", "arms": ["a", "b"], "seeds": [0, 1],
                "order_seed": 0, "perturb": None, "judge": "world"}
    saved = results.Results(dict(settings), {"package_version": "0.1.0"},
                            [_trial(0, "a", 0, True), _trial(1, "b", 0, False)])
    results.save(tmp_path, saved)
    raw = json.loads((tmp_path / results.RESULTS_FILE).read_text(encoding="utf-8"))
    assert raw["trials"][0]["latency_p50_s"] is None  # no NaN in JSON
    loaded = results.load(tmp_path)
    assert loaded is not None
    assert loaded.done() == {("a", 0), ("b", 0)}
    assert math.isnan(loaded.trials[0].latency_p50_s)
    assert loaded.trials[1].faulted and not loaded.trials[0].faulted
    results.check_same(loaded, settings, tmp_path)
    with pytest.raises(results.ResultsError, match="seeds was \\[0, 1\\], now \\[0, 1, 2\\]"):
        results.check_same(loaded, settings | {"seeds": [0, 1, 2]}, tmp_path)
    assert results.load(tmp_path / "elsewhere") is None


def test_stale_actions_are_commands_older_than_their_chunk() -> None:
    s = 1_000_000_000
    # A 1 s chunk captured at 0 s arriving at 0.7 s, the next captured at 0.8 s arriving at 1.6 s.
    chunks = [InstalledChunk(int(0.7 * s), 0, 1.0), InstalledChunk(int(1.6 * s), int(0.8 * s), 1.0)]
    commands = [int(t * s) for t in (0.75, 0.95, 1.05, 1.5, 1.7, 1.75)]
    # 1.05 and 1.5 come from the first chunk more than 1 s after its capture.
    assert stale_action_ratio(chunks, commands) == pytest.approx(2 / 6)
    assert math.isnan(stale_action_ratio(chunks, []))
    assert effective_control_hz([0, s // 10, 2 * s // 10, s]) == pytest.approx(3.0)
    assert math.isnan(effective_control_hz([0]))


@pytest.mark.parametrize(
    ("answer", "success"),
    [("Success. The cup is in the gripper.", True), ("**Failure**: cup on the table", False),
     ("no", False), ("The next step is: grasp the cup", None), ("", None)],
)
def test_the_vlm_judges_first_word_is_its_verdict(answer: str, success: bool | None) -> None:
    pytest.importorskip("rclpy")
    from sequence_ai_lab.evaluation.vlm_judge import parse_verdict

    verdict = parse_verdict(answer)
    assert verdict.success is success
    if success is None:
        assert verdict.reason.startswith("no verdict in the answer")
