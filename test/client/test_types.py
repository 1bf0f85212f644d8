"""Wire types: parsing and sanity checks of action chunks and predictions."""

from __future__ import annotations

import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from sequence_ai.errors import InvalidResponse, SequencesError
from sequence_ai.types import ActionChunk, ImageFrame, Observation, Prediction, Proprioception


def chunk_wire(**overrides):
    body = {
        "steps": [{"index": i, "values": [0.1 * i, 0.0, 1.0]} for i in range(4)],
        "robot": "droid_franka",
        "action_space": "joint_delta",
        "action_dim": 3,
        "control_frequency_hz": 15.0,
        "covers_seconds": 4 / 15,
        "open_loop_horizon": 2,
        "sustains_seconds": 2 / 15,
    }
    body.update(overrides)
    return body


def test_chunk_parses_object_steps_in_list_order():
    chunk = ActionChunk.from_wire(chunk_wire())
    assert len(chunk) == 4
    assert chunk.steps[3] == [pytest.approx(0.3), 0.0, 1.0]
    assert chunk.open_loop_horizon == 2
    assert chunk.control_frequency_hz == 15.0


def test_chunk_accepts_flat_rows_and_coerces_ints_to_float():
    chunk = ActionChunk.from_wire(chunk_wire(steps=[[1, 2, 3], [4, 5, 6]]))
    assert chunk.steps == [[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]]
    assert all(isinstance(v, float) for row in chunk.steps for v in row)


def test_chunk_ignores_the_index_field_and_keeps_the_list_order():
    steps = [{"index": 5, "values": [1, 1, 1]}, {"index": 0, "values": [2, 2, 2]}]
    assert ActionChunk.from_wire(chunk_wire(steps=steps)).steps[0] == [1.0, 1.0, 1.0]


def test_optional_fields_may_be_absent_or_null():
    body = chunk_wire()
    del body["open_loop_horizon"]
    body["sustains_seconds"] = None
    chunk = ActionChunk.from_wire(body)
    assert chunk.open_loop_horizon is None and chunk.sustains_seconds is None


@pytest.mark.parametrize(
    "key",
    ["steps", "robot", "action_space", "action_dim", "control_frequency_hz", "covers_seconds"],
)
def test_missing_required_key_is_invalid_response_naming_it(key):
    body = chunk_wire()
    del body[key]
    with pytest.raises(InvalidResponse, match=key):
        ActionChunk.from_wire(body)


@pytest.mark.parametrize("bad", [math.nan, math.inf, -math.inf])
def test_non_finite_value_is_rejected_with_its_position(bad):
    steps = [[0.0, 0.0, 0.0], [0.0, bad, 0.0]]
    with pytest.raises(InvalidResponse, match=r"steps\[1\]\[1\]"):
        ActionChunk.from_wire(chunk_wire(steps=steps))


def test_row_wider_than_action_dim_is_rejected():
    with pytest.raises(InvalidResponse, match="action_dim = 3"):
        ActionChunk.from_wire(chunk_wire(steps=[[0.0, 0.0, 0.0, 0.0]]))


def test_row_narrower_than_action_dim_is_rejected():
    with pytest.raises(InvalidResponse, match="has 2 values"):
        ActionChunk.from_wire(chunk_wire(steps=[[0.0, 0.0]]))


def test_empty_chunk_is_rejected():
    with pytest.raises(InvalidResponse, match="empty"):
        ActionChunk.from_wire(chunk_wire(steps=[]))


@pytest.mark.parametrize("hz", [0, -15.0, math.nan, "15"])
def test_non_positive_or_non_numeric_rate_is_rejected(hz):
    with pytest.raises(InvalidResponse, match="control_frequency_hz"):
        ActionChunk.from_wire(chunk_wire(control_frequency_hz=hz))


@pytest.mark.parametrize(
    "overrides",
    [
        {"action_dim": 0},
        {"action_dim": True},
        {"action_dim": "3"},
        {"steps": [["a", 0.0, 0.0]]},
        {"steps": [[True, 0.0, 0.0]]},
        {"steps": [{"index": 0}]},
        {"steps": "0,0,0"},
        {"steps": [7]},
        {"open_loop_horizon": 0},
        {"action_space": 3},
    ],
)
def test_malformed_chunks_raise_invalid_response_never_other_errors(overrides):
    with pytest.raises(InvalidResponse):
        ActionChunk.from_wire(chunk_wire(**overrides))


