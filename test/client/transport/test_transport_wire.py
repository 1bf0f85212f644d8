"""What the client puts on the wire (PROTOCOL §1.1, §1.3, §1.8): request lines and headers.

A loopback listener records each request's bytes and hangs up without answering, so nothing here
fakes a response: every call ends in ``Unavailable`` and the test reads what was sent.
"""

from __future__ import annotations

import json
import queue
import re
import socket
import threading
from typing import Dict, Iterator, List, Optional, Tuple

import pytest

import sequence_ai
from sequence_ai._model.catalogue import models
from sequence_ai._transport.transport import Transport, query_path
from sequence_ai.errors import Unavailable
from sequence_ai.types import ImageFrame, Observation, Proprioception

PI05 = "accounts/sequences/models/pi05-droid"
KEY = "seq_test_wire_key"
WAIT_S = 30.0


class Request:
    def __init__(self, raw: bytes) -> None:
        head, _, self.body = raw.partition(b"\r\n\r\n")
        lines = head.decode("latin-1").split("\r\n")
        self.method, self.target, _ = lines[0].split(" ", 2)
        self.headers: List[Tuple[str, str]] = []
        for line in lines[1:]:
            name, _, value = line.partition(":")
            self.headers.append((name.strip().lower(), value.strip()))

    def all(self, name: str) -> List[str]:
        return [v for k, v in self.headers if k == name]

    def one(self, name: str) -> str:
        values = self.all(name)
        assert len(values) == 1, (name, self.headers)
        return values[0]


class Recorder:
    """Accepts connections on loopback, records one request per connection, then closes it."""

    def __init__(self) -> None:
        self._sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self._sock.bind(("127.0.0.1", 0))
        self._sock.listen(8)
        self.url = f"http://127.0.0.1:{self._sock.getsockname()[1]}"
        self._seen: queue.Queue[Request] = queue.Queue()
        self._stopping = threading.Event()
        self._thread = threading.Thread(target=self._serve, daemon=True)
        self._thread.start()

    def _serve(self) -> None:
        while True:
            try:
                conn, _ = self._sock.accept()
            except OSError:
                return
            if self._stopping.is_set():
                conn.close()
                return
            with conn:
                conn.settimeout(WAIT_S)
                try:
                    self._seen.put(Request(_read_request(conn)))
                except (OSError, ValueError):
                    continue

    def next(self) -> Request:
        return self._seen.get(timeout=WAIT_S)

    def close(self) -> None:
        # Closing a listening socket does not wake a thread blocked in accept(); a connection does.
        self._stopping.set()
        with socket.create_connection(self._sock.getsockname(), timeout=WAIT_S):
            pass
        self._thread.join(WAIT_S)
        self._sock.close()


def _read_request(conn: socket.socket) -> bytes:
    data = b""
    while b"\r\n\r\n" not in data:
        piece = conn.recv(65536)
        if not piece:
            raise ValueError("connection closed before the headers ended")
        data += piece
    head, _, body = data.partition(b"\r\n\r\n")
    match = re.search(rb"(?im)^content-length:\s*(\d+)", head)
    length = int(match.group(1)) if match else 0
    while len(body) < length:
        piece = conn.recv(65536)
        if not piece:
            break
        body += piece
    return head + b"\r\n\r\n" + body


@pytest.fixture
def recorder() -> Iterator[Recorder]:
    rec = Recorder()
    yield rec
    rec.close()


def sent(rec: Recorder, call) -> Request:  # type: ignore[no-untyped-def]
    with pytest.raises(Unavailable):
        call()
    return rec.next()


def user_agent_ok(value: str) -> bool:
    return re.fullmatch(r"sequence-ai-python/(dev|\d+(\.\d+)*\S*)", value) is not None


def test_every_request_carries_bearer_content_type_and_user_agent(recorder, no_env):
    with Transport(base_url=recorder.url, api_key=KEY, timeout_s=WAIT_S) as t:
        requests = [
            sent(recorder, lambda: t.get("/v1/health")),
            sent(recorder, lambda: t.get("/v1/models", params={"endpoint": "act"})),
            sent(recorder, lambda: t.get("/v1/act/ready", params={"model": PI05})),
            sent(recorder, lambda: t.post("/v1/act", {"model": PI05})),
        ]
    for request in requests:
        assert request.one("authorization") == f"Bearer {KEY}"
        assert request.one("content-type") == "application/json"
        assert user_agent_ok(request.one("user-agent")), request.one("user-agent")
    assert [(r.method, r.target) for r in requests] == [
        ("GET", "/v1/health"),
        ("GET", "/v1/models?endpoint=act"),
        ("GET", "/v1/act/ready?model=" + PI05),
        ("POST", "/v1/act"),
    ]
    assert json.loads(requests[3].body) == {"model": PI05}


