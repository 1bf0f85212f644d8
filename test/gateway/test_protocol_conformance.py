"""Conformance of the local gateway to PROTOCOL.md §1, written from the spec alone.

Everything here talks plain HTTP through httpx, the way an independent client built only from
the spec would: no helpers from the gateway package and no knowledge of its internals beyond the
``gateway`` / ``gateway_factory`` fixtures that start it.
"""

from __future__ import annotations

import base64
import functools
import io
import math
import time
from typing import Any, Dict, Iterator, List, Optional

import httpx
import pytest

pytest.importorskip("fastapi")
Image = pytest.importorskip("PIL.Image")

PREFIX = "accounts/sequences/models/"
PI05 = PREFIX + "pi05-droid"
COSMOS3 = PREFIX + "cosmos3-edge-policy-droid"
PROBE_MODEL = PREFIX + "__doctor_probe__"
# §1.3, byte for byte: the free auth/credit probe of CLI doctor.
DOCTOR_PROBE = (
    '{"model":"accounts/sequences/models/__doctor_probe__","observation":{"images":'
    '[{"view":"exterior_1","data":"Zm9v"}],"proprioception":{"joint_positions":[0.0]},'
    '"instruction":"doctor probe"}}'
)
NO_KEY = None
UNKNOWN_KEY = "seq_live_not_a_key_this_gateway_knows"
SIZE_LIMIT = 2 * 1024 * 1024


# -- helpers ---------------------------------------------------------------------------------


@pytest.fixture
def http(gateway) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=gateway.url, timeout=30.0, trust_env=False) as c:
        yield c


def auth(key: Optional[str]) -> Dict[str, str]:
    headers = {"Content-Type": "application/json"}
    if key is not None:
        headers["Authorization"] = f"Bearer {key}"
    return headers


@functools.cache
def picture(width: int, height: int, fmt: str = "JPEG") -> str:
    image = Image.new("RGB", (width, height), (30, 90, 160))
    buffer = io.BytesIO()
    image.save(buffer, fmt)
    return base64.b64encode(buffer.getvalue()).decode("ascii")


def frame_16_9() -> str:
    return picture(320, 180)


def catalogue(http: httpx.Client, endpoint: Optional[str] = None) -> List[Dict[str, Any]]:
    path = "/v1/models" + (f"?endpoint={endpoint}" if endpoint else "")
    response = http.get(path)
    assert response.status_code == 200, response.text
    return response.json()["data"]


def row_of(http: httpx.Client, model_id: str) -> Dict[str, Any]:
    rows = [r for r in catalogue(http) if r["id"] == model_id]
    assert len(rows) == 1, f"{model_id} appears {len(rows)} times in /v1/models"
    return rows[0]


def observation_for(row: Dict[str, Any], *, views: Optional[List[str]] = None,
                    joints: Optional[List[float]] = None, gripper: Any = "fit",
                    nulls: bool = True) -> Dict[str, Any]:
    """An observation that fits ``row`` exactly, nested optionals sent as explicit nulls."""
    layout = row.get("state_layout")
    if joints is None:
        # With a layout, each half has its share (0 when not named); without one, all joints.
        width = layout.get("joint_positions", 0) if layout else row.get("state_dim") or 0
        joints = [0.1] * width
    layout = layout or {}
    # A pose inside the simulated arm's workspace, where the layout declares one.
    pose = [0.4, 0.0, 0.4, 3.1, 0.0, 0.0][: layout.get("end_effector_pose", 0)] or None
    if gripper == "fit":
        gripper = [0.0] * layout["gripper"] if layout.get("gripper") else None
    images = []
    for view in row["camera_views"] if views is None else views:
        image: Dict[str, Any] = {"view": view, "data": frame_for(row)}
        if nulls:
            image["timestamp_ms"] = None
        images.append(image)
    proprioception: Dict[str, Any] = {"joint_positions": joints}
    if nulls or gripper is not None:
        proprioception["gripper"] = gripper
    if nulls or pose is not None:
        proprioception["end_effector_pose"] = pose
    if nulls:
        proprioception["joint_velocities"] = None
    return {"images": images, "proprioception": proprioception,
            "instruction": "put the red cup in the sink"}


def frame_for(row: Dict[str, Any]) -> str:
    size = row.get("training_frame_size")
    if size:
        return picture(int(size[0]), int(size[1]))
    ratio = row.get("input_aspect_ratio")
    if ratio:
        return picture(round(180 * ratio), 180)
    return frame_16_9()


