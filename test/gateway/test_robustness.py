"""No 5xx for a schema-valid request unless a fault was injected; junk gets a 4xx."""

from __future__ import annotations

import json

import pytest

pytest.importorskip("fastapi")

from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402
from support.gateway_fixture import run_gateway  # noqa: E402
from support.gateway_support import ALL_MODELS, FRAME_SIZE, VIEWS, act_body, client, frame  # noqa: E402

ALL_VIEWS = sorted({v for views in VIEWS.values() for v in views} | {"top", ""})
FRAMES = [frame(*size) for size in set(FRAME_SIZE.values())] + [
    frame(640, 480), frame(17, 3, "PNG"), "Zm9v", "", "####", "data:image/jpeg;base64,AAAA",
]
finite = st.floats(allow_nan=False, allow_infinity=False, width=64)
optional_floats = st.one_of(st.none(), st.lists(finite, max_size=20))

bodies = st.fixed_dictionaries(
    {
        "model": st.one_of(st.sampled_from(ALL_MODELS), st.text(max_size=40),
                           st.sampled_from(["pi05-droid", "accounts/x/models/pi05-droid"])),
        "observation": st.fixed_dictionaries({
            "images": st.lists(
                st.fixed_dictionaries(
                    {"view": st.sampled_from(ALL_VIEWS), "data": st.sampled_from(FRAMES)},
                    optional={"timestamp_ms": st.one_of(st.none(), st.integers(0, 2**62))},
                ),
                max_size=5,
            ),
            "proprioception": st.fixed_dictionaries(
                {"joint_positions": st.lists(finite, max_size=20)},
                optional={"gripper": optional_floats, "joint_velocities": optional_floats,
                          "end_effector_pose": optional_floats},
            ),
            "instruction": st.text(max_size=200),
        }),
    },
    optional={"seed": st.one_of(st.none(), st.integers(-(2**63), 2**63)),
              "action_horizon": st.integers(0, 100), "robot": st.text(max_size=10)},
)


@pytest.fixture(scope="module")
def shared_gateway():
    with run_gateway() as handle:
        yield handle


@pytest.mark.slow
@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(body=bodies)
def test_schema_valid_requests_never_get_a_5xx(shared_gateway, body):
    with client(shared_gateway) as c:
        response = c.post("/v1/act", json=body)
    assert response.status_code in (200, 400, 404), response.text
    assert "detail" in response.json() or "action_chunk" in response.json()


json_values = st.recursive(
    st.one_of(st.none(), st.booleans(), finite, st.text(max_size=20)),
    lambda inner: st.one_of(st.lists(inner, max_size=4),
                            st.dictionaries(st.text(max_size=8), inner, max_size=4)),
    max_leaves=20,
)


@pytest.mark.slow
@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(body=json_values)
def test_arbitrary_json_gets_a_client_error(shared_gateway, body):
    with client(shared_gateway) as c:
        response = c.post("/v1/act", json=body)
    assert 400 <= response.status_code < 500
    assert "detail" in response.json()


@pytest.mark.parametrize("where", ["instruction", "view", "model", "option"])
def test_lone_surrogates_in_strings_are_not_a_5xx(shared_gateway, where):
    body = act_body()
    odd = "cup \ud800 sink"
    if where == "instruction":
        body["observation"]["instruction"] = odd
    elif where == "view":
        body["observation"]["images"][0]["view"] = odd
    elif where == "model":
        body["model"] = odd
    else:
        body["robot"] = odd
    with client(shared_gateway) as c:
        response = c.post("/v1/act", content=json.dumps(body, ensure_ascii=True).encode())
    assert response.status_code in (200, 400, 404), response.text
