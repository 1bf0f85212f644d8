"""prepare / to_joint_positions / gripper_dims / gripper_columns on pi05- and cosmos3-like rows."""

from __future__ import annotations

import copy

import pytest
from hypothesis import given
from hypothesis import strategies as st

from sequence_ai._model.actions import gripper_columns, gripper_dims, prepare, to_joint_positions
from sequence_ai._model.catalogue import Model, models
from sequence_ai.types import ActionChunk

PI05_ROW = {
    "id": "accounts/sequences/models/pi05-droid",
    "action_dim": 8,
    "action_space": "joint_delta",
    "action_semantics": {
        "space": "joint_delta",
        "pass_raw": True,
        "value_range": [-1.0, 1.0],
        "exceptions": [{"dim": 7, "meaning": "gripper_binary", "threshold": 0.5}],
        "conversions": {
            "joint_position": {
                "reference": "state_at_request",
                "formula": "q_target[i] = q_reference + step[i][:7]",
                "verified_in": "isaac-lab droid scene, 2026-09-11",
            }
        },
    },
}
COSMOS_ROW = {
    "id": "accounts/sequences/models/cosmos3-edge-policy-droid",
    "action_dim": 8,
    "action_space": "joint_absolute",
    "action_semantics": {
        "space": "joint_absolute",
        "pass_raw": True,
        "exceptions": [],
        "conversions": {},
    },
}
PI05 = Model.from_wire(PI05_ROW)
COSMOS = Model.from_wire(COSMOS_ROW)
Q_REF = [0.0, -0.5, 0.0, -2.0, 0.0, 1.5, 0.8]


def chunk(rows, space="joint_delta"):
    return ActionChunk(
        steps=[list(map(float, r)) for r in rows],
        robot="droid_franka",
        action_space=space,
        action_dim=len(rows[0]),
        control_frequency_hz=15.0,
        covers_seconds=len(rows) / 15.0,
    )


def test_prepare_binarises_the_gripper_then_clips_to_the_value_range():
    c = chunk([[0.2, -1.7, 3.0, 0.0, 0.0, 0.0, 0.0, 0.51], [0.0] * 7 + [0.5]])
    assert prepare(c, PI05, 0) == [0.2, -1.0, 1.0, 0.0, 0.0, 0.0, 0.0, 1.0]
    # Exactly the threshold is not above it: open.
    assert prepare(c, PI05, 1)[7] == 0.0


def test_prepare_does_not_modify_the_chunk():
    c = chunk([[3.0] * 8])
    prepare(c, PI05, 0)
    assert c.steps[0] == [3.0] * 8


def test_prepare_leaves_rows_unchanged_for_a_model_declaring_nothing():
    row = [2.5, -3.0, 0.3, 0.0, 0.0, 0.0, 0.0, 0.7]
    assert prepare(chunk([row], "joint_absolute"), COSMOS, 0) == row


def test_prepare_rejects_an_index_outside_the_chunk():
    with pytest.raises(IndexError, match="0..0"):
        prepare(chunk([[0.0] * 8]), PI05, 1)


def test_gripper_dims_are_the_declared_binary_dims():
    assert gripper_dims(PI05) == {7}
    assert gripper_dims(COSMOS) == set()
    assert gripper_dims(Model.from_wire({"id": "x"})) == set()


def test_gripper_columns_are_the_declared_ones_or_the_state_layouts_gripper_share(gw):
    served = {m.short_id: m for m in models("act", base_url=gw.url)}
    cosmos3 = served["cosmos3-edge-policy-droid"]
    # cosmos3 declares no gripper exception (no binarisation); its rows are its state's layout,
    # 7 joints then the gripper.
    assert gripper_dims(cosmos3) == set() and gripper_columns(cosmos3) == {7}
    assert gripper_columns(served["pi05-droid"]) == {7}
    assert gripper_columns(served["sim-bimanual-reach"]) == {12, 13}
    # No state to read a layout from: only what the model declares.
    assert gripper_columns(served["sim-stateless-ee-delta"]) == {6}
    assert gripper_columns(COSMOS) == set()


def test_joint_positions_offset_every_row_from_the_same_reference():
    rows = [[0.05 * (i + 1)] * 7 + [0.9] for i in range(15)]
    targets = to_joint_positions(chunk(rows), Q_REF, PI05)
    assert len(targets) == 15
    for i, target in enumerate(targets):
        assert target[:7] == pytest.approx([q + 0.05 * (i + 1) for q in Q_REF])
        assert target[7] == 1.0


def test_joint_positions_respect_the_horizon_and_clip_deltas():
    rows = [[5.0] * 7 + [0.0]] * 15
    targets = to_joint_positions(chunk(rows), Q_REF, PI05, horizon=8)
    assert len(targets) == 8
    assert targets[0][:7] == pytest.approx([q + 1.0 for q in Q_REF])


def test_joint_positions_refuse_a_model_without_a_conversion():
    with pytest.raises(ValueError, match="no verified joint_position conversion"):
        to_joint_positions(chunk([[0.0] * 8], "joint_absolute"), Q_REF, COSMOS)


def test_joint_positions_refuse_when_the_catalogue_omits_semantics():
    bare = Model.from_wire({"id": PI05_ROW["id"], "action_space": "joint_delta"})
    with pytest.raises(ValueError, match="conversion"):
        to_joint_positions(chunk([[0.0] * 8]), Q_REF, bare)


def test_joint_positions_refuse_another_reference():
    row = copy.deepcopy(PI05_ROW)
    row["action_semantics"]["conversions"]["joint_position"]["reference"] = "current_state"
    with pytest.raises(ValueError, match="state_at_request"):
        to_joint_positions(chunk([[0.0] * 8]), Q_REF, Model.from_wire(row))


def test_joint_positions_refuse_a_short_reference():
    with pytest.raises(ValueError, match="q_reference has 6 values"):
        to_joint_positions(chunk([[0.0] * 8]), Q_REF[:6], PI05)


@pytest.mark.parametrize(
    ("q_ref", "error"),
    [
        (Q_REF[:6] + [float("nan")], ValueError),
        ("0123456", TypeError),
        (Q_REF[:6] + ["x"], TypeError),
    ],
)
def test_joint_positions_reject_bad_reference_values(q_ref, error):
    with pytest.raises(error, match=r"q_reference"):
        to_joint_positions(chunk([[0.0] * 8]), q_ref, PI05)


@pytest.mark.parametrize("horizon", [0, -1, 2.5])
def test_joint_positions_reject_a_bad_horizon(horizon):
    with pytest.raises(ValueError, match="horizon"):
        to_joint_positions(chunk([[0.0] * 8]), Q_REF, PI05, horizon=horizon)


finite = st.floats(-3.0, 3.0, allow_nan=False)


@given(st.lists(st.lists(finite, min_size=8, max_size=8), min_size=1, max_size=15))
def test_prepared_rows_are_always_in_range_with_a_binary_gripper(rows):
    c = chunk(rows)
    for i in range(len(c)):
        row = prepare(c, PI05, i)
        assert all(-1.0 <= v <= 1.0 for v in row)
        assert row[7] in (0.0, 1.0)
