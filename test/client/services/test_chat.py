"""sequence_ai.chat() against the local gateway's /v1/chat and its simulated planner."""

from __future__ import annotations

import math
import re

import pytest
from support.policy_support import FRAME_16_9, make_observation, open_policy

import sequence_ai
from sequence_ai import ChatReply, chat, image_block, models
from sequence_ai.cli import main
from sequence_ai.errors import (
    AuthError,
    InvalidRequest,
    InvalidResponse,
    OutOfCredit,
    SequencesError,
    Unavailable,
)

PLANNER = "sim-planner"
PLANNER_ID = "accounts/sequences/models/sim-planner"
TASK = "put the cup on the blue block"


def ask(gateway, text, *, model=PLANNER, **kwargs) -> ChatReply:
    kwargs.setdefault("api_key", gateway.api_key)
    return chat(model, [{"role": "user", "content": text}], base_url=gateway.url, **kwargs)


def prompt(step=None, joints=None, task=TASK) -> str:
    # sim-droid-reach reaches each step's hashed joint target: the planner judges by those.
    lines = [f"Task: {task}", "Act model: sim-droid-reach"]
    if step is not None:
        lines.append(f"Current step: {step}")
    if joints is not None:
        lines.append("Joint positions: [" + ", ".join(repr(q) for q in joints) + "]")
    return "\n".join(lines + ["What is the next step, or done?"])


def planned_steps(gateway) -> list:
    """(step, joint target) of the task, from the planner's catalogue row."""
    (row,) = models("chat", base_url=gateway.url)
    return [(s["step"], s["joint_target"]) for s in row.raw["planner"]["tasks"][TASK]]


def test_the_answer_is_a_typed_reply(shared_gateway, no_env):
    reply = ask(shared_gateway, prompt())
    assert isinstance(reply, ChatReply)
    assert reply.model == PLANNER_ID and reply.id.startswith("chat-")
    assert reply.role == "assistant" and reply.finish_reason == "stop"
    assert reply.text == reply.content == planned_steps(shared_gateway)[0][0]
    assert reply.tool_calls == ()
    assert reply.usage["total_tokens"] == reply.usage["prompt_tokens"] + reply.usage[
        "completion_tokens"]
    assert "ttfa_ms" in reply.perf
    assert any("Joint positions" in w for w in reply.warnings)


def test_a_planner_walks_the_task_to_done(shared_gateway, no_env):
    steps = planned_steps(shared_gateway)
    answers = [ask(shared_gateway, prompt(step, target)).text for step, target in steps]
    assert answers == [s for s, _ in steps[1:]] + ["done"]


def test_a_frame_goes_as_an_image_block(shared_gateway, no_env):
    content = [{"type": "text", "text": prompt()}, image_block(FRAME_16_9)]
    reply = chat(PLANNER, [{"role": "system", "content": "You plan robot steps."},
                           {"role": "user", "content": content}],
                 api_key=shared_gateway.api_key, base_url=shared_gateway.url)
    assert reply.usage["images"] == 1 and reply.finish_reason == "stop"


def test_tools_go_out_only_when_given(shared_gateway, no_env):
    tool = {"type": "function", "function": {"name": "next_step", "parameters": {}}}
    assert not any("tools" in w for w in ask(shared_gateway, prompt()).warnings)
    assert any("tools" in w for w in ask(shared_gateway, prompt(), tools=[tool]).warnings)


def test_a_catalogue_row_is_a_model_too(shared_gateway, no_env):
    (planner,) = models("chat", base_url=shared_gateway.url)
    assert ask(shared_gateway, prompt(), model=planner).model == PLANNER_ID


def test_max_tokens_is_sent(shared_gateway, no_env):
    reply = ask(shared_gateway, prompt(), max_tokens=1, temperature=0.0)
    assert reply.finish_reason == "length" and len(reply.text.split()) == 1


