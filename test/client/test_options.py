"""RunOptions: every run option checked once, with the field, the value and what was expected."""

from __future__ import annotations

import dataclasses

import pytest

from sequence_ai._model.controllers import Controller
from sequence_ai.options import RunOptions


def options(**kwargs: object) -> RunOptions:
    kwargs.setdefault("max_actions", 5)
    return RunOptions(observe=lambda: None, act=lambda row: None, **kwargs)  # type: ignore[arg-type, return-value]


def test_valid_options_are_normalised_and_frozen() -> None:
    checked = options(controller="native", prefetch=0, body={"seed": 3, "top_k": None})
    assert checked.controller is Controller.NATIVE
    assert checked.prefetch is False
    assert dict(checked.body) == {"seed": 3}
    with pytest.raises(dataclasses.FrozenInstanceError):
        checked.max_actions = 6  # type: ignore[misc]
    with pytest.raises(TypeError):
        checked.body["seed"] = 4  # type: ignore[index]


@pytest.mark.parametrize(
    ("bad", "message"),
    [
        ({"max_actions": 0}, "max_actions is 0; expected a positive integer"),
        ({"max_actions": True}, "max_actions is True; expected a positive integer"),
        ({"smooth_seam": -1}, "smooth_seam is -1; expected an integer >= 0"),
        ({"max_seconds": float("inf")}, "max_seconds is inf; expected a finite number"),
        ({"startup_timeout_s": -1}, "startup_timeout_s is -1; expected a finite number"),
        ({"open_loop_horizon": 0}, "open_loop_horizon is 0; expected a positive integer"),
        ({"controller": "torque"}, "controller is 'torque'; expected one of"),
        ({"progress": "yes"}, "progress is 'yes'; expected 'auto', True or False"),
        ({"body": {"model": "other"}}, "option 'model' cannot be passed through"),
    ],
)
def test_a_bad_value_names_the_field_the_value_and_what_was_expected(bad, message) -> None:
    with pytest.raises(ValueError, match=message.replace("(", r"\(")):
        options(**bad)


def test_callbacks_must_be_callable() -> None:
    with pytest.raises(TypeError, match="hold is 3; expected a callable or None"):
        options(hold=3)
    with pytest.raises(TypeError, match="observe is None; expected a callable"):
        RunOptions(observe=None, act=print, max_actions=1)  # type: ignore[arg-type]


@pytest.mark.parametrize(("typo", "meant"), [
    ("smoth_seam", "smooth_seam"), ("max_in_flite", "max_in_flight"), ("prefech", "prefetch"),
])
def test_a_misspelled_option_is_a_type_error_naming_the_option(typo: str, meant: str) -> None:
    with pytest.raises(TypeError, match=rf"{typo!r}; did you mean {meant!r}"):
        RunOptions(observe=lambda: None, act=lambda row: None, max_actions=1, body={typo: 3})


def test_other_extra_keywords_stay_request_body_fields() -> None:
    options = RunOptions(observe=lambda: None, act=lambda row: None, max_actions=1,
                         body={"temperature": 0.2, "seed": 7})
    assert dict(options.body) == {"temperature": 0.2, "seed": 7}
