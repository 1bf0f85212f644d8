"""Health, catalogue rows (§1.6, §1.11), endpoint filter, unknown paths, OpenAPI."""

from __future__ import annotations

import pytest

pytest.importorskip("fastapi")

from support.gateway_support import (  # noqa: E402
    BIMANUAL,
    COSMOS3,
    DROID_ABSOLUTE_REACH,
    DROID_REACH,
    EE_ABSOLUTE,
    PI05,
    PLANNER,
    STATELESS,
    client,
)

ROW_FIELDS = (
    "id", "endpoint", "architecture", "robot", "action_dim", "state_dim", "state_layout",
    "action_horizon", "control_hz", "camera_views", "training_frame_size", "input_aspect_ratio",
    "input_resize", "action_space", "action_semantics", "training", "open_loop_horizon",
)
SEMANTICS_FIELDS = ("space", "pass_raw", "native_target", "value_range", "exceptions",
                    "conversions")


def rows_by_id(handle) -> dict:
    with client(handle, key=None) as c:
        response = c.get("/v1/models")
    assert response.status_code == 200
    return {row["id"]: row for row in response.json()["data"]}


def test_health_needs_no_key(gateway):
    with client(gateway, key=None) as c:
        response = c.get("/v1/health")
    assert response.status_code == 200
    body = response.json()
    assert isinstance(body["backend"], str) and body["auth"] == "keystore"


def test_catalogue_is_public_and_rows_carry_every_field(gateway):
    rows = rows_by_id(gateway)
    assert set(rows) == {
        PI05, COSMOS3, DROID_REACH, DROID_ABSOLUTE_REACH, BIMANUAL, STATELESS, EE_ABSOLUTE, PLANNER
    }
    for row in rows.values():
        for name in ROW_FIELDS:
            assert name in row, f"{row['id']} lacks {name}"
        assert row["simulated"] is True and "Simulated" in row["description"]
        if row["endpoint"] != "act":
            continue
        for name in SEMANTICS_FIELDS:
            assert name in row["action_semantics"], f"{row['id']} semantics lacks {name}"
        assert row["action_space"] == row["action_semantics"]["space"]
        assert row["action_semantics"]["pass_raw"] is True


def test_pi05_row_has_the_peer_values(gateway):
    row = rows_by_id(gateway)[PI05]
    assert row["endpoint"] == "act" and row["robot"] == "droid_franka"
    assert row["camera_views"] == ["exterior_1", "wrist_left"]
    assert (row["state_dim"], row["state_layout"]) == (8, {"joint_positions": 7, "gripper": 1})
    assert (row["action_dim"], row["action_space"], row["control_hz"]) == (8, "joint_delta", 15.0)
    assert (row["action_horizon"], row["open_loop_horizon"]) == (15, 8)
    assert row["sustains_seconds"] == pytest.approx(0.533, abs=1e-3)
    assert row["training_frame_size"] == [320, 180]
    assert row["input_aspect_ratio"] == 1.7778 and row["input_resize"] == "pad"
    semantics = row["action_semantics"]
    assert semantics["native_target"].startswith("droid.robot_env.RobotEnv(")
    assert semantics["value_range"] == [-1.0, 1.0]
    assert semantics["exceptions"] == [{"dim": 7, "meaning": "gripper_binary", "threshold": 0.5}]
    conversion = semantics["conversions"]["joint_position"]
    assert conversion["reference"] == "state_at_request"
    assert conversion["formula"] == "q_target[i] = q_reference + step[i][:7]"
    assert conversion["verified_in"]
    assert set(row["training"]) >= {"trainable", "why", "billing_fps", "usd_per_data_hour",
                                    "minimum_usd"}


def test_cosmos3_row_has_the_peer_values(gateway):
    row = rows_by_id(gateway)[COSMOS3]
    assert row["camera_views"] == ["exterior_1", "exterior_2", "wrist_left"]
    assert (row["state_dim"], row["action_dim"], row["action_space"]) == (8, 8, "joint_absolute")
    assert row["control_hz"] == 15.0
    assert row["action_horizon"] / row["control_hz"] == pytest.approx(2.13, abs=0.01)
    semantics = row["action_semantics"]
    assert semantics["value_range"] is None and semantics["exceptions"] == []
    assert "joint_position" not in semantics["conversions"]


def test_simulated_rows_exercise_other_shapes(gateway):
    rows = rows_by_id(gateway)
    bimanual, stateless = rows[BIMANUAL], rows[STATELESS]
    assert bimanual["state_dim"] == 14 and bimanual["action_dim"] == 14
    assert sum(bimanual["state_layout"].values()) == 14
    assert bimanual["action_horizon"] / bimanual["control_hz"] == pytest.approx(0.50)
    assert stateless["state_dim"] == 0
    assert stateless["action_horizon"] / stateless["control_hz"] == pytest.approx(0.64)


def test_ee_absolute_row_declares_a_pose_state_and_the_fourth_space(gateway):
    row = rows_by_id(gateway)[EE_ABSOLUTE]
    assert (row["state_dim"], row["state_layout"]) == (7, {"end_effector_pose": 6, "gripper": 1})
    assert (row["action_dim"], row["action_space"], row["control_hz"]) == (7, "ee_absolute", 20.0)
    assert row["action_horizon"] == 10 and row["camera_views"] == ["front"]
    assert row["action_semantics"]["exceptions"] == [
        {"dim": 6, "meaning": "gripper_binary", "threshold": 0.5}
    ]
    assert "simulated" in row["tags"] and "0.02 m" in row["description"]
    assert row["latency"]["gpu_ms_p50"] == 45.0


@pytest.mark.parametrize(("endpoint", "count"), [("act", 7), ("chat", 1), ("perceive", 0)])
def test_catalogue_filters_by_endpoint(gateway, endpoint, count):
    with client(gateway, key=None) as c:
        response = c.get("/v1/models", params={"endpoint": endpoint})
    assert response.status_code == 200
    assert len(response.json()["data"]) == count


def test_unknown_endpoint_filter_is_a_422_naming_the_choices(gateway):
    with client(gateway, key=None) as c:
        response = c.get("/v1/models", params={"endpoint": "dance"})
    assert response.status_code == 422
    assert "act" in str(response.json()["detail"])


def test_catalogue_also_answers_with_a_key(gateway):
    assert len(rows_by_id(gateway)) == 8
    with client(gateway) as c:
        assert c.get("/v1/models").status_code == 200


@pytest.mark.parametrize("path", ["/v1/nothing", "/", "/v1/embed", "/v2/act"])
def test_unknown_path_is_a_json_404(gateway, path):
    with client(gateway) as c:
        response = c.get(path)
    assert response.status_code == 404
    assert isinstance(response.json()["detail"], str)


def test_openapi_document_lists_the_public_paths(gateway):
    with client(gateway, key=None) as c:
        response = c.get("/openapi.json")
    assert response.status_code == 200
    paths = response.json()["paths"]
    assert {"/v1/health", "/v1/models", "/v1/act/ready", "/v1/act", "/v1/chat", "/v1/train",
            "/v1/train/{job_id}"} <= set(paths)
    assert not any(p.startswith("/_control") for p in paths)
