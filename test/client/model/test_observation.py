"""observation(), encode() and the local checks of views and state layout."""

from __future__ import annotations

import base64
import io
import math
import sys
import warnings

import pytest

from sequence_ai._model.catalogue import Model
from sequence_ai._model.observation import (
    Problem,
    ProblemKind,
    encode,
    is_fatal,
    observation,
    problems_with,
)

PI05 = Model.from_wire(
    {
        "id": "accounts/sequences/models/pi05-droid",
        "state_dim": 8,
        "state_layout": {"joint_positions": 7, "gripper": 1},
        "camera_views": ["exterior_1", "wrist_left"],
        "training_frame_size": [320, 180],
        "input_aspect_ratio": 1.7778,
    }
)
NO_LAYOUT = Model.from_wire({"id": "sum-only", "state_dim": 8, "camera_views": ["cam"]})
BLIND = Model.from_wire({"id": "no-state", "state_dim": 0, "camera_views": ["cam"]})
UNDECLARED = Model.from_wire({"id": "free"})
JOINTS = [0.0, -0.5, 0.0, -2.0, 0.0, 1.5, 0.8]
# Only the JPEG magic matters for bytes, which are sent as they are.
JPEG_BYTES = b"\xff\xd8\xff\xe0" + b"\x00" * 16
FRAMES = {"exterior_1": JPEG_BYTES, "wrist_left": JPEG_BYTES}


def build(model=PI05, **overrides):
    kwargs = {
        "images": FRAMES,
        "instruction": "pick up the cup",
        "joints": JOINTS,
        "gripper": [0.0],
    }
    kwargs.update(overrides)
    return observation(model, **kwargs)


def test_a_matching_observation_builds_the_wire_form():
    obs = build(timestamp_ms=1234)
    assert [f.view for f in obs.images] == ["exterior_1", "wrist_left"]
    assert base64.b64decode(obs.images[0].data) == JPEG_BYTES
    assert {f.timestamp_ms for f in obs.images} == {1234}
    assert obs.proprioception.joint_positions == JOINTS
    assert obs.proprioception.gripper == [0.0]
    assert obs.instruction == "pick up the cup"


def test_images_as_a_list_is_a_type_error_showing_the_dict_shape():
    with pytest.raises(TypeError, match="expected a dict.*'exterior_1': frame"):
        build(images=[JPEG_BYTES, JPEG_BYTES])


def test_a_missing_view_is_refused_before_sending_and_is_fatal():
    with pytest.raises(ValueError, match=r"missing view\(s\) \['wrist_left'\]"):
        build(images={"exterior_1": JPEG_BYTES})
    assert is_fatal(problems_with(PI05, ["exterior_1"], JOINTS, [0.0]))


def test_an_unknown_view_is_named_and_is_not_fatal():
    problems = problems_with(PI05, ["exterior_1", "wrist_left", "wrist_right"], JOINTS, [0.0])
    assert len(problems) == 1 and "'wrist_right'" in problems[0]
    assert not is_fatal(problems)


def test_eight_joints_and_no_gripper_fail_the_layout_check_although_the_sum_matches():
    with pytest.raises(ValueError) as info:
        build(joints=JOINTS + [0.04], gripper=None)
    message = str(info.value)
    assert "joints has 8 values" in message and "joint_positions = 7" in message
    assert "gripper is None" in message and "state_layout.gripper = 1" in message


def test_each_problem_carries_its_kind_and_only_a_missing_view_is_fatal():
    problems = problems_with(PI05, ["exterior_1", "wrist_right"], JOINTS + [0.04], None)
    kinds = [problem.kind for problem in problems]
    assert kinds == [ProblemKind.UNKNOWN_VIEW, ProblemKind.MISSING_VIEWS,
                     ProblemKind.STATE_WIDTH, ProblemKind.STATE_WIDTH]
    assert is_fatal(problems) and not is_fatal(problems[2:])
    # The kind decides, not the sentence: a message that merely mentions a missing view is not.
    assert not is_fatal([Problem(ProblemKind.STATE_WIDTH, "missing view(s) in the text")])
    assert PI05.state_split == (7, 1) and NO_LAYOUT.state_split is None


def test_a_model_without_layout_is_checked_by_the_sum():
    assert problems_with(NO_LAYOUT, ["cam"], JOINTS + [0.0], None) == []
    assert "state_dim = 8" in problems_with(NO_LAYOUT, ["cam"], JOINTS, None)[0]


def test_joints_may_be_omitted_only_for_a_stateless_model():
    obs = observation(BLIND, images={"cam": JPEG_BYTES}, instruction="look")
    assert obs.proprioception.joint_positions == []
    with pytest.raises(ValueError, match="joints is None"):
        build(joints=None)


def test_a_model_declaring_nothing_checks_nothing():
    assert problems_with(UNDECLARED, ["anything"], [1.0], None) == []


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("joints", JOINTS[:6] + [math.nan]),
        ("gripper", [math.inf]),
        ("joint_velocities", [math.nan] * 7),
    ],
)
def test_non_finite_state_always_raises_naming_the_field(field, value):
    for strict in (True, False):
        with pytest.raises(ValueError, match=rf"{field}\[\d\] is (nan|inf)"):
            build(strict=strict, **{field: value})


