"""POST /v1/act: the 200 body of §1.4 and the observation handling of §1.9-1.10."""

from __future__ import annotations

import json

import pytest

pytest.importorskip("fastapi")

from support.gateway_support import (  # noqa: E402
    ALL_MODELS,
    BIMANUAL,
    COSMOS3,
    DROID_ABSOLUTE_REACH,
    DROID_REACH,
    EE_ABSOLUTE,
    PI05,
    READY_POSE,
    STATELESS,
    act_body,
    client,
    frame,
    steps_of,
)

EXPECTED_SHAPE = {  # model: (steps, action_dim, hz, open_loop_horizon)
    PI05: (15, 8, 15.0, 8),
    COSMOS3: (32, 8, 15.0, None),
    DROID_REACH: (15, 8, 15.0, 8),
    DROID_ABSOLUTE_REACH: (32, 8, 15.0, None),
    BIMANUAL: (25, 14, 50.0, None),
    STATELESS: (16, 7, 25.0, None),
    EE_ABSOLUTE: (10, 7, 20.0, None),
}


@pytest.mark.parametrize("model", ALL_MODELS)
def test_response_has_the_shape_of_section_1_4(gateway, model):
    with client(gateway) as c:
        response = c.post("/v1/act", json=act_body(model))
    assert response.status_code == 200, response.text
    body = response.json()
    n, width, hz, horizon = EXPECTED_SHAPE[model]
    assert isinstance(body["id"], str) and body["id"]
    assert body["model"] == model
    chunk = body["action_chunk"]
    assert [s["index"] for s in chunk["steps"]] == list(range(n))
    assert all(len(s["values"]) == width for s in chunk["steps"])
    assert all(isinstance(v, float) for s in chunk["steps"] for v in s["values"])
    assert chunk["action_dim"] == width and chunk["control_frequency_hz"] == hz
    assert isinstance(chunk["robot"], str) and chunk["robot"]
    assert chunk["covers_seconds"] == pytest.approx(n / hz, abs=1e-3)
    assert chunk["open_loop_horizon"] == horizon
    expected_sustain = (horizon or n) / hz
    assert chunk["sustains_seconds"] == pytest.approx(expected_sustain, abs=1e-3)
    assert set(body["perf"]) >= {"inference_ms", "queue_ms", "ttfa_ms"}
    assert set(body["usage"]) == {"observation_tokens", "action_tokens", "total_tokens",
                                  "frames_received", "frames_used"}
    assert body["usage"]["action_tokens"] == n * width
    assert isinstance(body["warnings"], list)


def test_pi05_chunk_reports_the_joint_delta_space(gateway):
    with client(gateway) as c:
        chunk = c.post("/v1/act", json=act_body(PI05)).json()["action_chunk"]
    assert (chunk["robot"], chunk["action_space"]) == ("droid_franka", "joint_delta")
    assert chunk["sustains_seconds"] == pytest.approx(0.533, abs=1e-3)


def test_same_observation_and_seed_give_the_same_steps(gateway):
    with client(gateway) as c:
        first = steps_of(c.post("/v1/act", json=act_body(seed=3)))
        again = steps_of(c.post("/v1/act", json=act_body(seed=3)))
        other_seed = steps_of(c.post("/v1/act", json=act_body(seed=4)))
        other_task = steps_of(c.post("/v1/act", json=act_body(seed=3, instruction="open drawer")))
    assert first == again
    assert first != other_seed
    assert first != other_task


def test_explicit_null_and_absent_optionals_are_the_same(gateway):
    with client(gateway) as c:
        with_nulls = c.post("/v1/act", json=act_body(nulls=True, gripper=None))
        absent = c.post("/v1/act", json=act_body(nulls=False, gripper=None))
    assert with_nulls.status_code == absent.status_code == 200
    assert steps_of(with_nulls) == steps_of(absent)
    assert with_nulls.json()["warnings"] == absent.json()["warnings"]


