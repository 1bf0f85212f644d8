"""The gateway's platform over the wire: the control plane's typed errors, the worker's guard,
msgpack in and out, and each fault as a robot meets it."""

from __future__ import annotations

import hashlib
import ssl
import uuid
from typing import Any, Dict, Iterator, Optional, Tuple

import httpx
import numpy as np
import pytest
from support.gateway_fixture import run_gateway

# The platform validates its wire with sequence-base (pip-only; absent from the Humble floors venv).
msgpack_io = pytest.importorskip("sequence_base.msgpack_io")

from sequence_ai_gateway.platform.keys import default_robot_key  # noqa: E402

MSGPACK = "application/x-seq-msgpack"


@pytest.fixture(scope="module")
def platform_gateway() -> Iterator[Any]:
    with run_gateway(platform=True, subprocess=False) as handle:
        yield handle


@pytest.fixture
def gw(platform_gateway: Any) -> Iterator[Any]:
    yield platform_gateway
    platform_gateway.clear_faults()


def _control(gw: Any, path: str, body: Dict[str, Any], key: Optional[str] = None) -> httpx.Response:
    headers = {"Authorization": f"Bearer {key or gw.platform_key}"}
    return httpx.post(f"{gw.url}{path}", json=body, headers=headers, trust_env=False)


def _connect(gw: Any, model: str = "my-pi05", session: Optional[str] = None,
             key: Optional[str] = None) -> httpx.Response:
    return _control(gw, "/v1/act/connect",
                    {"model": model, "session": session or uuid.uuid4().hex}, key)


def _worker(answer: Dict[str, Any], secret: Optional[str] = None) -> httpx.Client:
    # The test reads the certificate's fingerprint itself (test_connect_hands_out_...);
    # here it talks to the worker without a CA.
    return httpx.Client(base_url=answer["worker_url"], verify=False, trust_env=False,
                        headers={"Authorization": f"Bearer {secret or answer['direct_secret']}"})


def _inputs() -> Dict[str, Any]:
    image = np.zeros((180, 320, 3), np.uint8)
    return {"exterior_1": image, "wrist_left": image, "joint_positions": np.zeros(7, np.float32),
            "gripper_position": np.zeros(1, np.float32), "instruction": "pick up the cup"}


def _observe_and_act(worker: httpx.Client, episode: str = "e1") -> httpx.Response:
    body = msgpack_io.pack({"episode_id": episode, "frames": [{"seq": 0, "inputs": _inputs()}],
                            "skipped": []})
    posted = worker.post("/observe", content=body, headers={"Content-Type": MSGPACK})
    assert posted.status_code == 200 and posted.json() == {"through": 0}
    return worker.post("/act", json={"model": "my-pi05", "episode_id": episode, "seq": 1,
                                     "call": "act"}, headers={"Accept": MSGPACK})


def _error(response: httpx.Response) -> Tuple[int, str, Dict[str, Any]]:
    body = response.json()
    assert set(body) == {"detail", "code", "retryable", "retry_after_s", "request_id", "hint",
                         "details"}
    return response.status_code, body["code"], body


def test_control_plane_refusals_are_typed_with_the_codes_table(gw: Any) -> None:
    status, code, body = _error(_connect(gw, "my-nothing"))
    assert (status, code, body["retryable"]) == (404, "not_found", False)
    assert body["details"] == {"resource": "deployment", "name": "my-nothing"}
    assert body["request_id"].startswith("r-")
    assert _error(_connect(gw, key="seq_live_unknown"))[:2] == (401, "unauthenticated")
    robot = default_robot_key("my-pi05")
    assert _connect(gw, "my-pi05", key=robot).status_code == 200
    assert _error(_connect(gw, "my-echo", key=robot))[:2] == (403, "forbidden")
    status, code, body = _error(_control(gw, "/v1/deployments/my-pi05/episodes/e1/label",
                                         {"success": "yes"}))
    assert (status, code) == (400, "invalid_request") and "success" in body["detail"]