def act(http: httpx.Client, body: Any, key: Optional[str]) -> httpx.Response:
    if isinstance(body, (bytes, str)):
        return http.post("/v1/act", content=body, headers=auth(key))
    return http.post("/v1/act", json=body, headers=auth(key))


def detail_of(response: httpx.Response) -> Any:
    assert response.headers["content-type"].startswith("application/json"), response.text
    body = response.json()
    assert isinstance(body, dict) and set(body) == {"detail"}, body
    assert body["detail"], body
    return body["detail"]


def is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


# -- §1.2 endpoint inventory ------------------------------------------------------------------


def test_health_is_auth_free_and_names_backend_and_auth(http):
    response = http.get("/v1/health")
    assert response.status_code == 200
    body = response.json()
    assert isinstance(body["backend"], str) and isinstance(body["auth"], str)


def test_catalogue_answers_a_plain_request_without_any_header(gateway):
    # §1.6: "a plain curl with no header returns 200".
    response = httpx.get(gateway.url + "/v1/models", trust_env=False)
    assert response.status_code == 200
    assert isinstance(response.json()["data"], list) and response.json()["data"]


@pytest.mark.parametrize("key", ["valid", "unknown", "broke"])
def test_catalogue_and_health_ignore_whatever_key_is_sent(http, gateway, key):
    # "key sent if present": the catalogue stays public even when the key is bad.
    keys = {"unknown": UNKNOWN_KEY, "broke": gateway.broke_key, "valid": gateway.api_key}
    response = http.get("/v1/models", headers=auth(keys[key]))
    assert response.status_code == 200
    assert [r["id"] for r in response.json()["data"]] == [r["id"] for r in catalogue(http)]
    assert http.get("/v1/health", headers=auth(keys[key])).status_code == 200


@pytest.mark.parametrize("endpoint", ["act", "chat", "perceive"])
def test_catalogue_endpoint_filter_keeps_only_that_endpoint(http, endpoint):
    everything = catalogue(http)
    filtered = catalogue(http, endpoint)
    assert all(r["endpoint"] == endpoint for r in filtered)
    assert [r["id"] for r in filtered] == [r["id"] for r in everything
                                           if r["endpoint"] == endpoint]


def test_catalogue_tolerates_the_internal_flag_and_keeps_public_rows(http):
    # §1.2 mentions a server-side include_internal=true flag; a gateway without it ignores it.
    response = http.get("/v1/models?include_internal=true")
    assert response.status_code == 200
    ids = [r["id"] for r in response.json()["data"]]
    assert set(r["id"] for r in catalogue(http)) <= set(ids)


def test_get_requests_carrying_the_clients_headers_are_served(http, gateway):
    # §1.1: the client sends Content-Type: application/json on every request, GETs included.
    headers = {**auth(gateway.api_key), "User-Agent": "sequence-ai-python/dev"}
    for path in ("/v1/health", "/v1/models", "/v1/models?endpoint=act",
                 "/v1/act/ready?model=" + PI05):
        assert http.get(path, headers=headers).status_code == 200, path


def test_ready_takes_the_full_id_unencoded_in_the_query(http, gateway):
    # §1.2: the query string is concatenated without URL-encoding; slashes stay literal.
    for path in ("/v1/act/ready?model=" + PI05,
                 "/v1/act/ready?model=" + PI05.replace("/", "%2F")):
        response = http.get(path, headers=auth(gateway.api_key))
        assert response.status_code == 200, (path, response.text)
        assert response.json()["ready"] is True


def test_ready_for_an_unknown_model_is_404(http, gateway):
    response = http.get("/v1/act/ready?model=" + PREFIX + "no-such-model",
                        headers=auth(gateway.api_key))
    assert response.status_code == 404
    detail_of(response)


@pytest.mark.parametrize("method, path", [("GET", "/v1/act"), ("POST", "/v1/models"),
                                          ("POST", "/v1/health"), ("POST", "/v1/act/ready")])
def test_a_wrong_method_is_a_client_error_with_a_detail(http, gateway, method, path):
    response = http.request(method, path, headers=auth(gateway.api_key))
    assert 400 <= response.status_code < 500
    detail_of(response)


def test_unknown_path_is_404_with_a_json_detail(http):
    response = http.get("/v1/no-such-endpoint")
    assert response.status_code == 404
    detail_of(response)


# -- §1.3 request body, auth and the doctor probe ------------------------------------------


