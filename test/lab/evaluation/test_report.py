"""report.md and report.png from a results file: per-arm rates, the paired differences, the
degradation from frozen to real time, failures with their reasons, definitions, provenance."""

from __future__ import annotations

from pathlib import Path

from sequence_ai_lab.evaluation.report import render_markdown, write
from sequence_ai_lab.evaluation.results import Results, TrialResult


def _results() -> Results:
    trials = []
    # default: 4/4 in frozen time, 2/4 in real time; seed 3 faulted in real time.
    for seed in range(4):
        trials.append(TrialResult(len(trials), "default@frozen", "default", "frozen", seed, True,
                                  "succeeded", "world", time_to_success_s=4.0 + seed,
                                  latency_p50_s=0.6, stale_action_ratio=0.0,
                                  effective_control_hz=15.0, nominal_control_hz=15.0))
        success = seed < 2
        reason = "succeeded" if success else (
            "fault: stale_input" if seed == 3 else "not achieved (goal ended: timeout)")
        trials.append(TrialResult(len(trials), "default@realtime", "default", "realtime", seed,
                                  success, reason, "world", time_to_success_s=5.0,
                                  latency_p50_s=0.7, stale_action_ratio=0.25,
                                  effective_control_hz=12.0, nominal_control_hz=15.0,
                                  episode=f"/tmp/ep{seed}.mcap"))
    settings = {"task": "pick up the cup", "arms": ["default@realtime", "default@frozen"],
                "seeds": [0, 1, 2, 3], "order_seed": 5, "perturb": None, "judge": "world"}
    provenance = {"package_version": "0.1.0", "catalogue_revision": "sha256:abc",
                  "models": {"default": "pi05-droid"}}
    return Results(settings, provenance, trials)


def test_markdown_has_rates_intervals_differences_and_degradation() -> None:
    text = render_markdown(_results())
    # 2/4: Wilson [15, 85] %; 4/4: [51, 100] %.
    assert "| default@realtime | 2/4 | 50 % [15, 85] | 1 |" in text
    assert "| default@frozen | 4/4 | 100 % [51, 100] | 0 |" in text
    # Paired: two seeds where only frozen succeeded, exact McNemar p = 0.5.
    assert "| default@realtime | default@frozen | -50 %" in text and "| 0.5 |" in text
    assert "## Real time against frozen time" in text
    assert "- default: success in real time minus frozen time -50 %" in text
    assert "| 7 | default@realtime | 3 | fault: stale_input | ep3.mcap |" in text
    assert "**Stale-action ratio**" in text and "older than one chunk's duration" in text
    assert "- catalogue_revision: `sha256:abc`" in text
    assert "- models: default = `pi05-droid`" in text
    assert "25 %" in text  # the real-time arm's stale-action ratio


def test_report_files_are_written(tmp_path: Path) -> None:
    markdown, picture = write(_results(), tmp_path)  # matplotlib: a test dependency
    assert markdown.read_text(encoding="utf-8").count("![success per arm](report.png)") == 1
    assert picture.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_a_vlm_judges_opinions_are_counted_against_the_verdict() -> None:
    results = _results()
    results.settings["vlm_judge"] = "some-vlm"
    for trial in results.of_arm("default@frozen")[:3]:
        trial.vlm_success = trial.index != 0  # trial 0 succeeded: the VLM disagrees once
    text = render_markdown(results)
    assert "## VLM judge (some-vlm) beside the verdict" in text
    assert "| default@frozen | 2 | 1 | 1 |" in text
    assert "| default@realtime | 0 | 0 | 3 |" in text  # its faulted trial is not judged
