"""Bad input to ``observation()`` and ``encode()``: a ValueError or TypeError naming the field,
never another exception, and never a request to the service."""

from __future__ import annotations

import base64
import io
import math
import warnings
from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp
from PIL import Image
from support.gateway_fixture import run_gateway

import sequence_ai
from sequence_ai import InvalidRequest, Observation, find_model

VIEWS = ("exterior_1", "wrist_left")
GOOD_FRAME = np.zeros((180, 320, 3), dtype=np.uint8)
SETTINGS = settings(max_examples=150, deadline=None,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])


@pytest.fixture(scope="module")
def served() -> Iterator[tuple[Any, Any]]:
    """The gateway and pi05-droid's catalogue row; the module asserts no act request is made."""
    with run_gateway() as gw:
        model = find_model(sequence_ai.models(base_url=gw.url), "pi05-droid")
        before = gw.counters()["requests"]["act"]
        yield gw, model
        assert gw.counters()["requests"]["act"] == before


# ----- frames -----

_DTYPES = st.sampled_from([np.uint8, np.int8, np.uint16, np.int32, np.float32, np.float64,
                           np.bool_, np.complex64])
_ODD_ARRAYS = hnp.arrays(
    dtype=_DTYPES,
    shape=hnp.array_shapes(min_dims=0, max_dims=4, min_side=0, max_side=6),
    elements=None,
    fill=st.nothing(),
).filter(lambda a: a.size <= 4096)
_EXTREME_SIZES = st.sampled_from([(1, 1), (1, 4000), (4000, 1), (3, 2), (2160, 3840)])
_PIL_MODES = st.sampled_from(["1", "L", "P", "RGB", "RGBA", "CMYK", "I", "F", "I;16", "LA"])


@st.composite
def pil_images(draw: Any) -> Any:
    mode = draw(_PIL_MODES)
    size = (draw(st.integers(1, 40)), draw(st.integers(1, 40)))
    return Image.new(mode, size)


FRAMES = st.one_of(
    _ODD_ARRAYS,
    _EXTREME_SIZES.map(lambda hw: np.zeros(hw + (3,), dtype=np.uint8)),
    # Channels-first: the layout a tensor pipeline hands over by mistake.
    st.sampled_from([np.zeros((3, 180, 320), dtype=np.uint8),
                     np.zeros((180, 320, 2), dtype=np.uint8),
                     np.zeros((1, 180, 320, 3), dtype=np.uint8)]),
    pil_images(),
    st.binary(max_size=64),
    st.text(max_size=64),
    st.sampled_from([None, 3, 2.5, [1, 2, 3], {"data": "x"}, b"\xff\xd8" + b"\x00" * 8]),
)


def _check_error(exc: BaseException, *fields: str) -> None:
    assert isinstance(exc, (ValueError, TypeError)), repr(exc)
    text = str(exc)
    assert any(field in text for field in fields), f"{text!r} names none of {fields}"


def _decodes(data: str) -> tuple[int, int]:
    with Image.open(io.BytesIO(base64.b64decode(data))) as image:
        return image.size


@SETTINGS
@given(frame=FRAMES)
def test_encode_takes_a_frame_or_names_it(served: tuple[Any, Any], frame: Any) -> None:
    _, model = served
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            data = sequence_ai.encode(frame, model)
    except Exception as exc:  # noqa: BLE001 - the class is the property under test
        _check_error(exc, "frame")
        return
    assert isinstance(data, str) and data
    if not isinstance(frame, (str, bytes)):
        # A raw frame is always sent at the model's training size.
        assert _decodes(data) == tuple(model.training_frame_size)


# ----- whole observations, one field wrong at a time -----


def _valid() -> dict[str, Any]:
    return {
        "images": {view: GOOD_FRAME for view in VIEWS},
        "instruction": "pick up the cup",
        "joints": [0.0] * 7,
        "gripper": [0.0],
    }


_NUMBERS = st.one_of(st.floats(allow_nan=True, allow_infinity=True), st.integers(-5, 5),
                     st.booleans(), st.text(max_size=3), st.none())