def test_pass_through_options_are_accepted(gateway):
    body = act_body(action_horizon=15, robot="droid_franka", return_world_prediction=False)
    with client(gateway) as c:
        assert c.post("/v1/act", json=body).status_code == 200


def test_missing_view_is_a_400_naming_missing_and_sent_views(gateway):
    with client(gateway) as c:
        response = c.post("/v1/act", json=act_body(PI05, views=["exterior_1", "wrist_right"]))
    assert response.status_code == 400
    detail = response.json()["detail"]
    assert "missing view(s): wrist_left" in detail
    assert "you sent: exterior_1, wrist_right" in detail


def test_extra_views_are_accepted_counted_and_ignored(gateway):
    plain = act_body(PI05)
    extra = act_body(PI05, views=["exterior_1", "wrist_left", "exterior_2"])
    with client(gateway) as c:
        base = c.post("/v1/act", json=plain)
        response = c.post("/v1/act", json=extra)
    assert response.status_code == 200
    assert steps_of(response) == steps_of(base)
    usage = response.json()["usage"]
    assert usage["frames_received"] == usage["frames_used"] == 3
    assert any("exterior_2" in w for w in response.json()["warnings"])


@pytest.mark.parametrize("data", ["not base64!!", "Zm9v", frame(320, 180)[:200] + "=="])
def test_frame_that_does_not_decode_is_a_400(gateway, data):
    with client(gateway) as c:
        response = c.post("/v1/act", json=act_body(PI05, image=data))
    assert response.status_code == 400
    assert "observation.images[view='exterior_1'].data" in response.json()["detail"]


@pytest.mark.parametrize(("size", "status"), [
    ((640, 480), 400),   # 4:3 against a 16:9 model
    ((180, 320), 400),   # portrait
    ((848, 480), 200),   # 0.6 % off 16:9, inside the ±5 px band
    ((1280, 720), 200),  # right ratio, another resolution
])
def test_aspect_ratio_is_checked_against_the_trained_ratio(gateway, size, status):
    with client(gateway) as c:
        response = c.post("/v1/act", json=act_body(PI05, image=frame(*size)))
    assert response.status_code == status, response.text
    if status == 400:
        assert "aspect ratio" in response.json()["detail"]


def test_png_frames_are_accepted(gateway):
    with client(gateway) as c:
        response = c.post("/v1/act", json=act_body(PI05, image=frame(320, 180, "PNG")))
    assert response.status_code == 200


def test_state_width_mismatch_is_padded_and_truncated_with_warnings(gateway):
    eight_joints = [0.0, -0.5, 0.0, -2.0, 0.0, 1.6, 0.8, 0.3]
    with client(gateway) as c:
        fitted = c.post("/v1/act", json=act_body(DROID_REACH, joints=eight_joints, gripper=None))
        explicit = c.post(
            "/v1/act", json=act_body(DROID_REACH, joints=eight_joints[:7], gripper=[0.0])
        )
    assert fitted.status_code == 200
    warnings = fitted.json()["warnings"]
    assert any("joint_positions has 8" in w and "truncated to 7" in w for w in warnings)
    assert any("gripper is absent" in w and "zero-filled" in w for w in warnings)
    # Joint 8 dropped and the gripper zero-filled is exactly the explicit 7 + [0.0] observation.
    assert steps_of(fitted) == steps_of(explicit)
    assert explicit.json()["warnings"] == []


def test_short_state_is_zero_padded(gateway):
    with client(gateway) as c:
        response = c.post("/v1/act", json=act_body(PI05, joints=[0.1, 0.2], gripper=[0.0, 1.0]))
    assert response.status_code == 200
    warnings = response.json()["warnings"]
    assert any("joint_positions has 2" in w and "zero-filled to 7" in w for w in warnings)
    assert any("gripper has 2" in w and "truncated to 1" in w for w in warnings)


