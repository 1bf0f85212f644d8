"""The evaluator leaves the node as it found it, checks what a condition set, says why a switch
failed, and a model condition brings its model's own parameters files. No ROS graph: the
node's lifecycle and parameter services are stand-ins."""

from __future__ import annotations

import os
from pathlib import Path
from unittest.mock import MagicMock

import pytest
from diagnostic_msgs.msg import DiagnosticArray, DiagnosticStatus
from rcl_interfaces.msg import ParameterValue, SetParametersResult
from rclpy.parameter import Parameter, parameter_value_to_python

from sequence_ai_interfaces.action import Act
from sequence_ai_lab.evaluation.claims import Claimed, claim_node
from sequence_ai_lab.evaluation.conditions import (
    Arm,
    ConditionError,
    parse_condition,
    with_model_files,
)
from sequence_ai_lab.evaluation.results import TrialResult
from sequence_ai_lab.evaluation.runner import Evaluator, TrialFault, TrialSettings

OWN = {"model": "pi05-droid", "max_in_flight": 2, "prefetch": True, "record": "off",
       "record_dir": "", "camera_views": ["exterior_1", "wrist_left"]}


class Lifecycle:
    """A node's lifecycle services: its state, and transitions that may fail."""

    target = "/sequence_ai"

    def __init__(self, state: str, fail: str = "", on_fail: object = None) -> None:
        self.current, self.fail, self.on_fail = state, fail, on_fail
        self.moves = {"configure": "inactive", "activate": "active", "deactivate": "inactive",
                      "cleanup": "unconfigured"}

    def state(self, timeout_s: float) -> str:
        return self.current

    def transition(self, name: str, timeout_s: float) -> bool:
        if name == self.fail:
            if callable(self.on_fail):
                self.on_fail()
            return False
        self.current = self.moves[name]
        return True


class Parameters:
    """A node's parameters, set as the node sets them."""

    def __init__(self, values: dict[str, object]) -> None:
        self.held = dict(values)

    def values(self) -> dict[str, ParameterValue]:
        return {n: Parameter(n, value=v).get_parameter_value() for n, v in self.held.items()}

    def set_values(self, typed: dict[str, ParameterValue]) -> list[SetParametersResult]:
        for name, value in typed.items():
            converted = parameter_value_to_python(value)
            self.held[name] = converted.tolist() if hasattr(converted, "tolist") else converted
        return [SetParametersResult(successful=True) for _ in typed]


def _evaluator(tmp_path: Path, lifecycle: Lifecycle, parameters: Parameters,
               *conditions: str) -> Evaluator:
    planner = MagicMock()
    planner.lifecycle.return_value = lifecycle
    planner.parameters.return_value = parameters
    arms = {c.name: Arm(c, "realtime") for c in map(parse_condition, conditions)}
    evaluator = Evaluator(planner, node_path="/sequence_ai", world_path="/sim_robot", arms=arms,
                          settings=TrialSettings("pick up the cup", 5.0,
                                                 record_dir=tmp_path / "episodes"),
                          out=tmp_path, log=lambda _line: None)
    evaluator.world = None  # no time mode to set
    evaluator.health.wait_steady = lambda _timeout_s: None  # type: ignore[method-assign]
    evaluator.control.read_baseline()
    return evaluator


@pytest.mark.parametrize("initial", ["active", "inactive", "unconfigured"])
def test_the_node_gets_its_own_parameters_and_state_back(tmp_path: Path, initial: str) -> None:
    overlay = tmp_path / "one.yaml"
    overlay.write_text("max_in_flight: 1\nprefetch: false\n", encoding="utf-8")
    lifecycle, parameters = Lifecycle(initial), Parameters(OWN)
    evaluator = _evaluator(tmp_path, lifecycle, parameters, "default=",
                           f"one=params:{overlay}", "other=model:my-finetune")
    evaluator.apply("one")
    assert parameters.held["max_in_flight"] == 1 and parameters.held["record"] == "goals"
    evaluator.apply("other")
    assert parameters.held["model"] == "my-finetune" and lifecycle.current == "active"
    evaluator.restore()
    assert parameters.held == OWN and lifecycle.current == initial