_VECTORS = st.one_of(
    st.lists(_NUMBERS, max_size=10),
    st.lists(st.lists(st.floats(-1, 1), max_size=3), max_size=8),
    hnp.arrays(np.float64, hnp.array_shapes(min_dims=0, max_dims=3, max_side=8)),
    st.sampled_from(["0.1, 0.2", {"j1": 0.0}, 7, math.nan]),
)


@st.composite
def one_bad_field(draw: Any) -> tuple[dict[str, Any], tuple[str, ...]]:
    """A valid observation with one field replaced; the names an error about it must use."""
    kwargs = _valid()
    field = draw(st.sampled_from(
        ["frame", "views", "joints", "gripper", "instruction", "layout", "quality",
         "images_type", "velocities"]
    ))
    if field == "frame":
        view = draw(st.sampled_from(VIEWS))
        kwargs["images"] = dict(kwargs["images"], **{view: draw(FRAMES)})
        return kwargs, (f"images[{view!r}]",)
    if field == "views":
        names = draw(st.lists(st.one_of(st.sampled_from(VIEWS + ("exterior_2", "wrist")),
                                        st.text(max_size=8), st.integers(0, 3)),
                              max_size=4, unique_by=repr))
        kwargs["images"] = {name: GOOD_FRAME for name in names}
        return kwargs, ("images",)
    if field in ("joints", "gripper"):
        kwargs[field] = draw(_VECTORS)
        return kwargs, (field,)
    if field == "velocities":
        kwargs["joint_velocities"] = draw(_VECTORS)
        return kwargs, ("joint_velocities",)
    if field == "instruction":
        kwargs["instruction"] = draw(st.one_of(st.text(max_size=5), st.none(), st.integers(),
                                               st.binary(max_size=5)))
        return kwargs, ("instruction",)
    if field == "layout":
        # The right total of state values in the wrong fields.
        kwargs["joints"] = [0.0] * draw(st.sampled_from([6, 8]))
        kwargs["gripper"] = draw(st.sampled_from([None, [], [0.0, 0.0]]))
        return kwargs, ("joints", "gripper")
    if field == "quality":
        kwargs["quality"] = draw(st.one_of(st.integers(-5, 200), st.floats(), st.booleans(),
                                           st.text(max_size=3)))
        return kwargs, ("quality",)
    kwargs["images"] = draw(st.sampled_from([[GOOD_FRAME, GOOD_FRAME], GOOD_FRAME, None, "x"]))
    return kwargs, ("images",)


@SETTINGS
@given(case=one_bad_field())
def test_observation_builds_or_names_the_bad_field(
    served: tuple[Any, Any], case: tuple[dict[str, Any], tuple[str, ...]]
) -> None:
    _, model = served
    kwargs, fields = case
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            built = sequence_ai.observation(model, **kwargs)
    except Exception as exc:  # noqa: BLE001 - the class is the property under test
        _check_error(exc, *fields)
        return
    assert isinstance(built, Observation)
    state = built.proprioception
    assert all(math.isfinite(v) for v in state.joint_positions + (state.gripper or []))
    # Frames are matched by view name, so their order is free.
    assert sorted(frame.view for frame in built.images) == sorted(VIEWS)


@pytest.mark.slow  # over half a second of wall time
@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(case=one_bad_field().filter(lambda c: c[1][0] in ("images", "joints")))
def test_strict_policy_refuses_a_mismatch_before_sending(
    served: tuple[Any, Any], case: tuple[dict[str, Any], tuple[str, ...]]
) -> None:
    """What a lenient observation() lets through, a strict Policy stops before the wire."""
    gw, model = served
    kwargs, _ = case
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            built = sequence_ai.observation(model, strict=False, **kwargs)
    except (ValueError, TypeError):
        return
    views = sorted(frame.view for frame in built.images)
    state = built.proprioception
    if views == sorted(VIEWS) and len(state.joint_positions) == 7 and len(state.gripper or []) == 1:
        return  # a match (in any order of views): nothing for the check to refuse
    with sequence_ai.connect("pi05-droid", api_key=gw.api_key, base_url=gw.url,
                             validate="strict") as policy:
        with pytest.raises(InvalidRequest, match="pi05-droid"):
            policy.predict(built)
