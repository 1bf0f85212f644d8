"""Plug-in policies served through the fixture: routing, options, and a misbehaving policy."""

from __future__ import annotations

import pytest

pytest.importorskip("fastapi")

from support.gateway_support import client  # noqa: E402

PLUGINS = [f"support.gateway_plugins:{name}"
           for name in ("chat_model", "too_wide", "crashing", "echo_options")]


def body(model: str, **options) -> dict:
    return {"model": model, "observation": {"images": [], "instruction": "x",
                                            "proprioception": {"joint_positions": [1.0]}},
            **options}


@pytest.fixture
def served(gateway_factory):
    return gateway_factory(policies=PLUGINS)


def test_plug_in_rows_join_the_catalogue_with_their_endpoint(served):
    with client(served, key=None) as c:
        act_ids = [r["id"] for r in c.get("/v1/models", params={"endpoint": "act"}).json()["data"]]
        chat = c.get("/v1/models", params={"endpoint": "chat"}).json()["data"]
    assert "accounts/sequences/models/test-echo" in act_ids and len(act_ids) == 10
    assert [r["id"] for r in chat] == ["accounts/sequences/models/sim-planner",
                                       "accounts/sequences/models/test-chat"]
    assert chat[1]["state_layout"] == {"joint_positions": 2}


def test_chat_to_a_plug_in_without_a_reply_is_a_501_naming_it(served):
    with client(served) as c:
        response = c.post("/v1/chat", json={"model": "test-chat",
                                            "messages": [{"role": "user", "content": "hi"}]})
    assert response.status_code == 501 and "test-chat" in response.json()["detail"]


def test_act_on_a_model_of_another_endpoint_is_a_400(served):
    with client(served) as c:
        response = c.post("/v1/act", json=body("test-chat"))
    assert response.status_code == 400 and "/v1/chat" in response.json()["detail"]


def test_policy_sees_fitted_state_and_pass_through_options(served):
    with client(served) as c:
        response = c.post("/v1/act", json=body("test-echo", action_horizon=5))
    assert response.status_code == 200
    assert response.json()["action_chunk"]["steps"][0]["values"] == [5.0, 2.0]
    assert any("zero-filled to 2" in w for w in response.json()["warnings"])


@pytest.mark.parametrize(("model", "words"), [("test-too-wide", "invalid step 0"),
                                              ("test-crashing", "weights not found")])
def test_a_broken_plug_in_is_a_500_naming_it(served, model, words):
    with client(served) as c:
        response = c.post("/v1/act", json=body(model))
        after = c.post("/v1/act", json=body("test-echo"))
    assert response.status_code == 500
    assert model in response.json()["detail"] and words in response.json()["detail"]
    assert after.status_code == 200
