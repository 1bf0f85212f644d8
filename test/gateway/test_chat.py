"""POST /v1/chat (PROTOCOL §8) over HTTP: the schema, the envelope, the simulated planner."""

from __future__ import annotations

import pytest

pytest.importorskip("fastapi")

from support.gateway_support import (  # noqa: E402
    DROID_REACH,
    PI05,
    PLANNER,
    act_body,
    client,
    frame,
    pending_faults,
)

TASK = "put the cup on the blue block"
REST = [0.0, -0.5, 0.0, -2.0, 0.0, 1.6, 0.8]


def chat_body(text: str, model: str = PLANNER, **fields) -> dict:
    return {"model": model, "messages": [{"role": "user", "content": text}], **fields}


def prompt(task: str = TASK, step=None, joints=None, act_model="sim-droid-reach") -> str:
    # sim-droid-reach reaches each step's hashed joint target: the planner judges by those.
    lines = [f"Task: {task}", f"Act model: {act_model}"]
    if step is not None:
        lines.append(f"Current step: {step}")
    if joints is not None:
        lines.append(f"Joint positions: {joints}")
    return "\n".join(lines + ["What is the next step, or done?"])


def plan(handle) -> list:
    """(step, joint target) of the demo task, as the planner's catalogue row lists them."""
    with client(handle, key=None) as c:
        (row,) = c.get("/v1/models", params={"endpoint": "chat"}).json()["data"]
    return [(s["step"], s["joint_target"]) for s in row["planner"]["tasks"][TASK]]


def ask(handle, text: str, **fields):
    with client(handle) as c:
        return c.post("/v1/chat", json=chat_body(text, **fields))


def test_the_planner_is_a_simulated_chat_row(gateway):
    with client(gateway, key=None) as c:
        rows = c.get("/v1/models", params={"endpoint": "chat"}).json()["data"]
    assert [r["id"] for r in rows] == [PLANNER]
    row = rows[0]
    assert row["simulated"] is True and "simulated" in row["tags"]
    assert row["description"].startswith("Simulated")
    assert row["latency"]["p50_ms"] > 0
    assert row["planner"]["done"] == "done"


def test_answer_has_the_section_8_envelope(gateway):
    response = ask(gateway, prompt())
    assert response.status_code == 200, response.text
    body = response.json()
    assert set(body) == {"id", "model", "message", "finish_reason", "usage", "perf", "warnings"}
    assert body["id"].startswith("chat-") and body["model"] == PLANNER
    assert body["message"] == {"role": "assistant", "content": plan(gateway)[0][0]}
    assert body["finish_reason"] == "stop"
    usage = body["usage"]
    assert usage["total_tokens"] == usage["prompt_tokens"] + usage["completion_tokens"] > 0
    assert {"inference_ms", "transport_ms", "ttfa_ms"} <= set(body["perf"])
    # No joints in the prompt: the answer says the planner could not see the arm.
    assert any("Joint positions" in w for w in body["warnings"])


def test_the_planner_walks_the_task_and_says_done_at_the_last_target(gateway):
    steps = plan(gateway)
    assert len(steps) == 4
    answers = [ask(gateway, prompt(step=step, joints=target)).json()["message"]["content"]
               for step, target in steps]
    assert answers == [s for s, _ in steps[1:]] + ["done"]


def test_a_step_not_reached_yet_is_repeated(gateway):
    steps = plan(gateway)
    # Playing step 2 with the arm still where step 1 left it: step 2 goes on.
    response = ask(gateway, prompt(step=steps[2][0], joints=steps[1][1]))
    assert response.json()["message"]["content"] == steps[2][0]
    response = ask(gateway, prompt(step=steps[1][0], joints=REST))
    assert response.json()["message"]["content"] == steps[1][0]


def test_the_scene_alone_tells_the_next_step(gateway):
    steps = plan(gateway)
    response = ask(gateway, prompt(joints=steps[0][1]))
    assert response.json()["message"]["content"] == steps[1][0]
    assert ask(gateway, prompt(joints=steps[-1][1])).json()["message"]["content"] == "done"


def test_an_unknown_task_is_one_step_and_warned(gateway):
    body = ask(gateway, prompt(task="wave at the camera", joints=REST)).json()
    assert body["message"]["content"] == "wave at the camera"
    assert any("not one the simulated planner knows" in w for w in body["warnings"])


def test_text_and_image_blocks_are_read(gateway):
    content = [{"type": "text", "text": prompt()},
               {"type": "image", "data": frame(320, 180)}]
    with client(gateway) as c:
        response = c.post("/v1/chat", json={"model": "sim-planner",
                                            "messages": [{"role": "user", "content": content}]})
    assert response.status_code == 200, response.text
    assert response.json()["usage"]["images"] == 1


def test_max_tokens_cuts_the_answer_and_says_length(gateway):
    body = ask(gateway, prompt(), max_tokens=2).json()
    assert body["message"]["content"] == " ".join(plan(gateway)[0][0].split()[:2])
    assert body["finish_reason"] == "length"


@pytest.mark.parametrize(
    ("body", "field"),
    [
        (chat_body("Task: x", stray=1), "stray"),
        ({"model": PLANNER, "messages": [{"role": "user", "content": "x", "mood": "calm"}]},
         "mood"),
        ({"model": PLANNER, "messages": [{"role": "user", "content": [
            {"type": "image", "data": "Zm9v", "url": "http://x"}]}]}, "url"),
        ({"model": PLANNER, "messages": [{"role": "user", "content": [{"type": "video"}]}]},
         "content"),
        (chat_body("Task: x", max_tokens="12"), "max_tokens"),
        (chat_body("Task: x", max_tokens=0), "max_tokens"),
        (chat_body("Task: x", temperature=3.0), "temperature"),
        ({"model": PLANNER, "messages": []}, "messages"),
        ({"model": PLANNER, "messages": [{"role": "robot", "content": "x"}]}, "role"),
    ],
)
def test_the_body_schema_is_strict(gateway, body, field):
    with client(gateway) as c:
        response = c.post("/v1/chat", json=body)
    assert response.status_code == 422, response.text
    assert any(field in error["loc"] for error in response.json()["detail"]), response.text