def test_an_act_model_is_refused_before_anything_is_sent(gw, no_env):
    with pytest.raises(InvalidRequest) as info:
        ask(gw, prompt(), model="pi05-droid")
    assert info.value.status is None
    assert "'pi05-droid'" in str(info.value) and "sequence_ai.connect()" in str(info.value)


def test_an_unknown_model_is_the_gateways_404(shared_gateway, no_env):
    with pytest.raises(InvalidRequest) as info:
        ask(shared_gateway, prompt(), model="no-such-planner")
    assert info.value.status == 404


def test_a_stray_key_is_the_gateways_422(shared_gateway, no_env):
    with pytest.raises(InvalidRequest) as info:
        chat(PLANNER, [{"role": "user", "content": prompt(), "mood": "calm"}],
             api_key=shared_gateway.api_key, base_url=shared_gateway.url)
    assert info.value.status == 422 and "mood" in str(info.value)


def test_a_prompt_without_a_task_is_a_400_saying_why(shared_gateway, no_env):
    with pytest.raises(InvalidRequest, match="Task: <task>") as info:
        ask(shared_gateway, "what now?")
    assert info.value.status == 400


def test_keys_and_credit(shared_gateway, no_env):
    with pytest.raises(AuthError) as info:
        ask(shared_gateway, prompt(), api_key="seq_live_wrong")
    assert info.value.status == 401
    with pytest.raises(OutOfCredit):
        ask(shared_gateway, prompt(), api_key=shared_gateway.broke_key)
    with pytest.raises(AuthError) as info:
        chat(PLANNER, [{"role": "user", "content": "x"}], base_url=shared_gateway.url)
    assert info.value.status is None  # no key: refused before any request


@pytest.mark.parametrize(
    ("status", "error"), [(503, Unavailable), (504, Unavailable), (500, SequencesError)]
)
def test_service_failures_are_raised_not_retried(gw, no_env, status, error):
    gw.inject("status", status=status, model=PLANNER)
    with pytest.raises(error) as info:
        ask(gw, prompt())
    assert type(info.value) is error and info.value.status == status
    if isinstance(info.value, Unavailable):
        assert info.value.warming is False
    assert ask(gw, prompt()).text  # the fault was used once: the next call is answered


def test_a_broken_answer_is_invalid_response_or_unavailable(gw, no_env):
    gw.inject("malformed", model=PLANNER)
    with pytest.raises(InvalidResponse):
        ask(gw, prompt())
    gw.inject("reset", model=PLANNER)
    with pytest.raises(Unavailable):
        ask(gw, prompt())


@pytest.mark.parametrize("depth", [100, 100_000])
def test_an_answer_nested_deeper_than_max_depth_is_invalid_response(gw, no_env, depth):
    """100 levels parse but exceed the bound; 100 000 stop Python's parser (a RecursionError
    before the bound)."""
    gw.inject("nested", model=PLANNER, fields={"depth": depth})
    with pytest.raises(InvalidResponse, match="nested deeper than 64 levels"):
        ask(gw, prompt())
    assert ask(gw, prompt()).text  # the fault was used once


@pytest.mark.slow  # over half a second of wall time
def test_timeout_s_bounds_the_whole_call(gw, no_env):
    """A slow catalogue read leaves the chat request only the rest of ``timeout_s``."""
    gw.inject("catalogue_stall", seconds=1.0)
    gw.inject("stall", seconds=10.0, model=PLANNER)
    with pytest.raises(Unavailable, match=r"timed out after ([\d.]+)s") as raised:
        ask(gw, prompt(), timeout_s=3.0)
    gw.clear_faults()
    applied = float(re.search(r"timed out after ([\d.]+)s", str(raised.value)).group(1))
    assert applied < 3.0, raised.value


