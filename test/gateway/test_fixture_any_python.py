"""The fixture with nothing but the stdlib and httpx: passes in the 3.9 client venv too, where
the gateway runs as a subprocess of ``$SEQUENCE_AI_GATEWAY_PYTHON``."""

from __future__ import annotations

import base64
import struct
import zlib

import httpx
import pytest

# Starts processes or ROS nodes: `-m "not slow"` leaves it out.
pytestmark = pytest.mark.slow


def png(width: int, height: int) -> str:
    """A real RGB PNG built with the stdlib, so no Pillow is needed here."""
    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(
            ">I", zlib.crc32(kind + data) & 0xFFFFFFFF)

    raw = b"".join(b"\x00" + b"\x40\x80\xc0" * width for _ in range(height))
    header = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    blob = (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IDAT", zlib.compress(raw))
            + chunk(b"IEND", b""))
    return base64.b64encode(blob).decode("ascii")


def body() -> dict:
    frame = png(64, 36)
    return {
        "model": "accounts/sequences/models/pi05-droid",
        "observation": {
            "images": [{"view": "exterior_1", "data": frame, "timestamp_ms": None},
                       {"view": "wrist_left", "data": frame, "timestamp_ms": None}],
            "proprioception": {"joint_positions": [0.0] * 7, "gripper": [0.0],
                               "joint_velocities": None, "end_effector_pose": None},
            "instruction": "wave",
        },
    }


def test_gateway_fixture_serves_faults_and_counts(gateway):
    headers = {"Authorization": f"Bearer {gateway.api_key}"}
    with httpx.Client(base_url=gateway.url, headers=headers, trust_env=False) as c:
        assert len(c.get("/v1/models").json()["data"]) == 8
        assert c.post("/v1/act", json=body()).status_code == 200
        gateway.inject("status", status=503)
        faulted = c.post("/v1/act", json=body())
        assert faulted.status_code == 503 and isinstance(faulted.json()["detail"], str)
        gateway.inject("warming", seconds=300)
        warming = c.post("/v1/act", json=body())
        assert warming.json()["detail"]["status"] == "warming_up"
        assert "retry-after" in warming.headers
    counters = gateway.counters()
    assert counters["requests"]["act"] == 3 and counters["connections"] == 1


def test_gateway_factory_kill_and_restart(gateway_factory):
    handle = gateway_factory(cold_start_s=30)
    headers = {"Authorization": f"Bearer {handle.broke_key}"}
    assert httpx.post(handle.url + "/v1/act", json=body(), headers=headers,
                      trust_env=False).status_code == 402
    handle.kill()
    handle.restart()
    ready = httpx.get(handle.url + "/v1/act/ready", params={"model": "pi05-droid"},
                      headers={"Authorization": f"Bearer {handle.api_key}"}, trust_env=False)
    assert ready.json() == {"ready": False, "eta_s": 30.0}