def test_invalid_response_is_a_sequences_error():
    with pytest.raises(SequencesError):
        ActionChunk.from_wire(None)


@given(
    st.one_of(
        st.none(),
        st.integers(),
        st.text(max_size=5),
        st.lists(st.one_of(st.none(), st.floats(), st.text(max_size=3)), max_size=4),
        st.dictionaries(
            st.sampled_from(["steps", "action_dim", "robot", "control_frequency_hz"]),
            st.one_of(
                st.none(), st.integers(-2, 4), st.floats(), st.lists(st.floats(), max_size=3)
            ),
        ),
    )
)
def test_arbitrary_garbage_only_ever_raises_invalid_response(garbage):
    with pytest.raises(InvalidResponse):
        ActionChunk.from_wire(garbage)


@given(
    st.lists(
        st.lists(
            st.floats(allow_nan=False, allow_infinity=False, width=32), min_size=3, max_size=3
        ),
        min_size=1,
        max_size=20,
    )
)
def test_any_finite_rows_of_the_right_width_round_trip(rows):
    chunk = ActionChunk.from_wire(
        chunk_wire(steps=[{"index": i, "values": r} for i, r in enumerate(rows)])
    )
    assert chunk.steps == [[float(v) for v in r] for r in rows]


def test_chunk_repr_is_one_line_with_shape_and_replan():
    text = repr(ActionChunk.from_wire(chunk_wire()))
    assert "\n" not in text
    assert "4 steps x 3 dims" in text and "joint_delta" in text and "replan after 2" in text


def test_prediction_parses_and_keeps_the_observation():
    obs = Observation(
        [ImageFrame("exterior_1", "Zm9v")], Proprioception([0.0] * 7, gripper=[0.0]), "go"
    )
    pred = Prediction.from_wire(
        {
            "id": "req-1",
            "model": "accounts/sequences/models/pi05-droid",
            "action_chunk": chunk_wire(),
            "warnings": ["w"],
        },
        observation=obs,
    )
    assert pred.id == "req-1" and pred.warnings == ["w"]
    assert pred.perf == {} and pred.usage == {}
    assert pred.observation is obs


@pytest.mark.parametrize("missing", ["id", "model", "action_chunk"])
def test_prediction_missing_key_is_invalid_response(missing):
    body = {"id": "r", "model": "m", "action_chunk": chunk_wire()}
    del body[missing]
    with pytest.raises(InvalidResponse, match=missing):
        Prediction.from_wire(body)


def test_observation_wire_form_sends_unset_optionals_as_null_and_keeps_view_order():
    obs = Observation(
        images=[ImageFrame("wrist_left", "QUJD", timestamp_ms=5), ImageFrame("exterior_1", "REVG")],
        proprioception=Proprioception([1, 2], gripper=[1]),
        instruction="pick",
    )
    wire = obs.to_wire()
    assert [f["view"] for f in wire["images"]] == ["wrist_left", "exterior_1"]
    # §1.3: the nested optionals go out as explicit JSON null when unset.
    assert wire["images"][0]["timestamp_ms"] == 5 and wire["images"][1]["timestamp_ms"] is None
    assert wire["proprioception"] == {"joint_positions": [1.0, 2.0], "joint_velocities": None,
                                      "end_effector_pose": None, "gripper": [1.0]}
    assert wire["instruction"] == "pick"


def test_with_instruction_returns_a_copy():
    obs = Observation([], Proprioception([]), "old")
    new = obs.with_instruction("new")
    assert new.instruction == "new" and obs.instruction == "old"
    assert new.proprioception is obs.proprioception
    with pytest.raises(TypeError, match="instruction"):
        obs.with_instruction(3)


def test_image_frame_repr_does_not_dump_the_payload():
    frame = ImageFrame("exterior_1", "A" * 50_000)
    assert len(repr(frame)) < 200 and "50000" in repr(frame)
