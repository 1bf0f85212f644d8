"""The simulated chat model: a deterministic "slow brain" that splits a task into steps.

A real VLM planner looks at the camera frames and says the next step; so does this one. The
last user message carries the task, optionally the step now being played, the arm's joint
positions, the views of its images in order and the act model that plays the steps (the format
is in docs/gateway.md). By default a step is done when the frames show its geometric condition
(``planner_vision``: the hand above the cup, the cup in the hand, lifted, over or on the block);
the task is done when its last step's condition holds. Without frames it says it cannot judge
and answers the step under way. For the text-hash act models (``TEXT_TARGET_MODELS``), which
reach a fixed joint target per instruction and never look, a step is done at its target.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional, Sequence, Tuple

from PIL import Image

from sequence_ai_gateway.models import catalogue, planner_vision
from sequence_ai_gateway.policies import instruction_target, normalise_instruction

DONE = "done"
# Largest per-joint distance (rad) at which the arm counts as at a step's target: the reach
# policies close the gripper at this distance too.
ARRIVAL_TOLERANCE_RAD = 0.05
# Median provider time of one planning answer (an external VLM with one frame, a short reply).
PLANNER_INFERENCE_MS = 650.0
PANDA_JOINTS = len(catalogue.PANDA_LOWER)
PROMPT_FORMAT = (
    "Task: <task>\nCurrent step: <step now played, optional>\n"
    "Joint positions: [<7 joint angles, rad, optional>]\n"
    "Camera views: <view of each image, in order, optional>\n"
    "Act model: <model playing the steps, optional>"
)
# Act models that reach a joint target hashed from the instruction's text, whatever they see:
# with them a step is done at its target, not where the frames show it done.
TEXT_TARGET_MODELS = frozenset({"sim-droid-reach", "sim-droid-absolute-reach"})

# The demo's tasks (sequence_ai_lab/demo) and the steps each is played as, in order.
DECOMPOSITIONS: Dict[str, Tuple[str, ...]] = {
    "pick up the cup": (
        "reach above the cup",
        "grasp the cup",
        "lift the cup",
    ),
    "put the cup on the blue block": (
        "reach above the cup",
        "grasp the cup",
        "carry the cup over the blue block",
        "lower the cup onto the blue block",
    ),
}

_TASK = re.compile(r"^\s*task\s*:\s*(.+?)\s*$", re.IGNORECASE | re.MULTILINE)
_CURRENT = re.compile(r"^\s*current step\s*:\s*(.+?)\s*$", re.IGNORECASE | re.MULTILINE)
_JOINTS = re.compile(r"^\s*joint positions\s*:\s*(.+?)\s*$", re.IGNORECASE | re.MULTILINE)
_VIEWS = re.compile(r"^\s*camera views\s*:\s*(.+?)\s*$", re.IGNORECASE | re.MULTILINE)
_ACT_MODEL = re.compile(r"^\s*act model\s*:\s*(.+?)\s*$", re.IGNORECASE | re.MULTILINE)


class PromptRejected(ValueError):
    """The prompt lacks what the simulated planner needs; the message says what and where."""


@dataclass(frozen=True)
class Prompt:
    """What the planner reads from the last user message."""

    task: str
    current_step: Optional[str] = None
    joint_positions: Optional[List[float]] = None
    # The view of each image sent with the prompt, in order.
    views: Optional[List[str]] = None
    act_model: Optional[str] = None


@dataclass(frozen=True)
class PlannerReply:
    """The answer's text and the notes that go to the response's ``warnings``."""

    text: str
    warnings: List[str] = field(default_factory=list)


def _stripped(text: str) -> str:
    # A planner may end the line with a full stop or quote the step.
    return text.strip().strip("\"'").rstrip(".").strip()


def _joints(text: str) -> List[float]:
    values = [v for v in re.split(r"[\s,\[\]()]+", text) if v]
    try:
        joints = [float(v) for v in values]
    except ValueError:
        joints = []
    if len(joints) != PANDA_JOINTS or not all(math.isfinite(q) for q in joints):
        raise PromptRejected(
            f"'Joint positions: {text}': expected {PANDA_JOINTS} finite numbers (rad), "
            "e.g. 'Joint positions: [0.0, -0.5, 0.0, -2.0, 0.0, 1.6, 0.8]'"
        )
    return joints


def read_prompt(text: str) -> Prompt:
    """The task, current step and joints of a prompt; ``PromptRejected`` without a task."""
    task = _TASK.search(text)
    if task is None or not _stripped(task.group(1)):
        raise PromptRejected(
            "the simulated planner needs a line 'Task: <task>' in the last user message "
            f"(optional: 'Current step: <step>', 'Joint positions: [7 numbers]'); got "
            f"{text[:120]!r}"
        )
    current = _CURRENT.search(text)
    joints = _JOINTS.search(text)
    views = _VIEWS.search(text)
    act_model = _ACT_MODEL.search(text)
    return Prompt(
        task=_stripped(task.group(1)),
        current_step=_stripped(current.group(1)) if current and _stripped(current.group(1))
        else None,
        joint_positions=_joints(joints.group(1)) if joints else None,
        views=[v.strip() for v in views.group(1).split(",") if v.strip()] if views else None,
        act_model=catalogue.short_id(_stripped(act_model.group(1))) if act_model else None,
    )


def steps_of(task: str) -> Tuple[str, ...]:
    """The task's steps; a task outside the table is played as one step, itself."""
    return DECOMPOSITIONS.get(normalise_instruction(task), (task,))