@pytest.mark.parametrize("key, status", [("none", 401), ("unknown", 401), ("broke", 402),
                                         ("valid", 404)])
def test_doctor_probe_reads_auth_then_credit_then_model(http, gateway, key, status):
    keys = {"none": NO_KEY, "unknown": UNKNOWN_KEY, "broke": gateway.broke_key,
            "valid": gateway.api_key}
    response = act(http, DOCTOR_PROBE, keys[key])
    assert response.status_code == status, response.text
    detail_of(response)


@pytest.mark.parametrize("header", ["", "Bearer", "Basic {key}", "{key}",
                                    "Token {key}", "Bearer None"])
def test_authorization_other_than_bearer_with_a_known_key_is_401(http, gateway, header):
    headers = {"Content-Type": "application/json",
               "Authorization": header.format(key=gateway.api_key)}
    response = http.post("/v1/act", content=DOCTOR_PROBE, headers=headers)
    assert response.status_code == 401, (header, response.text)
    detail_of(response)


MALFORMED = {
    "not json": b"{not json",
    "empty body": b"",
    "json array": b"[]",
    "no model": {"observation": {"images": [], "proprioception": {"joint_positions": []},
                                 "instruction": "x"}},
    "no observation": {"model": PROBE_MODEL},
    "no instruction": {"model": PROBE_MODEL, "observation": {
        "images": [{"view": "exterior_1", "data": "Zm9v"}],
        "proprioception": {"joint_positions": [0.0]}}},
    "no proprioception": {"model": PROBE_MODEL, "observation": {
        "images": [{"view": "exterior_1", "data": "Zm9v"}], "instruction": "x"}},
    "no joint_positions": {"model": PROBE_MODEL, "observation": {
        "images": [{"view": "exterior_1", "data": "Zm9v"}], "proprioception": {},
        "instruction": "x"}},
    "no images": {"model": PROBE_MODEL, "observation": {
        "proprioception": {"joint_positions": [0.0]}, "instruction": "x"}},
    "image without view": {"model": PROBE_MODEL, "observation": {
        "images": [{"data": "Zm9v"}], "proprioception": {"joint_positions": [0.0]},
        "instruction": "x"}},
    "image without data": {"model": PROBE_MODEL, "observation": {
        "images": [{"view": "exterior_1"}], "proprioception": {"joint_positions": [0.0]},
        "instruction": "x"}},
    "images not a list": {"model": PROBE_MODEL, "observation": {
        "images": {"exterior_1": "Zm9v"}, "proprioception": {"joint_positions": [0.0]},
        "instruction": "x"}},
    "joints not numbers": {"model": PROBE_MODEL, "observation": {
        "images": [{"view": "exterior_1", "data": "Zm9v"}],
        "proprioception": {"joint_positions": ["a"]}, "instruction": "x"}},
    "scalar gripper": {"model": PROBE_MODEL, "observation": {
        "images": [{"view": "exterior_1", "data": "Zm9v"}],
        "proprioception": {"joint_positions": [0.0], "gripper": 0.5}, "instruction": "x"}},
    "instruction not text": {"model": PROBE_MODEL, "observation": {
        "images": [{"view": "exterior_1", "data": "Zm9v"}],
        "proprioception": {"joint_positions": [0.0]}, "instruction": ["x"]}},
    "model not text": {"model": 7, "observation": {
        "images": [{"view": "exterior_1", "data": "Zm9v"}],
        "proprioception": {"joint_positions": [0.0]}, "instruction": "x"}},
}


@pytest.mark.parametrize("key", ["none", "unknown", "broke", "valid"])
@pytest.mark.parametrize("case", sorted(MALFORMED))
def test_a_malformed_body_is_422_whatever_the_key(http, gateway, case, key):
    keys = {"none": NO_KEY, "unknown": UNKNOWN_KEY, "broke": gateway.broke_key,
            "valid": gateway.api_key}
    response = act(http, MALFORMED[case], keys[key])
    assert response.status_code == 422, (case, key, response.text)
    detail_of(response)


def test_scalar_gripper_is_422_for_a_served_model_too(http, gateway):
    body = {"model": PI05, "observation": observation_for(row_of(http, PI05))}
    body["observation"]["proprioception"]["gripper"] = 1.0
    response = act(http, body, gateway.api_key)
    assert response.status_code == 422, response.text
    detail_of(response)


