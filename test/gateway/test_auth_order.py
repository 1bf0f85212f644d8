"""Auth, credit and model lookup, in the order §1.3 fixes: 422 -> 401 -> 402 -> 404 -> 400."""

from __future__ import annotations

import pytest

pytest.importorskip("fastapi")

from support.gateway_support import PI05, act_body, client  # noqa: E402

DOCTOR_PROBE = {
    "model": "accounts/sequences/models/__doctor_probe__",
    "observation": {
        "images": [{"view": "exterior_1", "data": "Zm9v"}],
        "proprioception": {"joint_positions": [0.0]},
        "instruction": "doctor probe",
    },
}


@pytest.mark.parametrize(("key", "status"), [(None, 401), ("seq_live_nope", 401),
                                             ("broke", 402), ("valid", 404)])
def test_doctor_probe_reads_auth_then_credit_then_model(gateway, key, status):
    with client(gateway, key=key) as c:
        response = c.post("/v1/act", json=DOCTOR_PROBE)
    assert response.status_code == status
    assert isinstance(response.json()["detail"], str)


@pytest.mark.parametrize("key", [None, "seq_live_nope", "broke", "valid"])
def test_malformed_body_is_422_whatever_the_key(gateway, key):
    broken = dict(DOCTOR_PROBE, observation={"images": "not a list"})
    with client(gateway, key=key) as c:
        response = c.post("/v1/act", json=broken)
        not_json = c.post("/v1/act", content=b"{not json")
    assert response.status_code == 422 and isinstance(response.json()["detail"], list)
    assert not_json.status_code == 422


def test_scalar_gripper_is_a_422(gateway):
    body = act_body(gripper=0.0)
    with client(gateway) as c:
        response = c.post("/v1/act", json=body)
    assert response.status_code == 422
    assert "gripper" in str(response.json()["detail"])


@pytest.mark.parametrize("field", ["joint_positions", "gripper"])
def test_non_finite_state_is_a_422(gateway, field):
    body = act_body()
    body["observation"]["proprioception"][field] = [float("nan")] * (7 if field != "gripper" else 1)
    with client(gateway) as c:
        response = c.post("/v1/act", content=_dumps_allowing_nan(body))
    assert response.status_code == 422


def _dumps_allowing_nan(body: dict) -> bytes:
    import json
    return json.dumps(body, allow_nan=True).encode()


def test_model_lookup_comes_before_observation_checks(gateway):
    body = act_body(model=PI05, views=["exterior_1"])  # would be a 400 for a served model
    body["model"] = "accounts/sequences/models/not-a-model"
    with client(gateway) as c:
        response = c.post("/v1/act", json=body)
    assert response.status_code == 404
    assert "not-a-model" in response.json()["detail"]


def test_credit_comes_before_model_and_observation(gateway):
    body = act_body(views=["exterior_1"])
    with client(gateway, key="broke") as c:
        assert c.post("/v1/act", json=body).status_code == 402


def test_other_namespace_is_not_the_same_model(gateway):
    body = act_body()
    body["model"] = "accounts/someone-else/models/pi05-droid"
    with client(gateway) as c:
        assert c.post("/v1/act", json=body).status_code == 404


@pytest.mark.parametrize(("key", "status"), [(None, 401), ("seq_live_nope", 401)])
def test_ready_needs_a_known_key(gateway, key, status):
    with client(gateway, key=key) as c:
        response = c.get("/v1/act/ready", params={"model": PI05})
    assert response.status_code == status
    assert "detail" in response.json()


def test_ready_for_an_unknown_model_is_404(gateway):
    with client(gateway) as c:
        response = c.get("/v1/act/ready", params={"model": "accounts/sequences/models/nope"})
    assert response.status_code == 404


def test_ready_without_model_is_422(gateway):
    with client(gateway) as c:
        assert c.get("/v1/act/ready").status_code == 422


def test_configured_keys_replace_the_development_key(gateway_factory):
    handle = gateway_factory(api_keys=["seq_live_a", "seq_live_b"])
    assert handle.api_key == "seq_live_a"
    body = act_body()
    for key, status in (("seq_live_a", 200), ("seq_live_b", 200), ("seq_dev_local_gateway", 401)):
        with client(handle, key=key) as c:
            assert c.post("/v1/act", json=body).status_code == status, key


def test_key_is_never_echoed(gateway):
    secret = "seq_live_this_must_not_leak"
    with client(gateway, key=secret) as c:
        response = c.post("/v1/act", json=act_body())
    assert response.status_code == 401 and secret not in response.text
