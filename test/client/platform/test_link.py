"""A deployment driven over the protocol against a small stand-in platform: connect, observe +
act in msgpack with the worker's own secret, recovery (stale lease, busy, dead worker), labels,
typed errors and the certificate pin."""

from __future__ import annotations

import ssl
from typing import Iterator

import pytest

from sequence_ai._platform.link import DeploymentLink
from sequence_ai._transport.deadline import Exchange
from sequence_ai._transport.transport import Transport
from sequence_ai.errors import InvalidRequest, PinMismatch, RateLimited

from .fake_platform import ACTIONS, Platform, serve

INPUTS = {"instruction": "pick", "joint_positions": [0.0] * 7, "image": b"\xff\xd8"}


@pytest.fixture
def platform() -> Iterator[Platform]:
    yield from serve()


@pytest.fixture
def link(platform: Platform) -> Iterator[DeploymentLink]:
    transport = Transport(base_url=platform.control_url, api_key="seq_live_test", timeout_s=5.0)
    made = DeploymentLink(transport, "my-pi05")
    yield made
    made.close()
    transport.close()


def _outputs(link: DeploymentLink) -> object:
    outputs, _ = link.infer(INPUTS, exchange=Exchange())
    return outputs


def test_observe_then_act_with_the_workers_secret(platform: Platform, link: DeploymentLink) -> None:
    outputs, deployment = link.infer(INPUTS, exchange=Exchange())
    assert outputs == {"actions": ACTIONS}
    assert (deployment.hz, deployment.valid_len, deployment.replan_at) == (15.0, 15, 8)
    paths = [path for path, _, _ in platform.seen]
    assert paths == ["/v1/act/connect", "/observe", "/act"]
    _, connect_headers, connect_body = platform.seen[0]
    assert connect_headers["Authorization"] == "Bearer seq_live_test"
    assert connect_body == {"model": "my-pi05", "session": link.session, "standby": True,
                            "switched": False}
    _, headers, observed = platform.seen[1]
    assert headers["Authorization"] == "Bearer direct-1"  # never the account key
    assert headers["Content-Type"] == "application/x-seq-msgpack"
    assert headers["X-Seq-Session"] == link.session and headers["X-Seq-Request-Id"]
    assert observed["frames"] == [{"seq": 0, "inputs": INPUTS}]  # bytes kept as bytes
    assert platform.seen[2][2] == {"episode_id": observed["episode_id"], "seq": 0}


def test_stale_lease_connects_again(platform: Platform, link: DeploymentLink) -> None:
    _outputs(link)
    platform.secret, platform.epoch = "direct-2", 2  # rotated: the old secret gets a 401
    assert _outputs(link) == {"actions": ACTIONS}
    assert platform.connects == 2 and link.deployment is not None
    assert link.deployment.seat.lease.epoch == 2


def test_busy_is_waited_out_within_retry_after(platform: Platform, link: DeploymentLink) -> None:
    platform.refuse("/act", 429, "busy", retry_after_s=0.05)
    assert _outputs(link) == {"actions": ACTIONS}
    assert [p for p, _, _ in platform.seen].count("/act") == 2


def test_busy_past_the_call_time_raises_typed(platform: Platform, link: DeploymentLink) -> None:
    platform.refuse("/act", 429, "busy", retry_after_s=30.0)
    with pytest.raises(RateLimited) as caught:
        link.infer(INPUTS, exchange=Exchange(), timeout=1.0)
    assert caught.value.code == "busy" and caught.value.request_id == "rq-fake"


def test_unreachable_worker_connects_again(platform: Platform, link: DeploymentLink) -> None:
    _outputs(link)
    platform.refuse("/act", 503, "unavailable", details={"reason": "draining"})
    assert _outputs(link) == {"actions": ACTIONS}
    assert link.failovers == 1 and platform.connects == 2
    assert platform.seen[-3][2] == {"model": "my-pi05", "session": link.session,
                                    "standby": True, "switched": False}


def test_unknown_deployment_is_a_typed_refusal(platform: Platform, link: DeploymentLink) -> None:
    platform.refuse("/v1/act/connect", 404, "not_found", hint="seq deploy my-pi05")
    with pytest.raises(InvalidRequest) as caught:
        _outputs(link)
    assert (caught.value.code, caught.value.hint) == ("not_found", "seq deploy my-pi05")


def test_label_names_the_ended_episode(platform: Platform, link: DeploymentLink) -> None:
    _outputs(link)
    episode = link.end_episode()
    assert link.label(True, "clean grasp") == episode
    path, _, body = platform.seen[-1]
    assert path == f"/v1/deployments/my-pi05/episodes/{episode}/label"
    assert body == {"success": True, "notes": "clean grasp"}
    assert ("/act/episode_end", {"episode_id": episode}) in [(p, b) for p, _, b in platform.seen]


def test_an_aborted_call_stops_waiting(platform: Platform, link: DeploymentLink) -> None:
    platform.refuse("/act", 429, "busy", retry_after_s=3.0)
    exchange = Exchange()
    exchange.abort()
    with pytest.raises(Exception):  # noqa: B017 (ended before any answer: any typed error)
        link.infer(INPUTS, exchange=exchange, timeout=5.0)
    assert "/act" not in [p for p, _, _ in platform.seen]


def test_worker_with_another_certificate_is_refused() -> None:
    trustme = pytest.importorskip("trustme")
    cert = trustme.CA().issue_cert("127.0.0.1")
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    cert.configure_cert(context)
    der = ssl.PEM_cert_to_DER_cert(cert.cert_chain_pems[0].bytes().decode())
    for platform in serve((context, der)):
        transport = Transport(base_url=platform.control_url, api_key="k", timeout_s=5.0)
        link = DeploymentLink(transport, "my-pi05")
        try:
            assert _outputs(link) == {"actions": ACTIONS}  # the right pin works
            platform.fingerprint = "ab" * 32
            platform.secret = "direct-2"  # forces a new connect handing out the wrong pin
            with pytest.raises(PinMismatch):
                _outputs(link)
        finally:
            link.close()
            transport.close()