@pytest.mark.parametrize("key, status", [("none", 401), ("broke", 402), ("valid", 404)])
def test_explicit_nulls_in_the_probe_are_schema_valid(http, gateway, key, status):
    keys = {"none": NO_KEY, "broke": gateway.broke_key, "valid": gateway.api_key}
    body = {"model": PROBE_MODEL, "observation": {
        "images": [{"view": "exterior_1", "data": "Zm9v", "timestamp_ms": None}],
        "proprioception": {"joint_positions": [0.0], "joint_velocities": None,
                           "end_effector_pose": None, "gripper": None},
        "instruction": "doctor probe"}}
    assert act(http, body, keys[key]).status_code == status


def test_a_two_value_gripper_list_is_schema_valid(http, gateway):
    body = {"model": PROBE_MODEL, "observation": {
        "images": [{"view": "exterior_1", "data": "Zm9v"}],
        "proprioception": {"joint_positions": [0.0], "gripper": [0.0, 1.0]},
        "instruction": "doctor probe"}}
    assert act(http, body, gateway.api_key).status_code == 404


def test_explicit_null_and_absent_optionals_are_treated_alike(http, gateway):
    row = row_of(http, PI05)
    answers = []
    for nulls in (True, False):
        # Without a gripper the 7+1 layout is zero-filled: both forms must say so alike.
        body = {"model": PI05, "seed": 3,
                "observation": observation_for(row, gripper=None, nulls=nulls)}
        if nulls:
            assert body["observation"]["proprioception"]["gripper"] is None
        else:
            assert "gripper" not in body["observation"]["proprioception"]
        response = act(http, body, gateway.api_key)
        assert response.status_code == 200, response.text
        answers.append(response.json())
    with_nulls, absent = answers
    assert with_nulls["warnings"] == absent["warnings"] and with_nulls["warnings"]
    assert with_nulls["action_chunk"]["steps"] == absent["action_chunk"]["steps"]


def test_top_level_pass_through_options_are_accepted(http, gateway):
    body = {"model": PI05, "observation": observation_for(row_of(http, PI05)), "seed": 7,
            "action_horizon": 15, "robot": "droid_franka", "return_world_prediction": False}
    response = act(http, body, gateway.api_key)
    assert response.status_code == 200, response.text


# -- §1.4 the 200 body ------------------------------------------------------------------------


def check_chunk_body(body: Dict[str, Any], model_id: str, row: Dict[str, Any]) -> None:
    assert isinstance(body["id"], str) and body["id"]
    assert body["model"] == model_id
    chunk = body["action_chunk"]
    assert isinstance(chunk["robot"], str) and chunk["robot"]
    assert isinstance(chunk["action_space"], str) and chunk["action_space"]
    assert is_int(chunk["action_dim"]) and chunk["action_dim"] > 0
    hz = chunk["control_frequency_hz"]
    assert is_number(hz) and hz > 0
    steps = chunk["steps"]
    assert isinstance(steps, list) and steps
    for position, step in enumerate(steps):
        assert set(step) == {"index", "values"}, step
        assert is_int(step["index"]) and step["index"] == position
        assert len(step["values"]) == chunk["action_dim"]
        assert all(is_number(v) and math.isfinite(v) for v in step["values"])
    assert is_number(chunk["covers_seconds"])
    assert chunk["covers_seconds"] == pytest.approx(len(steps) / hz, abs=1e-3)
    horizon = chunk.get("open_loop_horizon")
    sustains = chunk.get("sustains_seconds")
    if horizon is None:
        assert sustains is None or sustains == pytest.approx(len(steps) / hz, abs=1e-3)
    else:
        assert is_int(horizon) and 0 < horizon <= len(steps)
        assert is_number(sustains) and sustains == pytest.approx(horizon / hz, abs=1e-3)
    assert chunk["action_space"] == row["action_space"]
    assert chunk["action_dim"] == row["action_dim"]
    assert hz == pytest.approx(row["control_hz"])
    perf = body["perf"]
    assert is_number(perf["inference_ms"]) and is_number(perf["ttfa_ms"])
    usage = body["usage"]
    for name in ("observation_tokens", "action_tokens", "total_tokens", "frames_received",
                 "frames_used"):
        assert is_int(usage[name]) and usage[name] >= 0, name
    assert isinstance(body["warnings"], list)
    assert all(isinstance(w, str) for w in body["warnings"])