def test_without_a_key_no_authorization_header_is_sent(recorder, no_env):
    request = sent(recorder, lambda: models(base_url=recorder.url))
    assert request.all("authorization") == []
    assert request.one("content-type") == "application/json"
    assert (request.method, request.target) == ("GET", "/v1/models")


def test_a_key_from_the_environment_is_sent_with_the_catalogue_call(recorder, monkeypatch):
    monkeypatch.delenv("SEQUENCES_BASE_URL", raising=False)
    monkeypatch.setenv("SEQUENCES_API_KEY", KEY)
    request = sent(recorder, lambda: models("act", base_url=recorder.url))
    assert request.one("authorization") == f"Bearer {KEY}"
    assert request.target == "/v1/models?endpoint=act"


@pytest.mark.parametrize("model, expected", [
    ("pi05-droid", PI05),
    (PI05, PI05),
    ("accounts/lab/models/reach-v2", "accounts/lab/models/reach-v2"),
])
def test_ready_sends_the_full_id_with_literal_slashes(recorder, no_env, model, expected):
    with sequence_ai.connect(model, api_key=KEY, base_url=recorder.url + "/") as policy:
        request = sent(recorder, policy.ready)
    assert request.method == "GET"
    assert request.target == "/v1/act/ready?model=" + expected
    assert request.one("authorization") == f"Bearer {KEY}"


def test_act_body_names_the_full_model_and_sends_nested_nulls(recorder, no_env):
    observation = Observation(
        images=[ImageFrame("exterior_1", "Zm9v"), ImageFrame("wrist_left", "YmFy")],
        proprioception=Proprioception([0.0] * 7),
        instruction="put the cup in the sink",
    )
    with sequence_ai.connect("pi05-droid", api_key=KEY, base_url=recorder.url, validate="off",
                             startup_timeout_s=0) as policy:
        request = sent(recorder, lambda: policy.predict(observation, seed=7, robot=None))
    body = json.loads(request.body)
    assert body["model"] == PI05 and body["seed"] == 7
    assert "robot" not in body  # options whose value is None are dropped
    assert [i["view"] for i in body["observation"]["images"]] == ["exterior_1", "wrist_left"]
    assert all(i["timestamp_ms"] is None for i in body["observation"]["images"])
    assert body["observation"]["proprioception"] == {
        "joint_positions": [0.0] * 7, "joint_velocities": None, "end_effector_pose": None,
        "gripper": None,
    }
    assert request.one("content-type") == "application/json"


@pytest.mark.parametrize("argument, env, path", [
    ("{url}", None, "/v1/health"),
    ("{url}/", None, "/v1/health"),
    ("{url}//", None, "/v1/health"),
    ("{url}/lab/", None, "/lab/v1/health"),
    (None, "{url}/", "/v1/health"),
    ("{url}/arg", "{url}/env", "/arg/v1/health"),
])
def test_base_url_comes_from_the_argument_then_the_environment_without_trailing_slash(
    recorder, monkeypatch, argument: Optional[str], env: Optional[str], path: str
):
    monkeypatch.delenv("SEQUENCES_API_KEY", raising=False)
    if env is None:
        monkeypatch.delenv("SEQUENCES_BASE_URL", raising=False)
    else:
        monkeypatch.setenv("SEQUENCES_BASE_URL", env.format(url=recorder.url))
    base = None if argument is None else argument.format(url=recorder.url)
    with Transport(base_url=base, require_key=False, timeout_s=WAIT_S) as t:
        assert not t.base_url.endswith("/")
        request = sent(recorder, lambda: t.get("/v1/health"))
    assert request.target == path


def test_query_path_leaves_slashes_and_escapes_what_would_break_the_query():
    params: Dict[str, str] = {"model": PI05}
    assert query_path("/v1/act/ready", params) == "/v1/act/ready?model=" + PI05
    assert query_path("/v1/models", None) == "/v1/models"
    assert query_path("/v1/x", {"model": "a b&c#d"}) == "/v1/x?model=a%20b%26c%23d"
