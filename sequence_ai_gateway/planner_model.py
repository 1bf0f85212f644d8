"""The simulated chat model: a deterministic "slow brain" that splits a task into steps.

A real VLM planner looks at the camera frame and says the next step. This one reads the scene
from the prompt instead: the last user message carries the task, optionally the step now being
played, and the arm's joint positions (the format is in docs/gateway.md). Each step is an
instruction the simulated act models reach a fixed joint target for (``instruction_target``);
the arm standing at a step's target means that step is done, and at the last step's target the
answer is ``done``. Frames in the conversation are checked by the route but not looked at.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional, Sequence, Tuple

from sequence_ai_gateway import catalogue
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
    "Joint positions: [<7 joint angles, rad, optional>]"
)

# The demo's tasks (sequence_ai_ros/demo) and the steps each is played as, in order.
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


class PromptRejected(ValueError):
    """The prompt lacks what the simulated planner needs; the message says what and where."""


@dataclass(frozen=True)
class Prompt:
    """What the planner reads from the last user message."""

    task: str
    current_step: Optional[str] = None
    joint_positions: Optional[List[float]] = None


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
    return Prompt(
        task=_stripped(task.group(1)),
        current_step=_stripped(current.group(1)) if current and _stripped(current.group(1))
        else None,
        joint_positions=_joints(joints.group(1)) if joints else None,
    )


def steps_of(task: str) -> Tuple[str, ...]:
    """The task's steps; a task outside the table is played as one step, itself."""
    return DECOMPOSITIONS.get(normalise_instruction(task), (task,))


def step_target(step: str) -> List[float]:
    """The joint configuration the simulated Franka act models reach for ``step``."""
    return instruction_target(step, catalogue.PANDA_LOWER, catalogue.PANDA_UPPER)


def _at(joints: Sequence[float], target: Sequence[float]) -> bool:
    return max(abs(q - t) for q, t in zip(joints, target)) <= ARRIVAL_TOLERANCE_RAD


def next_step(prompt: Prompt) -> PlannerReply:
    """The step to play now, or ``done`` when the arm is at the last step's target.

    The latest step whose target the arm is at counts as done, unless the planner says it is
    already playing a later one (the arm then still stands where an earlier step left it).
    """
    steps = steps_of(prompt.task)
    notes: List[str] = []
    if normalise_instruction(prompt.task) not in DECOMPOSITIONS:
        notes.append(
            f"task {prompt.task!r} is not one the simulated planner knows "
            f"({', '.join(repr(t) for t in DECOMPOSITIONS)}): it is played as a single step"
        )
    wanted = [normalise_instruction(s) for s in steps]
    current: Optional[int] = None
    if prompt.current_step is not None:
        name = normalise_instruction(prompt.current_step)
        if name in wanted:
            current = wanted.index(name)
        else:
            notes.append(
                f"current step {prompt.current_step!r} is not a step of {prompt.task!r}: "
                "ignored"
            )
    reached: Optional[int] = None
    if prompt.joint_positions is None:
        notes.append("no 'Joint positions:' line: the simulated planner cannot see the arm")
    else:
        for index in range(len(steps) - 1, -1, -1):
            if _at(prompt.joint_positions, step_target(steps[index])):
                reached = index
                break
    if reached is not None and (current is None or reached >= current):
        text = DONE if reached == len(steps) - 1 else steps[reached + 1]
    else:
        text = steps[current if current is not None else 0]
    return PlannerReply(text, notes)


class SimulatedPlanner:
    """The ``sim-planner`` chat model served by the gateway (``reply(prompt_text)``)."""

    name = "sim-planner"

    def __init__(self) -> None:
        self.row = planner_row()
        self.inference_ms = PLANNER_INFERENCE_MS

    def reply(self, prompt_text: str) -> PlannerReply:
        return next_step(read_prompt(prompt_text))


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
            "It reads 'Task:', 'Current step:' and 'Joint positions:' lines of the last user "
            "message and answers the next step, or 'done' at the last step's target."
        ),
    }