def test_every_act_model_answers_a_fitting_observation_with_a_section_1_4_body(http, gateway):
    rows = catalogue(http, "act")
    assert rows
    for row in rows:
        body = {"model": row["id"], "observation": observation_for(row)}
        response = act(http, body, gateway.api_key)
        assert response.status_code == 200, (row["id"], response.text)
        check_chunk_body(response.json(), row["id"], row)
        warnings = response.json()["warnings"]
        if "vision" in row["tags"]:  # a looking model says why it holds: no cup in these frames
            assert warnings and all("holding in place" in w for w in warnings), row["id"]
        else:
            assert warnings == [], row["id"]


def test_pi05_chunk_matches_section_1_11(http, gateway):
    row = row_of(http, PI05)
    response = act(http, {"model": PI05, "observation": observation_for(row)}, gateway.api_key)
    assert response.status_code == 200, response.text
    chunk = response.json()["action_chunk"]
    assert chunk["action_space"] == "joint_delta" and chunk["action_dim"] == 8
    assert chunk["control_frequency_hz"] == 15.0 and len(chunk["steps"]) == 15
    assert chunk["covers_seconds"] == pytest.approx(1.0, abs=1e-3)
    assert chunk["open_loop_horizon"] == 8
    assert chunk["sustains_seconds"] == pytest.approx(0.533, abs=1e-3)
    assert response.json()["usage"]["frames_received"] == 2


def test_cosmos3_chunk_matches_section_1_11(http, gateway):
    row = row_of(http, COSMOS3)
    response = act(http, {"model": COSMOS3, "observation": observation_for(row)},
                   gateway.api_key)
    assert response.status_code == 200, response.text
    chunk = response.json()["action_chunk"]
    assert chunk["action_space"] == "joint_absolute" and chunk["action_dim"] == 8
    assert chunk["control_frequency_hz"] == 15.0
    assert chunk["covers_seconds"] == pytest.approx(2.13, abs=0.05)
    assert chunk.get("open_loop_horizon") is None


def test_a_png_frame_is_accepted(http, gateway):
    row = row_of(http, PI05)
    observation = observation_for(row)
    for image in observation["images"]:
        image["data"] = picture(320, 180, "PNG")
    response = act(http, {"model": PI05, "observation": observation}, gateway.api_key)
    assert response.status_code == 200, response.text


# -- §1.5 readiness ---------------------------------------------------------------------------


def test_ready_body_on_a_warm_model(http, gateway):
    response = http.get("/v1/act/ready?model=" + PI05, headers=auth(gateway.api_key))
    assert response.status_code == 200
    body = response.json()
    assert set(body) == {"ready", "eta_s"}
    assert body["ready"] is True
    assert body["eta_s"] is None or is_number(body["eta_s"])


def test_eta_is_the_full_load_time_not_a_countdown(gateway_factory):
    gateway = gateway_factory(cold_start_s=600.0)
    with httpx.Client(base_url=gateway.url, trust_env=False, timeout=30.0) as http:
        polls = [http.get("/v1/act/ready?model=" + PI05, headers=auth(gateway.api_key)).json()
                 for _ in range(3)]
        # An act in between does not turn the figure into a remaining time either.
        act(http, {"model": PI05, "observation": observation_for(row_of(http, PI05))},
            gateway.api_key)
        polls.append(http.get("/v1/act/ready?model=" + PI05,
                              headers=auth(gateway.api_key)).json())
    assert all(p["ready"] is False for p in polls)
    assert all(is_number(p["eta_s"]) for p in polls)
    assert polls[0]["eta_s"] == pytest.approx(600.0, rel=0.01)
    assert len({p["eta_s"] for p in polls}) == 1, polls


def test_polling_a_cold_model_warms_it(gateway_factory):
    gateway = gateway_factory(cold_start_s=0.2)
    with httpx.Client(base_url=gateway.url, trust_env=False, timeout=30.0) as http:
        first = http.get("/v1/act/ready?model=" + PI05, headers=auth(gateway.api_key)).json()
        assert first["ready"] is False
        ready = wait_for_ready(http, gateway.api_key, PI05, deadline_s=60.0)
    assert ready is True


def wait_for_ready(http: httpx.Client, key: str, model_id: str, *, deadline_s: float) -> bool:
    # A condition with a generous deadline, polled the way a client waits for warm-up.
    end = time.monotonic() + deadline_s
    while time.monotonic() < end:
        body = http.get("/v1/act/ready?model=" + model_id, headers=auth(key)).json()
        if body["ready"]:
            return True
        time.sleep(0.05)
    return False


# -- §1.6 / §1.11 catalogue -------------------------------------------------------------------