def step_target(step: str) -> List[float]:
    """The joint configuration the simulated Franka act models reach for ``step``."""
    return instruction_target(step, catalogue.PANDA_LOWER, catalogue.PANDA_UPPER)


def _at(joints: Sequence[float], target: Sequence[float]) -> bool:
    return max(abs(q - t) for q, t in zip(joints, target)) <= ARRIVAL_TOLERANCE_RAD


def _step_index(
    steps: Sequence[str], step: Optional[str], task: str, notes: List[str]
) -> Optional[int]:
    """The index of the step under way among ``steps`` (None: none, or not one of them)."""
    if step is None:
        return None
    wanted = [normalise_instruction(s) for s in steps]
    name = normalise_instruction(step)
    if name in wanted:
        return wanted.index(name)
    notes.append(f"current step {step!r} is not a step of {task!r}: ignored")
    return None


def _answer(steps: Sequence[str], reached: Optional[int], current: Optional[int]) -> str:
    """The step after the latest done one, unless the planner already plays a later one (the
    arm then still stands where an earlier step left it)."""
    if reached is not None and (current is None or reached >= current):
        return DONE if reached == len(steps) - 1 else steps[reached + 1]
    return steps[current if current is not None else 0]


def next_step(prompt: Prompt, images: Sequence[Image.Image] = ()) -> PlannerReply:
    """The step to play now, or ``done`` when the task is done: judged from the frames, or by
    joint targets for a text-target act model."""
    steps = steps_of(prompt.task)
    notes: List[str] = []
    if normalise_instruction(prompt.task) not in DECOMPOSITIONS:
        notes.append(
            f"task {prompt.task!r} is not one the simulated planner knows "
            f"({', '.join(repr(t) for t in DECOMPOSITIONS)}): it is played as a single step"
        )
    current = _step_index(steps, prompt.current_step, prompt.task, notes)
    if prompt.act_model in TEXT_TARGET_MODELS:
        reached = _reached_target(steps, prompt, notes)
    else:
        reached = _reached_seen(steps, prompt, images, notes)
    return PlannerReply(_answer(steps, reached, current), notes)


def _reached_target(steps: Sequence[str], prompt: Prompt, notes: List[str]) -> Optional[int]:
    """The latest step whose joint target the arm is at."""
    if prompt.joint_positions is None:
        notes.append("no 'Joint positions:' line: the simulated planner cannot see the arm")
        return None
    for index in range(len(steps) - 1, -1, -1):
        if _at(prompt.joint_positions, step_target(steps[index])):
            return index
    return None


def _reached_seen(
    steps: Sequence[str], prompt: Prompt, images: Sequence[Image.Image], notes: List[str]
) -> Optional[int]:
    """The latest step the frames show done; None (and a note why) when they cannot tell."""
    cannot = "the simulated planner cannot judge whether a step is done: "
    if not images:
        notes.append(cannot + "no camera images in the last user message")
        return None
    if prompt.views is None or len(prompt.views) != len(images):
        notes.append(
            cannot + f"{len(images)} images need a line 'Camera views: <view>, ...' naming "
            f"each in order; got {prompt.views!r}"
        )
        return None
    if prompt.joint_positions is None:
        notes.append(cannot + "no 'Joint positions:' line (the hand and wrist camera's pose)")
        return None
    seen = planner_vision.look(dict(zip(prompt.views, images)), prompt.joint_positions)
    if seen.cup is None:
        notes.append(cannot + "no red cup in any image")
        return None
    for index in range(len(steps) - 1, -1, -1):
        done = planner_vision.step_done(steps[index], seen)
        if done is None:
            notes.append(cannot + f"step {steps[index]!r} is not one it can see the end of")
            return None
        if done:
            return index
    return None


class SimulatedPlanner:
    """The ``sim-planner`` chat model served by the gateway (``reply(prompt_text)``)."""

    name = "sim-planner"

    def __init__(self) -> None:
        self.row = planner_row()
        self.inference_ms = PLANNER_INFERENCE_MS

    # The chat route hands this model the last user message's images too.
    reads_images = True

    def reply(self, prompt_text: str, images: Sequence[Image.Image] = ()) -> PlannerReply:
        return next_step(read_prompt(prompt_text), images)


def planner_row() -> Dict[str, Any]:
    """The chat model's catalogue row: an act row's shape with the motion fields empty."""
    return {
        "id": catalogue.MODEL_PREFIX + SimulatedPlanner.name,
        "object": "model",
        "endpoint": "chat",
        "architecture": "simulated-planner",
        "robot": "droid_franka",
        "camera_views": [],
        "latency": {"p50_ms": PLANNER_INFERENCE_MS, "note": "provider time, not end-to-end"},
        "pricing": {"usd_per_call": 0.0},
        "licence": "simulated",
        "tags": ["simulated", "planner", "droid", "franka"],
        "simulated": True,
        # What a planner (or a test) needs to know where each step ends.
        "planner": {
            "prompt": PROMPT_FORMAT,
            "tasks": {
                task: [{"step": s, "joint_target": step_target(s)} for s in steps]
                for task, steps in DECOMPOSITIONS.items()
            },
            "arrival_tolerance_rad": ARRIVAL_TOLERANCE_RAD,
            "done": DONE,
        },
        "description": (
            "Simulated by the local sequence_ai gateway: a deterministic planner, not a VLM. "
            "It reads 'Task:', 'Current step:', 'Joint positions:', 'Camera views:' and "
            "'Act model:' lines of the last user message and looks at its images: a step is "
            "done when the frames show it done (for a text-target act model: at the step's "
            "joint target); it answers the next step, or 'done'."
        ),
    }