def test_stateless_model_takes_empty_joints_and_ignores_sent_ones(gateway):
    with client(gateway) as c:
        empty = c.post("/v1/act", json=act_body(STATELESS, joints=[], gripper=None))
        sent = c.post("/v1/act", json=act_body(STATELESS, joints=[0.3] * 7, gripper=[1.0]))
    assert empty.status_code == sent.status_code == 200
    assert empty.json()["warnings"] == []
    assert any("state_dim 0" in w for w in sent.json()["warnings"])


def test_stateless_model_steers_with_a_six_value_pose_and_says_when_it_cannot(gateway):
    with client(gateway) as c:
        blind = c.post("/v1/act", json=act_body(STATELESS))
        steered = c.post("/v1/act", json=act_body(STATELESS, end_effector_pose=READY_POSE))
        short = c.post("/v1/act", json=act_body(STATELESS, end_effector_pose=READY_POSE[:5]))
    assert blind.status_code == steered.status_code == short.status_code == 200
    assert steered.json()["warnings"] == []
    assert steps_of(steered) != steps_of(blind)
    assert all(-1.0 <= v <= 1.0 for row in steps_of(steered) for v in row[:6])
    # Five values are no pose: the rows are the blind ones, and a warning says so.
    assert steps_of(short) == steps_of(blind)
    assert any("5 state value(s) not used" in w for w in short.json()["warnings"])


def test_ee_absolute_pose_and_gripper_are_fitted_to_the_state_layout(gateway):
    with client(gateway) as c:
        exact = c.post("/v1/act", json=act_body(EE_ABSOLUTE))
        absent = c.post("/v1/act", json=act_body(EE_ABSOLUTE, end_effector_pose=None))
        long = c.post("/v1/act", json=act_body(
            EE_ABSOLUTE, end_effector_pose=READY_POSE + [9.0], joints=[0.1] * 7, gripper=None
        ))
    assert exact.status_code == absent.status_code == long.status_code == 200
    assert exact.json()["warnings"] == []
    first = steps_of(exact)[0]
    assert sum((a - b) ** 2 for a, b in zip(first[:3], READY_POSE[:3])) ** 0.5 <= 0.02 + 1e-9
    assert any(
        "end_effector_pose is absent" in w and "zero-filled to 6" in w
        for w in absent.json()["warnings"]
    )
    warnings = long.json()["warnings"]
    assert any("end_effector_pose has 7" in w and "truncated to 6" in w for w in warnings)
    assert any("joint_positions has 7" in w and "truncated to 0" in w for w in warnings)
    assert any("gripper is absent" in w for w in warnings)
    # The seventh pose value and the joints dropped, the gripper zero-filled: the exact request.
    assert steps_of(long) == steps_of(exact)


def test_non_finite_pose_is_a_422(gateway):
    body = json.dumps(act_body(EE_ABSOLUTE)).replace("3.14159", "1e999")
    with client(gateway) as c:
        response = c.post("/v1/act", content=body)
    assert response.status_code == 422, response.text
    assert "end_effector_pose" in response.text


def test_body_over_two_megabytes_is_a_413(gateway):
    body = act_body(PI05, image="A" * (2 * 1024 * 1024))
    with client(gateway) as c:
        response = c.post("/v1/act", json=body)
    assert response.status_code == 413
    assert "limit" in response.json()["detail"]


def test_body_over_two_megabytes_without_content_length_is_a_413(gateway):
    payload = json.dumps(act_body(PI05, image="A" * (2 * 1024 * 1024))).encode()

    def chunks():
        for i in range(0, len(payload), 65536):
            yield payload[i:i + 65536]

    with client(gateway) as c:
        response = c.post("/v1/act", content=chunks())
    assert response.status_code == 413


def test_body_sent_as_form_type_is_still_read_as_json(gateway):
    # curl -d sends application/x-www-form-urlencoded unless told otherwise.
    with client(gateway) as c:
        response = c.post("/v1/act", content=json.dumps(act_body()).encode(),
                          headers={"Content-Type": "application/x-www-form-urlencoded"})
    assert response.status_code == 200