def test_more_than_256_messages_is_a_422(gateway):
    body = {"model": PLANNER, "messages": [{"role": "user", "content": "Task: x"}] * 257}
    with client(gateway) as c:
        assert c.post("/v1/chat", json=body).status_code == 422


def test_a_non_chat_model_is_refused_naming_it(gateway):
    response = ask(gateway, prompt(), model="pi05-droid")
    assert response.status_code == 400
    detail = response.json()["detail"]
    assert "'pi05-droid'" in detail and "/v1/act, not /v1/chat" in detail and PLANNER in detail


def test_a_chat_model_is_refused_on_act(gateway):
    with client(gateway) as c:
        response = c.post("/v1/act", json={
            "model": PLANNER, "observation": {"images": [], "instruction": "x",
                                              "proprioception": {"joint_positions": []}}})
    assert response.status_code == 400 and "/v1/chat, not /v1/act" in response.json()["detail"]


@pytest.mark.parametrize(
    ("key", "model", "status"),
    [(None, PLANNER, 401), ("seq_wrong", PLANNER, 401), ("broke", PLANNER, 402),
     ("valid", "no-such-model", 404)],
)
def test_key_credit_then_model(gateway, key, model, status):
    with client(gateway, key=key) as c:
        response = c.post("/v1/chat", json=chat_body(prompt(), model=model))
    assert response.status_code == status


@pytest.mark.parametrize(
    ("data", "said"),
    [("not base64!", "not base64"), (frame(64, 36, "PNG"), "PNG"), ("Zm9v", "not an image")],
)
def test_an_image_block_must_be_a_base64_jpeg(gateway, data, said):
    content = [{"type": "text", "text": prompt()}, {"type": "image", "data": data}]
    with client(gateway) as c:
        response = c.post("/v1/chat", json={"model": PLANNER,
                                            "messages": [{"role": "user", "content": content}]})
    assert response.status_code == 400
    detail = response.json()["detail"]
    assert detail.startswith("messages[0].content[1].data") and said in detail


@pytest.mark.parametrize(
    ("messages", "said"),
    [([{"role": "system", "content": "plan"}], "no message with role 'user'"),
     ([{"role": "user", "content": "hello"}], "'Task: <task>'"),
     ([{"role": "user", "content": "Task: x\nJoint positions: [1, 2]"}], "7 finite numbers")],
)
def test_a_prompt_the_planner_cannot_read_is_a_400_saying_why(gateway, messages, said):
    with client(gateway) as c:
        response = c.post("/v1/chat", json={"model": PLANNER, "messages": messages})
    assert response.status_code == 400 and said in response.json()["detail"]


def test_chat_requests_are_counted(gateway):
    before = gateway.counters()
    ask(gateway, prompt())
    after = gateway.counters()
    assert after["requests"]["chat"] == before["requests"]["chat"] + 1
    assert after["requests"]["act"] == before["requests"]["act"]
    assert after["models"]["sim-planner"]["requests"] == before["models"]["sim-planner"][
        "requests"] + 1


def test_a_status_fault_answers_once(gateway):
    gateway.inject("status", status=503, model="sim-planner")
    assert ask(gateway, prompt()).status_code == 503
    assert ask(gateway, prompt()).status_code == 200


def test_chat_takes_only_faults_named_for_it_and_meant_for_a_message(gateway):
    gateway.inject("status", status=503)
    gateway.inject("nan", model="sim-planner")
    assert ask(gateway, prompt()).status_code == 200
    assert [f.kind.value for f in pending_faults(gateway)] == ["status", "nan"]
    with client(gateway) as c:
        assert c.post("/v1/act", json=act_body(PI05)).status_code == 503
    gateway.clear_faults()



def test_a_refused_prompt_leaves_the_fault_pending(gateway):
    gateway.inject("status", status=503, model="sim-planner")
    assert ask(gateway, "no task here").status_code == 400
    assert [f.kind.value for f in pending_faults(gateway)] == ["status"]
    gateway.clear_faults()


def test_the_planner_and_droid_reach_play_the_task_through_to_done(gateway):
    """Closed loop over HTTP: ask the planner, play sim-droid-reach's chunk for its step
    (q_reference + row for the open-loop horizon), repeat; every step is reached and the task
    ends in done."""
    joints, said, step = list(REST), [], None
    with client(gateway) as c:
        for _ in range(200):  # a hang guard: the task takes a few dozen exchanges
            text = prompt(step=step, joints=joints)
            answer = c.post("/v1/chat", json=chat_body(text)).json()["message"]["content"]
            if answer == "done":
                break
            if answer != step:
                said.append(answer)
                step = answer
            chunk = c.post("/v1/act", json=act_body(DROID_REACH, joints=joints, instruction=step))
            rows = [s["values"] for s in chunk.json()["action_chunk"]["steps"]]
            horizon = chunk.json()["action_chunk"]["open_loop_horizon"]
            joints = [q + d for q, d in zip(joints, rows[horizon - 1][:7])]
    assert answer == "done"
    assert said == [s for s, _ in plan(gateway)]
