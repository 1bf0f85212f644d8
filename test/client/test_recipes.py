"""Recipes: lookup, drift checks against the live catalogue, and fallback semantics."""

from __future__ import annotations

import copy

import pytest

from sequence_ai import recipes
from sequence_ai._model.actions import to_joint_positions
from sequence_ai._model.catalogue import Model, find_model, models
from sequence_ai.recipes import cosmos3_edge_policy_droid, pi05_droid
from sequence_ai.types import ActionChunk


@pytest.fixture
def live(shared_gateway, monkeypatch):
    monkeypatch.delenv("SEQUENCES_API_KEY", raising=False)
    rows = models(base_url=shared_gateway.url)
    return {m.short_id: m for m in rows}


def mutated(model, **changes):
    row = copy.deepcopy(model.raw)
    row.update(changes)
    return Model.from_wire(row)


def test_lookup_by_model_full_id_short_id_and_other_namespace():
    assert recipes.for_model("pi05-droid") is pi05_droid
    assert recipes.for_model(pi05_droid.MODEL_ID) is pi05_droid
    assert recipes.for_model("accounts/acme/models/cosmos3-edge-policy-droid") is (
        cosmos3_edge_policy_droid
    )
    assert recipes.for_model(Model.from_wire({"id": cosmos3_edge_policy_droid.MODEL_ID})) is (
        cosmos3_edge_policy_droid
    )
    for unknown in ("groot-n1-7", "", None, 42):
        assert recipes.for_model(unknown) is None


def test_the_live_catalogue_agrees_with_both_recipes(live):
    assert recipes.check(live["pi05-droid"]) == []
    assert recipes.check(live["cosmos3-edge-policy-droid"]) == []


def test_a_model_without_a_recipe_has_no_drift(live):
    assert recipes.check(live["sim-stateless-ee-delta"]) == []


@pytest.mark.parametrize(
    ("changes", "field"),
    [
        ({"camera_views": ["wrist_left", "exterior_1"]}, "camera_views"),
        ({"state_dim": 7}, "state_dim"),
        ({"action_dim": 7}, "action_dim"),
        ({"action_space": "joint_absolute"}, "action_space"),
        ({"input_aspect_ratio": 1.3333}, "input_aspect_ratio"),
        ({"state_layout": {"joint_positions": 8, "gripper": 0}}, "state_layout"),
        ({"open_loop_horizon": 15}, "open_loop_horizon"),
    ],
)
def test_pi05_drift_is_reported_by_field(live, changes, field):
    drift = recipes.check(mutated(live["pi05-droid"], **changes))
    assert len(drift) == 1 and field in drift[0]


def test_pi05_drift_when_the_conversion_or_pass_raw_disappears(live):
    semantics = copy.deepcopy(live["pi05-droid"].action_semantics)
    semantics["pass_raw"] = False
    semantics["conversions"] = {}
    drift = recipes.check(mutated(live["pi05-droid"], action_semantics=semantics))
    assert any("pass_raw" in d for d in drift) and any("conversion" in d for d in drift)


def test_an_aspect_ratio_within_rounding_is_not_drift(live):
    assert recipes.check(mutated(live["pi05-droid"], input_aspect_ratio=16 / 9)) == []


@pytest.mark.parametrize("space", ["joint_absolute", "joint_pos"])
def test_cosmos3_accepts_either_name_the_catalogue_reports(live, space):
    assert recipes.check(mutated(live["cosmos3-edge-policy-droid"], action_space=space)) == []


def test_cosmos3_flags_a_conversion_appearing(live):
    cosmos = live["cosmos3-edge-policy-droid"]
    semantics = copy.deepcopy(cosmos.action_semantics)
    semantics["conversions"] = {"joint_position": {"reference": "state_at_request"}}
    drift = recipes.check(mutated(cosmos, action_semantics=semantics))
    assert len(drift) == 1 and "never be offset" in drift[0]


def test_check_never_raises_even_on_a_broken_row():
    broken = Model.from_wire({"id": pi05_droid.MODEL_ID, "action_semantics": {"conversions": 3}})
    drift = recipes.check(broken)
    assert drift and all(isinstance(d, str) for d in drift)
    assert recipes.check("not a model") == []


def test_semantics_prefer_the_catalogue_then_the_recipe(live):
    assert recipes.semantics(live["pi05-droid"]) == live["pi05-droid"].action_semantics
    bare = Model.from_wire({"id": pi05_droid.MODEL_ID})
    assert recipes.semantics(bare) == pi05_droid.FALLBACK_SEMANTICS
    assert recipes.semantics(Model.from_wire({"id": "unknown"})) == {}
    recipes.semantics(bare)["value_range"][0] = 99.0
    assert pi05_droid.FALLBACK_SEMANTICS["value_range"] == [-1.0, 1.0]


def test_the_fallback_matches_what_the_gateway_serves(live):
    assert pi05_droid.FALLBACK_SEMANTICS == live["pi05-droid"].action_semantics


def pi05_chunk(horizon):
    rows = [[0.05 * (i + 1)] * 7 + [0.0] for i in range(15)]
    return ActionChunk(rows, "droid_franka", "joint_delta", 8, 15.0, 1.0, open_loop_horizon=horizon)


def test_pi05_joint_targets_stop_at_the_open_loop_horizon(live):
    model = live["pi05-droid"]
    q_ref = [0.0] * 7
    targets = pi05_droid.joint_targets(pi05_chunk(8), q_ref, model)
    assert len(targets) == 8
    assert targets == to_joint_positions(pi05_chunk(8), q_ref, model)[:8]
    assert len(pi05_droid.native_rows(pi05_chunk(None), model)) == 8


def test_cosmos3_native_rows_are_the_whole_chunk(live):
    rows = [[0.1] * 7 + [1.0]] * 32
    chunk = ActionChunk(rows, "droid_franka", "joint_absolute", 8, 15.0, 32 / 15)
    assert cosmos3_edge_policy_droid.native_rows(chunk, live["cosmos3-edge-policy-droid"]) == rows


def test_find_model_and_recipes_agree_on_ids(live):
    for recipe in recipes.RECIPES:
        assert find_model(live.values(), recipe.MODEL_ID).id == recipe.MODEL_ID