def test_connect_hands_out_the_workers_pinned_fingerprint_and_a_lease(gw: Any) -> None:
    answer = _connect(gw).json()
    assert (answer["hz"], answer["action_chunk_valid_len"], answer["action_chunk_replan_at"]) \
        == (15.0, 15, 8)
    assert answer["lease"]["ttl_s"] > 0 and answer["keepalive"]["every_s"] > 0
    host, port = answer["worker_url"].removeprefix("https://").rsplit(":", 1)
    pem = ssl.get_server_certificate((host, int(port)))
    assert hashlib.sha256(ssl.PEM_cert_to_DER_cert(pem)).hexdigest() == answer["cert_fingerprint"]


def test_the_worker_answers_msgpack_arrays_and_refuses_the_account_key(gw: Any) -> None:
    answer = _connect(gw).json()
    with _worker(answer) as worker:
        assert "x-seq-call/1" in worker.get("/ping").headers["X-Seq-Act-Formats"]
        acted = _observe_and_act(worker)
        assert acted.status_code == 200 and acted.headers["content-type"] == MSGPACK
        actions = msgpack_io.unpack(acted.content)["outputs"]["actions"]
        assert actions.dtype == np.float32 and actions.shape == (15, 8)
        assert worker.post("/act/episode_end", json={"episode_id": "e1"}).json() == {"ended": True}
    with _worker(answer, gw.platform_key) as worker:
        assert _error(worker.post("/act", json={"episode_id": "e1"}))[:2] \
            == (401, "unauthenticated")


def test_an_act_before_its_observations_arrive_is_a_conflict_naming_the_first_missing(
    gw: Any,
) -> None:
    from sequence_ai_gateway.platform import worker as worker_module

    answer = _connect(gw).json()
    waited, worker_module.FRAMES_WAIT_S = worker_module.FRAMES_WAIT_S, 0.0
    try:
        with _worker(answer) as worker:
            status, code, body = _error(worker.post(
                "/act", json={"episode_id": "e2", "seq": 3, "call": "act"}))
    finally:
        worker_module.FRAMES_WAIT_S = waited
    assert (status, code, body["details"]) == (409, "conflict",
                                               {"reason": "frames_missing", "from": 0})


def test_a_rotated_secret_or_an_expired_lease_is_refused_until_the_robot_connects_again(
    gw: Any,
) -> None:
    session = uuid.uuid4().hex
    for fault in ("rotate", "expire"):
        before = _connect(gw, session=session).json()
        gw.inject_platform(fault)
        with _worker(before) as worker:
            assert _error(worker.post("/act", json={"episode_id": "e"}))[:2] \
                == (401, "unauthenticated")
        after = _connect(gw, session=session).json()
        assert after["lease"]["epoch"] > before["lease"]["epoch"]
        with _worker(after) as worker:
            assert _observe_and_act(worker).status_code == 200


def test_busy_warming_drain_and_death_are_each_met_as_the_platform_says(gw: Any) -> None:
    answer = _connect(gw).json()
    gw.inject_platform("busy", retry_after_s=2.0)
    with _worker(answer) as worker:
        busy = worker.post("/act", json={"episode_id": "e"})
    status, code, body = _error(busy)
    assert (status, code, body["retryable"]) == (429, "busy", True)
    assert busy.headers["Retry-After"] == "2"

    gw.inject_platform("warming", seconds=30.0)
    status, code, body = _error(_connect(gw))
    assert (status, code) == (503, "warming") and 0 < body["retry_after_s"] <= 30.0
    ready = httpx.get(f"{gw.url}/v1/act/ready", params={"model": "my-pi05"}, trust_env=False,
                      headers={"Authorization": f"Bearer {gw.platform_key}"}).json()
    assert ready["ready"] is False and ready["eta_s"] > 0
    gw.clear_faults()

    gw.inject_platform("drain")
    with _worker(answer) as worker:
        status, code, body = _error(worker.post("/act", json={"episode_id": "e"}))
    assert (status, code, body["details"]["reason"]) == (503, "unavailable", "draining")
    moved = _connect(gw).json()
    assert moved["worker_url"] != answer["worker_url"]

    gw.inject_platform("die")
    with _worker(moved) as worker, pytest.raises(httpx.TransportError):
        worker.post("/act", json={"episode_id": "e"})
    reborn = _connect(gw).json()
    assert reborn["worker_url"] != moved["worker_url"]
    assert reborn["cert_fingerprint"] != moved["cert_fingerprint"]
    with _worker(reborn) as worker:
        assert _observe_and_act(worker).status_code == 200