def test_a_failed_switch_says_what_the_node_reported_and_is_still_restored(
    tmp_path: Path,
) -> None:
    parameters = Parameters(OWN)
    lifecycle = Lifecycle("active", fail="configure")
    evaluator = _evaluator(tmp_path, lifecycle, parameters, "bad=model:no-such-model")

    def report() -> None:
        status = DiagnosticStatus(level=DiagnosticStatus.ERROR,
                                  name="/sequence_ai: sequence_ai policy",
                                  message="configure failed: model 'no-such-model' is not in "
                                  "the catalogue")
        evaluator.health._on_diagnostics(DiagnosticArray(status=[status]))

    lifecycle.on_fail = report
    with pytest.raises(TrialFault, match="configure of /sequence_ai failed .*: configure "
                       "failed: model 'no-such-model' is not in the catalogue"):
        evaluator.apply("bad")
    lifecycle.fail = ""
    evaluator.restore()
    assert parameters.held == OWN and lifecycle.current == "active"


def test_a_value_the_node_does_not_hold_after_the_switch_is_a_fault(tmp_path: Path) -> None:
    class Stubborn(Parameters):
        def set_values(self, typed: dict[str, ParameterValue]) -> list[SetParametersResult]:
            # Accepted, but something else (a second evaluator) puts its own value back.
            outcome = super().set_values(typed)
            self.held["max_in_flight"] = 4
            return outcome

    overlay = tmp_path / "one.yaml"
    overlay.write_text("max_in_flight: 1\n", encoding="utf-8")
    evaluator = _evaluator(tmp_path, Lifecycle("active"), Stubborn(OWN),
                           f"one=params:{overlay}")
    with pytest.raises(TrialFault, match="holds {'max_in_flight': 4} after the condition set "
                       "{'max_in_flight': 1}"):
        evaluator.apply("one")


def test_a_model_condition_brings_its_models_own_files(tmp_path: Path) -> None:
    cosmos = with_model_files(parse_condition("cosmos=model:cosmos3-edge-policy-droid"),
                              "pi05-droid")
    assert cosmos.model == "cosmos3-edge-policy-droid"
    assert len(cosmos.parameters["camera_views"]) == 3  # type: ignore[arg-type]
    assert "model" not in cosmos.parameters
    # The condition's own params file has the last word.
    overlay = tmp_path / "two.yaml"
    overlay.write_text("camera_views: [exterior_1, wrist_left]\n", encoding="utf-8")
    mine = with_model_files(
        parse_condition(f"c=model:cosmos3-edge-policy-droid,params:{overlay}"), "pi05-droid")
    assert mine.parameters["camera_views"] == ["exterior_1", "wrist_left"]
    # A model of the same arm without files of its own changes nothing else.
    assert with_model_files(parse_condition("t=model:my-finetune"), "pi05-droid").overlay() == {
        "model": "my-finetune"}
    with pytest.raises(ConditionError, match="runs on sim_bimanual .*expected a model of the "
                       "robot the evaluation starts"):
        with_model_files(parse_condition("b=model:sim-bimanual-reach"), "pi05-droid")


def test_a_goal_preempted_by_another_client_is_a_fault(tmp_path: Path) -> None:
    evaluator = _evaluator(tmp_path, Lifecycle("active"), Parameters(OWN), "default=")
    trial = TrialResult(0, "default", "default", "realtime", 0, False, "", "world")
    with pytest.raises(TrialFault, match="preempted: another client's goal took the node"):
        evaluator._judge(trial, Act.Result(reason="preempted"))


def test_a_second_claim_on_one_node_is_refused_naming_the_first(tmp_path: Path) -> None:
    first = claim_node("/robot/sequence_ai", tmp_path)
    with pytest.raises(Claimed, match=f"node /robot/sequence_ai .*evaluation pid {os.getpid()}"):
        claim_node("/robot/sequence_ai", tmp_path)
    claim_node("/other/sequence_ai", tmp_path).release()  # another node: its own claim
    first.release()
    claim_node("/robot/sequence_ai", tmp_path).release()