@pytest.mark.parametrize(
    ("messages", "kwargs", "error", "said"),
    [
        ([], {}, ValueError, "1 to 256"),
        ([{"role": "user", "content": "x"}] * 257, {}, ValueError, "257 entries"),
        ("Task: x", {}, TypeError, "list of"),
        ([{"role": "robot", "content": "x"}], {}, ValueError, "messages[0].role"),
        ([{"role": "user", "content": 3}], {}, TypeError, "messages[0].content"),
        ([{"role": "user", "content": "x"}], {"max_tokens": 0}, ValueError, "max_tokens"),
        ([{"role": "user", "content": "x"}], {"temperature": math.nan}, ValueError,
         "temperature"),
        ([{"role": "user", "content": "x"}], {"tools": ["next_step"]}, TypeError, "tools[0]"),
    ],
)
def test_bad_arguments_are_refused_locally(no_env, messages, kwargs, error, said):
    with pytest.raises(error, match=said.replace("[", r"\[").replace("]", r"\]")):
        chat(PLANNER, messages, api_key="k", base_url="http://127.0.0.1:9", **kwargs)


def test_reply_text_joins_text_blocks():
    reply = ChatReply.from_wire({
        "id": "c", "model": "m", "finish_reason": "stop",
        "message": {"role": "assistant", "content": [
            {"type": "text", "text": "a"}, {"type": "image", "data": "x"},
            {"type": "text", "text": "b"}]},
    })
    assert reply.text == "a\nb" and reply.usage == {} and reply.warnings == ()
    empty = ChatReply.from_wire({"id": "c", "model": "m", "finish_reason": "tool_calls",
                                 "message": {"role": "assistant", "content": None,
                                             "tool_calls": [{"id": "t"}]}})
    assert empty.text == "" and empty.tool_calls == ({"id": "t"},)


@pytest.mark.parametrize(
    ("body", "said"),
    [
        ([], "expected an object"),
        ({"id": "c", "model": "m", "finish_reason": "stop"}, "message is None"),
        ({"id": "c", "model": "m", "finish_reason": "stop",
          "message": {"role": "assistant", "content": 3}}, "message.content"),
        ({"id": "c", "model": "m", "message": {"role": "assistant", "content": "x"}},
         "finish_reason"),
        ({"id": "c", "model": "m", "finish_reason": "stop", "warnings": "w",
          "message": {"role": "assistant", "content": "x"}}, "warnings"),
    ],
)
def test_an_answer_off_the_shape_is_invalid_response(body, said):
    with pytest.raises(InvalidResponse, match=said):
        ChatReply.from_wire(body)


def test_the_catalogue_maps_the_chat_row(shared_gateway, no_env):
    rows = {m.short_id: m for m in models(base_url=shared_gateway.url)}
    planner = rows[PLANNER]
    assert planner.endpoint == "chat" and planner.action_dim is None
    assert planner.camera_views == () and planner.control_hz is None
    assert planner.raw["simulated"] is True
    assert [m.short_id for m in models("chat", base_url=shared_gateway.url)] == [PLANNER]


def test_the_cli_table_lists_the_chat_row(shared_gateway, no_env, capsys):
    assert main(["models", "--base-url", shared_gateway.url]) == 0
    lines = capsys.readouterr().out.splitlines()
    row = next(line for line in lines if line.startswith(PLANNER))
    assert row.split() == [PLANNER, "chat", "-", "-", "-", "-", "-", "-", "-"]


def test_connect_to_a_chat_model_is_refused_naming_chat(shared_gateway, no_env):
    with open_policy(shared_gateway, PLANNER) as policy:
        with pytest.raises(InvalidRequest, match=r"/v1/chat, not /v1/act.*sequence_ai\.chat"):
            policy.spec()
        with pytest.raises(InvalidRequest, match="/v1/chat, not /v1/act"):
            policy.predict(make_observation())
        with pytest.raises(InvalidRequest, match="sequence_ai.chat"):
            policy.run(make_observation, lambda row: None, max_actions=1,
                       validate=lambda row: True)


def test_chat_is_exported():
    assert sequence_ai.chat is chat and "chat" in sequence_ai.__all__
    assert {"ChatReply", "image_block"} <= set(sequence_ai.__all__)