@pytest.mark.parametrize(
    ("overrides", "error", "field"),
    [
        ({"joints": "0.1,0.2"}, TypeError, "joints"),
        ({"joints": [0.0] * 6 + ["x"]}, TypeError, r"joints\[6\]"),
        ({"joints": [[0.0] * 7]}, TypeError, r"joints\[0\]"),
        ({"gripper": {"open": 1}}, TypeError, "gripper"),
        ({"gripper": [True]}, TypeError, r"gripper\[0\]"),
        ({"instruction": 42}, TypeError, "instruction"),
        ({"instruction": "  "}, ValueError, "instruction"),
        ({"timestamp_ms": -1}, ValueError, "timestamp_ms"),
        ({"quality": 0}, ValueError, "quality"),
        ({"quality": 101}, ValueError, "quality"),
        ({"quality": 95.0}, TypeError, "quality"),
        (
            {"images": {"exterior_1": 3.5, "wrist_left": JPEG_BYTES}},
            TypeError,
            "images\\['exterior_1'\\]",
        ),
        (
            {"images": {"exterior_1": b"GIF89a", "wrist_left": JPEG_BYTES}},
            ValueError,
            "not a JPEG or PNG",
        ),
        (
            {"images": {"exterior_1": "not base64!", "wrist_left": JPEG_BYTES}},
            ValueError,
            "not base64",
        ),
    ],
)
def test_bad_inputs_raise_type_or_value_errors_naming_the_field(overrides, error, field):
    with pytest.raises(error, match=field):
        build(**overrides)


def test_a_bare_gripper_number_is_wrapped_into_the_wire_list():
    assert build(gripper=1.0).proprioception.gripper == [1.0]


def test_non_strict_warns_drops_unknown_views_and_still_builds():
    frames = dict(FRAMES, wrist_right=JPEG_BYTES)
    with pytest.warns(UserWarning, match="wrist_right"):
        obs = build(images=frames, strict=False)
    assert [f.view for f in obs.images] == ["exterior_1", "wrist_left"]


def test_base64_strings_and_data_urls_pass_through():
    text = base64.b64encode(JPEG_BYTES).decode()
    assert encode(text) == text
    assert encode("data:image/jpeg;base64," + text) == text


def test_quality_below_ninety_warns():
    with pytest.warns(UserWarning, match="below 90"):
        encode(JPEG_BYTES, quality=80)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        encode(JPEG_BYTES, quality=95)


# --- raw frames: need Pillow (and numpy for arrays) -------------------------------------------


def decoded(data):
    image_module = pytest.importorskip("PIL.Image")
    return image_module.open(io.BytesIO(base64.b64decode(data)))


@pytest.fixture
def np():
    pytest.importorskip("PIL")
    return pytest.importorskip("numpy")


def test_a_4_3_array_is_centre_cropped_to_16_9_and_resized_to_the_training_frame(np):
    frame = np.zeros((480, 640, 3), dtype=np.uint8)
    frame[:60] = 255  # a band the crop must remove entirely
    image = decoded(encode(frame, PI05))
    assert image.format == "JPEG" and image.size == (320, 180)
    assert np.asarray(image)[:5].mean() < 10


def test_a_wide_frame_is_cropped_at_the_sides(np):
    frame = np.zeros((100, 400, 3), dtype=np.uint8)
    frame[:, :20] = 255
    image = decoded(encode(frame, Model.from_wire({"id": "wide", "input_aspect_ratio": 2.0})))
    assert image.size == (200, 100)
    assert np.asarray(image)[:, :3].mean() < 10


def test_without_a_training_frame_the_long_edge_is_capped_at_640(np):
    image = decoded(encode(np.zeros((720, 1280, 3), dtype=np.uint8)))
    assert image.size == (640, 360)
    assert decoded(encode(np.zeros((100, 200, 3), dtype=np.uint8))).size == (200, 100)


@pytest.mark.parametrize("shape", [(90, 160), (90, 160, 4), (90, 160, 1)])
def test_mono_and_rgba_arrays_become_rgb_jpeg(np, shape):
    image = decoded(encode(np.full(shape, 128, dtype=np.uint8)))
    assert image.mode == "RGB" and image.size == (160, 90)


def test_pil_images_are_accepted(np):
    from PIL import Image

    image = decoded(encode(Image.new("RGBA", (1280, 720), (10, 200, 30, 255)), PI05))
    assert image.size == (320, 180)
    assert np.asarray(image)[90, 160, 1] > 150


@pytest.mark.parametrize(
    ("make", "error", "match"),
    [
        (
            lambda np: np.zeros((90, 160, 3), dtype=np.float32),
            TypeError,
            "dtype float32; expected uint8",
        ),
        (lambda np: np.zeros((90, 160, 2), dtype=np.uint8), ValueError, r"shape \(90, 160, 2\)"),
        (lambda np: np.zeros((2, 90, 160, 3), dtype=np.uint8), ValueError, "shape"),
        (lambda np: np.zeros((0, 160, 3), dtype=np.uint8), ValueError, "non-empty"),
    ],
)
def test_bad_arrays_name_the_view(np, make, error, match):
    with pytest.raises(error, match=match) as info:
        build(images={"exterior_1": make(np), "wrist_left": JPEG_BYTES})
    assert "images['exterior_1']" in str(info.value)


def test_higher_quality_gives_larger_frames(np):
    rng = np.random.default_rng(0)
    frame = rng.integers(0, 255, (180, 320, 3), dtype=np.uint8)
    assert len(encode(frame, quality=95)) > len(encode(frame, quality=91))


def test_missing_pillow_gives_an_install_hint(np, monkeypatch):
    monkeypatch.setitem(sys.modules, "PIL", None)
    monkeypatch.setitem(sys.modules, "PIL.Image", None)
    with pytest.raises(ImportError, match=r"sequence_ai_ros\[image\]"):
        encode(np.zeros((90, 160, 3), dtype=np.uint8))