ROW_FIELDS = ("id", "endpoint", "architecture", "robot", "action_dim", "state_dim",
              "state_layout", "action_horizon", "control_hz", "camera_views",
              "training_frame_size", "input_aspect_ratio", "input_resize", "action_space",
              "action_semantics", "training")
SEMANTICS_KEYS = {"space", "pass_raw", "native_target", "value_range", "exceptions",
                  "conversions"}


def test_every_row_carries_every_section_1_6_field_with_its_type(http):
    response = http.get("/v1/models")
    assert set(response.json()) >= {"data"}
    for row in response.json()["data"]:
        name = row.get("id")
        assert set(ROW_FIELDS) <= set(row), (name, set(ROW_FIELDS) - set(row))
        assert isinstance(name, str) and name.startswith(PREFIX) and len(name) > len(PREFIX)
        assert row["endpoint"] in ("act", "chat", "perceive")
        assert isinstance(row["architecture"], str)
        assert row["robot"] is None or isinstance(row["robot"], str)
        for field in ("action_dim", "state_dim", "action_horizon"):
            assert row[field] is None or is_int(row[field]), (name, field)
        assert row["control_hz"] is None or is_number(row["control_hz"])
        assert isinstance(row["camera_views"], list)
        assert all(isinstance(v, str) for v in row["camera_views"])
        layout = row["state_layout"]
        if layout is not None:
            assert all(is_int(v) for v in layout.values())
            assert set(layout) <= {"joint_positions", "joint_velocities", "end_effector_pose",
                                   "gripper"}, layout
            if row["state_dim"] is not None:
                assert sum(layout.values()) == row["state_dim"], name
        size = row["training_frame_size"]
        assert size is None or (len(size) == 2 and all(is_int(v) for v in size))
        assert row["input_aspect_ratio"] is None or is_number(row["input_aspect_ratio"])
        assert row["input_resize"] in (None, "pad", "stretch")
        check_semantics(row)
        check_training(row["training"], name)


def check_semantics(row: Dict[str, Any]) -> None:
    semantics = row["action_semantics"]
    if semantics is None:
        return
    assert set(semantics) >= SEMANTICS_KEYS, (row["id"], semantics)
    assert semantics["space"] == row["action_space"]
    assert isinstance(semantics["pass_raw"], bool)
    assert semantics["native_target"] is None or isinstance(semantics["native_target"], str)
    value_range = semantics["value_range"]
    assert value_range is None or (len(value_range) == 2 and value_range[0] < value_range[1])
    assert isinstance(semantics["exceptions"], list)
    for exception in semantics["exceptions"]:
        assert is_int(exception["dim"]) and isinstance(exception["meaning"], str)
        if exception["meaning"] == "gripper_binary":
            assert is_number(exception["threshold"])
    assert isinstance(semantics["conversions"], dict)
    for conversion in semantics["conversions"].values():
        assert set(conversion) >= {"reference", "formula", "verified_in"}


def check_training(training: Any, name: str) -> None:
    if training is None:
        return
    assert isinstance(training["trainable"], bool), name
    assert isinstance(training["why"], str), name
    for field in ("billing_fps", "usd_per_data_hour", "minimum_usd"):
        assert is_number(training[field]), (name, field)


def test_pi05_row_has_the_section_1_11_values(http):
    row = row_of(http, PI05)
    assert row["endpoint"] == "act"
    assert row["robot"] == "droid_franka"
    assert row["camera_views"] == ["exterior_1", "wrist_left"]
    assert row["state_dim"] == 8 and row["state_layout"] == {"joint_positions": 7, "gripper": 1}
    assert row["action_dim"] == 8 and row["action_space"] == "joint_delta"
    assert row["control_hz"] == 15.0 and row["action_horizon"] == 15
    assert row["open_loop_horizon"] == 8
    assert row["training_frame_size"] == [320, 180]
    assert row["input_aspect_ratio"] == pytest.approx(1.7778, abs=1e-4)
    assert row["input_resize"] == "pad"
    semantics = row["action_semantics"]
    assert semantics["space"] == "joint_delta" and semantics["pass_raw"] is True
    assert semantics["native_target"] == (
        "droid.robot_env.RobotEnv(action_space='joint_velocity', gripper_action_space='position')"
    )
    assert semantics["value_range"] == [-1.0, 1.0]
    assert semantics["exceptions"] == [{"dim": 7, "meaning": "gripper_binary", "threshold": 0.5}]
    conversion = semantics["conversions"]["joint_position"]
    assert conversion["reference"] == "state_at_request"
    assert conversion["formula"] == "q_target[i] = q_reference + step[i][:7]"
    assert conversion["verified_in"] == "isaac-lab droid scene, 2026-09-11"


