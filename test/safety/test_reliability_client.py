"""Reliability round 3, client side: decoded bodies stay within a few MB of the cap, stacked
codings are refused, a key a header cannot carry is refused without being named, escaped forms
of the key are scrubbed, an interrupted run closes the request it abandons, and an instruction
of invisible characters is empty. The matrix cells (endless headers, interim responses, stacked
codings, a wrong model, a huge integer) are in test_fault_matrix_client.py."""

from __future__ import annotations

import threading
import tracemalloc
from collections.abc import Iterator
from typing import Any

import pytest
from support.gateway_fixture import run_gateway
from support.policy_support import PI05, Robot, make_observation, open_policy
from support.safety_support import PATIENCE_S, new_threads
from support.waiting import wait_for

import sequence_ai
from sequence_ai import InvalidResponse
from sequence_ai._model.catalogue import Model
from sequence_ai._requests.fetch import THREAD_NAME
from sequence_ai._transport.transport import MAX_BODY_BYTES, Transport, encode_json

# "Within a few MB of the cap": the decoded pieces kept, plus one piece being decoded.
PEAK_SLACK_BYTES = 4 << 20
BOMB_BYTES = 256 << 20


@pytest.fixture(scope="module")
def own_gateway() -> Iterator[Any]:
    # Its own process: the memory measured is the client's alone.
    with run_gateway(subprocess=True) as gw:
        yield gw


def _act_body() -> bytes:
    return encode_json({"model": PI05, "observation": make_observation().to_wire()})


@pytest.mark.slow
@pytest.mark.parametrize("layers", [1, 3])
def test_a_compressed_bomb_never_decodes_far_past_the_cap(own_gateway: Any, layers: int) -> None:
    own_gateway.inject("stacked_encoding", fields={"layers": layers, "decoded_bytes": BOMB_BYTES})
    with Transport(base_url=own_gateway.url, api_key=own_gateway.api_key) as transport:
        tracemalloc.start()
        try:
            with pytest.raises(InvalidResponse) as raised:
                transport.post("/v1/act", _act_body())
            _, peak = tracemalloc.get_traced_memory()
        finally:
            tracemalloc.stop()
    assert peak < MAX_BODY_BYTES + PEAK_SLACK_BYTES, peak
    if layers == 1:
        assert f"at most {MAX_BODY_BYTES} bytes" in str(raised.value)
    else:
        assert "'gzip, gzip, gzip'" in str(raised.value) and "stacked" in str(raised.value)


@pytest.mark.parametrize("key", [
    "seq_live_first\nseq_live_second", "seq_live_cr\rseq_live_tail", "seq_live_nul\0tail_part",
    "seq_live spaced_part",
])
def test_a_key_a_header_cannot_carry_is_refused_without_being_named(key: str) -> None:
    with pytest.raises(ValueError) as raised:
        sequence_ai.connect(PI05, api_key=key, base_url="http://127.0.0.1:9")
    message = str(raised.value)
    assert "API key has" in message and "position" in message
    for part in key.replace("\0", "\n").replace("\r", "\n").replace(" ", "\n").split("\n"):
        assert part not in message


def test_the_scrubber_catches_the_key_escaped_and_in_repr() -> None:
    from sequence_ai._transport.api_key import scrub_key

    key = "seq_live_abc\u00e9\u2028def"
    forms = [key, repr(key), repr(key.encode()), ascii(key), f"b'Bearer {key!r}'"]
    for form in forms:
        scrubbed = scrub_key(f"Illegal header value {form}", key)
        assert "abc" not in scrubbed and "<api key>" in scrubbed, scrubbed


@pytest.mark.slow
def test_an_interrupted_run_closes_the_request_it_abandoned(own_gateway: Any) -> None:
    """A run's stalled request (its own deadline two minutes off) ends with the run."""
    threads_before = threading.enumerate()
    robot = Robot(instruction="interrupted mid-request")
    with open_policy(own_gateway, timeout_s=120.0) as policy:
        def on_chunk(prediction: Any) -> None:
            robot.on_chunk(prediction)
            if len(robot.chunks) == 1:
                own_gateway.inject("stall", seconds=None)
                threading.Timer(0.3, policy.interrupt).start()

        options = dict(robot.callbacks(), on_chunk=on_chunk)
        try:
            outcome = policy.run(robot.observe, robot.act, max_actions=10_000,
                                 max_seconds=120.0, **options)
            assert outcome.reason == "interrupted"
            # Well inside the abandoned request's own two minutes.
            assert wait_for(lambda: not [t for t in new_threads(threads_before)
                                         if t.name == THREAD_NAME], PATIENCE_S)
        finally:
            own_gateway.clear_faults()


@pytest.mark.parametrize("text", ["\u200b\u200b", "\u2060\ufeff\u200d", " \u3164 ", "\u00ad"])
def test_an_instruction_of_invisible_characters_is_empty(text: str) -> None:
    model = Model.from_wire({"id": "free"})
    frames = {"cam": b"\xff\xd8\xff\xe0" + b"\x00" * 16}
    with pytest.raises(ValueError, match="instruction is empty"):
        sequence_ai.observation(model, images=frames, instruction=text, joints=[0.0])
    visible = sequence_ai.observation(model, images=frames, instruction=f"pick{text}up",
                                      joints=[0.0])
    assert visible.instruction == f"pick{text}up"
