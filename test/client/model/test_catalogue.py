"""The catalogue: models() over real HTTP, Model mapping, ids and lookup."""

from __future__ import annotations

import pytest

from sequence_ai._model.catalogue import Model, find_model, full_model_id, models, short_model_id
from sequence_ai._transport.transport import Transport
from sequence_ai.errors import InvalidResponse

PI05 = "accounts/sequences/models/pi05-droid"
COSMOS = "accounts/sequences/models/cosmos3-edge-policy-droid"


def test_models_needs_no_key_and_maps_every_field(shared_gateway, no_env):
    rows = {m.short_id: m for m in models(base_url=shared_gateway.url)}
    pi05 = rows["pi05-droid"]
    assert pi05.id == PI05 and pi05.endpoint == "act"
    assert pi05.camera_views == ("exterior_1", "wrist_left")
    assert pi05.state_dim == 8 and pi05.state_layout == {"joint_positions": 7, "gripper": 1}
    assert pi05.action_dim == 8 and pi05.action_space == "joint_delta"
    assert pi05.control_hz == 15.0 and pi05.action_horizon == 15 and pi05.open_loop_horizon == 8
    assert pi05.training_frame_size == (320, 180)
    assert pi05.input_aspect_ratio == pytest.approx(1.7778)
    assert pi05.action_semantics["conversions"]["joint_position"]["reference"] == "state_at_request"
    assert pi05.training["trainable"] is True
    # Fields the client does not lift are kept verbatim.
    assert "pricing" in pi05.raw and pi05.raw["id"] == PI05
    cosmos = rows["cosmos3-edge-policy-droid"]
    assert cosmos.camera_views == ("exterior_1", "exterior_2", "wrist_left")
    assert cosmos.open_loop_horizon is None


def test_endpoint_filter(shared_gateway, no_env):
    act = models("act", base_url=shared_gateway.url)
    assert act and all(m.endpoint == "act" for m in act)
    assert all(m.endpoint == "chat" for m in models("chat", base_url=shared_gateway.url))


def test_the_base_url_comes_from_the_environment(shared_gateway, monkeypatch):
    monkeypatch.setenv("SEQUENCES_BASE_URL", shared_gateway.url + "/")
    assert find_model(models(), "pi05-droid") is not None


def test_a_given_transport_is_reused_not_reopened(shared_gateway, no_env):
    with Transport(base_url=shared_gateway.url, api_key=shared_gateway.api_key) as t:
        t.get("/v1/health")
        before = shared_gateway.counters()["connections"]
        assert models("act", transport=t)
        assert models(transport=t)
        assert shared_gateway.counters()["connections"] == before
        assert not t.closed


def test_plain_http_to_another_host_is_refused(no_env):
    with pytest.raises(ValueError, match="allow_insecure"):
        models(base_url="http://catalogue.example")


@pytest.mark.parametrize("endpoint", ["", "  ", 3])
def test_a_bad_endpoint_is_refused_locally(endpoint, no_env):
    with pytest.raises(ValueError, match="endpoint"):
        models(endpoint, base_url="http://127.0.0.1:9")


def test_full_and_short_ids():
    assert full_model_id("pi05-droid") == PI05
    assert full_model_id(PI05) == PI05
    assert full_model_id("accounts/acme/models/pi05-droid") == "accounts/acme/models/pi05-droid"
    assert short_model_id(PI05) == "pi05-droid"
    with pytest.raises(ValueError, match="model"):
        full_model_id("  ")
    with pytest.raises(TypeError, match="model"):
        full_model_id(None)


def test_find_model_prefers_the_exact_id_then_the_tail():
    ours = Model.from_wire({"id": PI05})
    theirs = Model.from_wire({"id": "accounts/acme/models/pi05-droid"})
    rows = [theirs, ours, Model.from_wire({"id": COSMOS})]
    assert find_model(rows, "pi05-droid") is ours
    assert find_model(rows, "accounts/acme/models/pi05-droid") is theirs
    assert find_model([theirs], "pi05-droid") is theirs
    assert find_model(rows, "groot") is None


@pytest.mark.parametrize(
    ("row", "field"),
    [
        ({}, "id"),
        ({"id": ""}, "id"),
        ({"id": "m", "action_dim": "8"}, "action_dim"),
        ({"id": "m", "action_dim": -1}, "action_dim"),
        ({"id": "m", "camera_views": "exterior_1"}, "camera_views"),
        ({"id": "m", "camera_views": [1, 2]}, "camera_views"),
        ({"id": "m", "training_frame_size": [320]}, "training_frame_size"),
        ({"id": "m", "state_layout": {"joint_positions": "7"}}, "state_layout.joint_positions"),
        ({"id": "m", "control_hz": "fast"}, "control_hz"),
        ({"id": "m", "action_semantics": []}, "action_semantics"),
    ],
)
def test_a_malformed_row_is_invalid_response_naming_the_field(row, field):
    with pytest.raises(InvalidResponse, match=field):
        Model.from_wire(row)


def test_models_are_hashable_and_have_a_short_repr():
    model = Model.from_wire({"id": PI05, "action_semantics": {"space": "joint_delta"}})
    assert {model: 1}[model] == 1
    assert model.action_space == "joint_delta"  # lifted from the semantics when the row omits it
    assert repr(model).startswith("Model('pi05-droid'")


def test_aspect_ratio_falls_back_to_the_training_frame():
    assert Model.from_wire({"id": "m", "training_frame_size": [640, 480]}).aspect_ratio == 4 / 3
    assert Model.from_wire({"id": "m"}).aspect_ratio is None