def test_cosmos3_row_has_the_section_1_11_values(http):
    row = row_of(http, COSMOS3)
    assert row["endpoint"] == "act"
    assert isinstance(row["robot"], str) and row["robot"]
    assert row["camera_views"] == ["exterior_1", "exterior_2", "wrist_left"]
    assert row["state_dim"] == 8 and row["state_layout"] == {"joint_positions": 7, "gripper": 1}
    assert row["action_dim"] == 8 and row["action_space"] == "joint_absolute"
    assert row["control_hz"] == 15.0
    assert row["action_horizon"] / row["control_hz"] == pytest.approx(2.13, abs=0.05)
    assert row.get("open_loop_horizon") is None
    assert row["input_resize"] == "stretch"
    semantics = row["action_semantics"]
    assert semantics["space"] == "joint_absolute" and semantics["pass_raw"] is True
    assert semantics["native_target"] is None
    assert semantics["value_range"] is None
    assert semantics["exceptions"] == []
    assert "joint_position" not in semantics["conversions"]


# -- §1.9 errors and warming ------------------------------------------------------------------


def test_unknown_model_is_404_with_a_detail(http, gateway):
    body = {"model": PREFIX + "no-such-model",
            "observation": observation_for(row_of(http, PI05))}
    response = act(http, body, gateway.api_key)
    assert response.status_code == 404
    detail_of(response)


def test_act_on_a_cold_model_is_a_warming_503_with_retry_after(gateway_factory):
    gateway = gateway_factory(cold_start_s=600.0)
    with httpx.Client(base_url=gateway.url, trust_env=False, timeout=30.0) as http:
        body = {"model": PI05, "observation": observation_for(row_of(http, PI05))}
        responses = [act(http, body, gateway.api_key) for _ in range(2)]
    for response in responses:
        assert response.status_code == 503, response.text
        detail = detail_of(response)
        assert set(detail) >= {"status", "retry_after_s", "warming_job_id", "message"}
        assert detail["status"] == "warming_up"
        assert is_int(detail["retry_after_s"]) and 0 < detail["retry_after_s"] <= 600
        assert isinstance(detail["warming_job_id"], str) and detail["warming_job_id"]
        assert isinstance(detail["message"], str) and detail["message"]
        header = response.headers["Retry-After"]
        assert header.isdigit() and int(header) == detail["retry_after_s"]


def test_a_warming_fault_answers_the_same_shape(http, gateway):
    gateway.inject("warming", seconds=300.0)
    body = {"model": PI05, "observation": observation_for(row_of(http, PI05))}
    response = act(http, body, gateway.api_key)
    assert response.status_code == 503
    detail = detail_of(response)
    assert detail["status"] == "warming_up" and is_int(detail["retry_after_s"])
    assert int(response.headers["Retry-After"]) == detail["retry_after_s"]


@pytest.mark.parametrize("status", [500, 503, 504, 401, 402])
def test_injected_errors_have_the_fastapi_error_shape(http, gateway, status):
    gateway.inject("status", status=status)
    body = {"model": PI05, "observation": observation_for(row_of(http, PI05))}
    response = act(http, body, gateway.api_key)
    assert response.status_code == status
    detail = detail_of(response)
    if status == 503:
        # A plain 503 must not read as warming: the client stops rather than waits.
        assert not (isinstance(detail, dict) and detail.get("status") == "warming_up")


def test_a_body_over_2_mb_is_413(http, gateway):
    body = {"model": PI05, "observation": observation_for(row_of(http, PI05))}
    body["observation"]["images"][0]["data"] = "A" * (SIZE_LIMIT + 200_000)
    response = act(http, body, gateway.api_key)
    assert response.status_code == 413, response.text[:300]
    detail_of(response)


def test_a_streamed_body_over_2_mb_is_413(http, gateway):
    # No Content-Length: the limit holds for a chunked upload as well.
    payload = DOCTOR_PROBE.replace("Zm9v", "A" * (SIZE_LIMIT + 200_000)).encode()

    def pieces() -> Iterator[bytes]:
        for start in range(0, len(payload), 65536):
            yield payload[start:start + 65536]

    response = http.post("/v1/act", content=pieces(), headers=auth(gateway.api_key))
    assert response.status_code == 413, response.text[:300]
    detail_of(response)


