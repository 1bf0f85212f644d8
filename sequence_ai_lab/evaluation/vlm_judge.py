"""A VLM judge beside the policy (as MoveIt Pro's vla_sim runs one): after a goal, the frames the
node last sent the model (its ~/current_frames) and the task go to a chat model through the
client's `chat`; its first word is the verdict. A second opinion by default (`--vlm-judge`),
the verdict itself with `--judge vlm` (a real robot with no operator at hand)."""

from __future__ import annotations

from dataclasses import dataclass

from rclpy.node import Node

import sequence_ai
from sequence_ai_interfaces.srv import CurrentFrames
from sequence_ai_lab.demo.planner import PlannerError, call

CHAT_TIMEOUT_S = 30.0
FRAMES_TIMEOUT_S = 10.0


def prompt(task: str) -> str:
    return (
        f"A robot arm was told: {task!r}. The images are its cameras' last frames. Did it "
        "accomplish the task? Answer 'success' or 'failure' as the first word, then say why in "
        "one sentence."
    )


@dataclass(frozen=True)
class VlmVerdict:
    """The judge's verdict (None: its answer held none) and its words."""

    success: bool | None
    reason: str


def parse_verdict(text: str) -> VlmVerdict:
    """The first word of the answer: success/yes, or failure/fail/no; anything else is none."""
    words = text.strip().split(maxsplit=1)
    first = words[0].strip(".,:;!*'\"").lower() if words else ""
    rest = words[1].strip() if len(words) > 1 else ""
    if first in ("success", "succeeded", "yes"):
        return VlmVerdict(True, rest)
    if first in ("failure", "failed", "fail", "no"):
        return VlmVerdict(False, rest)
    return VlmVerdict(None, f"no verdict in the answer: {text.strip()[:200]!r}")


class VlmJudge:
    """Asks `model` about the node's last frames; any failure is a verdict of None, with why."""

    def __init__(self, node: Node, node_path: str, model: str, *, base_url: str | None,
                 api_key: str | None) -> None:
        self.model = model
        self._frames = node.create_client(CurrentFrames, f"{node_path}/current_frames")
        self._base_url = base_url
        self._api_key = api_key

    def judge(self, task: str) -> VlmVerdict:
        try:
            reply = call(self._frames, CurrentFrames.Request(), FRAMES_TIMEOUT_S)
        except PlannerError as exc:
            return VlmVerdict(None, f"no frames: {exc}")
        if not reply.frames:
            return VlmVerdict(None, f"no frames: {reply.message}")
        content: list[dict[str, object]] = [{"type": "text", "text": prompt(task)}]
        content += [sequence_ai.image_block(bytes(frame.data)) for frame in reply.frames]
        try:
            answer = sequence_ai.chat(self.model, [{"role": "user", "content": content}],
                                      api_key=self._api_key, base_url=self._base_url,
                                      timeout_s=CHAT_TIMEOUT_S)
        except sequence_ai.SequencesError as exc:
            return VlmVerdict(None, f"chat failed: {type(exc).__name__}: {exc}")
        return parse_verdict(answer.text)