def test_a_body_under_2_mb_is_not_refused_for_size(http, gateway):
    body = {"model": PI05, "observation": observation_for(row_of(http, PI05))}
    body["observation"]["images"].append({"view": "spare", "data": "A" * 1_800_000})
    response = act(http, body, gateway.api_key)
    assert response.status_code != 413


# -- §1.10 observation handling ---------------------------------------------------------------


def test_a_missing_view_is_400_naming_missing_and_sent_views(http, gateway):
    row = row_of(http, COSMOS3)
    body = {"model": COSMOS3, "observation": observation_for(row, views=["exterior_1"])}
    response = act(http, body, gateway.api_key)
    assert response.status_code == 400
    detail = detail_of(response)
    assert isinstance(detail, str)
    assert "missing view(s)" in detail
    missing, _, sent = detail.partition("you sent")
    assert "exterior_2" in missing and "wrist_left" in missing
    assert "exterior_1" in sent


def test_no_images_at_all_is_400_naming_every_declared_view(http, gateway):
    row = row_of(http, PI05)
    body = {"model": PI05, "observation": observation_for(row, views=[])}
    response = act(http, body, gateway.api_key)
    assert response.status_code == 400
    detail = detail_of(response)
    assert "exterior_1" in detail and "wrist_left" in detail


def test_observation_checks_come_after_auth_and_credit(http, gateway):
    body = {"model": PI05, "observation": observation_for(row_of(http, PI05), views=[])}
    assert act(http, body, NO_KEY).status_code == 401
    assert act(http, body, gateway.broke_key).status_code == 402


def test_an_extra_view_is_accepted_and_counted(http, gateway):
    row = row_of(http, PI05)
    observation = observation_for(row)
    observation["images"].append({"view": "overhead_cam", "data": frame_16_9(),
                                  "timestamp_ms": None})
    response = act(http, {"model": PI05, "observation": observation}, gateway.api_key)
    assert response.status_code == 200, response.text
    usage = response.json()["usage"]
    assert usage["frames_received"] == 3 and usage["frames_used"] == 3


@pytest.mark.parametrize("size, status", [
    ((320, 180), 200), ((848, 480), 200),  # §7: 848x480 passes against 16:9
    ((224, 121), 200), ((224, 131), 200),  # the edges of the ±5 px band at a 224 square
    ((224, 119), 400), ((224, 133), 400),
    ((640, 480), 400), ((240, 240), 400), ((180, 320), 400),
])
def test_the_aspect_band_is_5_px_at_a_224_square(http, gateway, size, status):
    # §1.10: content extent within ±5 px of the trained extent (16:9 → 126 rows, 121-131).
    observation = observation_for(row_of(http, PI05))
    observation["images"][0]["data"] = picture(*size)
    response = act(http, {"model": PI05, "observation": observation}, gateway.api_key)
    assert response.status_code == status, (size, response.text)
    if status == 400:
        detail_of(response)


def test_a_frame_that_is_not_an_image_is_a_client_error(http, gateway):
    observation = observation_for(row_of(http, PI05))
    observation["images"][0]["data"] = "Zm9v"
    response = act(http, {"model": PI05, "observation": observation}, gateway.api_key)
    assert 400 <= response.status_code < 500
    detail_of(response)


@pytest.mark.parametrize("joints, gripper", [
    ([0.1] * 8, None),          # §1.10's example: joint 8 dropped, gripper zero-filled
    ([0.1] * 6, [0.0]),         # joints padded
    ([0.1] * 7, [0.0, 1.0]),    # gripper truncated
    ([0.1] * 9, [0.0, 0.0, 1.0]),
])
def test_a_state_width_mismatch_is_accepted_with_a_warning(http, gateway, joints, gripper):
    observation = observation_for(row_of(http, PI05), joints=joints, gripper=gripper)
    response = act(http, {"model": PI05, "observation": observation}, gateway.api_key)
    assert response.status_code == 200, response.text
    warnings = response.json()["warnings"]
    assert warnings and all(isinstance(w, str) for w in warnings)


def test_joint_positions_may_be_empty_for_a_stateless_model(http, gateway):
    rows = [r for r in catalogue(http, "act") if r["state_dim"] == 0]
    for row in rows:
        observation = observation_for(row, joints=[], gripper=None)
        response = act(http, {"model": row["id"], "observation": observation}, gateway.api_key)
        assert response.status_code == 200, response.text
        assert response.json()["warnings"] == []
