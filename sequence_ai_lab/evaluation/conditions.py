"""What is compared: conditions (a model and/or a parameters overlay), time modes, and the
seeded, interleaved order the trials run in. Pure Python (YAML for the overlays)."""

from __future__ import annotations

import math
import os
import random
import stat
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path

import yaml

# A node parameter's value as a parameters file gives it.
ParameterValue = bool | int | float | str | list[bool] | list[int] | list[float] | list[str]
TIME_MODES = ("realtime", "frozen")
# The node's name in a ROS parameters file: its overlay sits under this key (any namespace).
NODE_KEYS = ("/**/sequence_ai", "sequence_ai", "/sequence_ai", "/**")


class ConditionError(ValueError):
    """A condition, time mode or perturbation that cannot be used; the message says why."""


@dataclass(frozen=True)
class Condition:
    """One setting of the node to evaluate: its name, a model (empty: the node's own) and the
    parameters it overlays on the node's own values."""

    name: str
    model: str = ""
    parameters: Mapping[str, ParameterValue] = field(default_factory=dict)
    spec: str = ""  # as given on the command line

    def overlay(self) -> dict[str, ParameterValue]:
        """Every parameter this condition sets, the model included."""
        values: dict[str, ParameterValue] = dict(self.parameters)
        if self.model:
            values["model"] = self.model
        return values


# An overlay is a few lines of parameters; the node's own parameters file is a few kB. Larger,
# deeper or aliased documents are refused unparsed, as the node refuses such a limits file
# (9 lines of nested aliases expand to 12^9 values).
MAX_OVERLAY_BYTES = 256 * 1024
MAX_OVERLAY_DEPTH = 8


class _BoundedLoader(yaml.SafeLoader):
    """PyYAML's safe loader refusing anchors, aliases and nesting past MAX_OVERLAY_DEPTH."""

    def __init__(self, stream: str) -> None:
        super().__init__(stream)
        self._depth = 0

    def compose_node(self, parent: yaml.Node | None, index: int) -> yaml.Node | None:
        # PyYAML's stubs leave the parser's peek_event untyped.
        event: yaml.Event = self.peek_event()  # type: ignore[no-untyped-call]
        line = event.start_mark.line + 1 if event.start_mark is not None else 0
        if isinstance(event, yaml.AliasEvent) or getattr(event, "anchor", None) is not None:
            raise ConditionError(f"uses a YAML anchor or alias (line {line}); expected plain "
                                 "values")
        if self._depth >= MAX_OVERLAY_DEPTH:
            raise ConditionError(f"nests deeper than {MAX_OVERLAY_DEPTH} levels (line {line})")
        self._depth += 1
        try:
            return super().compose_node(parent, index)
        finally:
            self._depth -= 1


def _load_bounded(path: Path) -> object:
    try:
        # Non-blocking, and checked on the open file: a FIFO is refused, never waited on.
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
        with os.fdopen(fd, "rb") as handle:
            if not stat.S_ISREG(os.fstat(handle.fileno()).st_mode):
                raise ConditionError(f"params file {path}: not a regular file; expected YAML")
            data = handle.read(MAX_OVERLAY_BYTES + 1)
    except OSError as exc:
        raise ConditionError(f"params file {path}: cannot be read ({exc.strerror})") from None
    if len(data) > MAX_OVERLAY_BYTES:
        raise ConditionError(f"params file {path}: more than {MAX_OVERLAY_BYTES} bytes; "
                             "expected a few lines of parameters")
    try:
        loader = _BoundedLoader(data.decode("utf-8"))
        try:
            return loader.get_single_data()
        finally:
            loader.dispose()
    except ConditionError as exc:
        raise ConditionError(f"params file {path}: {exc}") from None
    except UnicodeDecodeError as exc:
        raise ConditionError(f"params file {path}: not UTF-8 text (byte {exc.start}); "
                             "expected YAML") from None
    except yaml.YAMLError as exc:
        raise ConditionError(f"params file {path}: not YAML ({exc})") from None
    except (ValueError, RecursionError, MemoryError) as exc:
        raise ConditionError(f"params file {path}: cannot be parsed ({type(exc).__name__}: "
                             f"{exc})") from None


def read_overlay(path: Path) -> dict[str, ParameterValue]:
    """A parameters file's values for the node: a ROS parameters file (`<node>:
    ros__parameters: {...}`) or a plain mapping of parameter names. Bounded: a regular file of
    at most MAX_OVERLAY_BYTES, no anchors or aliases, at most MAX_OVERLAY_DEPTH levels."""
    loaded = _load_bounded(path)
    if not isinstance(loaded, dict):
        raise ConditionError(f"params file {path}: expected a mapping of parameters")
    for key in NODE_KEYS:
        section = loaded.get(key)
        if isinstance(section, dict) and isinstance(section.get("ros__parameters"), dict):
            loaded = section["ros__parameters"]
            break
    else:
        if any(isinstance(v, dict) and "ros__parameters" in v for v in loaded.values()):
            raise ConditionError(
                f"params file {path}: expected the node's section under one of "
                f"{', '.join(NODE_KEYS)}; found {', '.join(map(str, loaded))}"
            )
    for name, value in loaded.items():
        if isinstance(value, dict):
            raise ConditionError(
                f"params file {path}: parameter {name!r} is a mapping; expected a value "
                "(nested parameters are written with dots, e.g. joint_limits.panda_joint1...)"
            )
    return {str(k): v for k, v in loaded.items()}


def parse_condition(text: str, base_dir: Path | None = None) -> Condition:
    """`NAME=model:M`, `NAME=params:FILE.yaml` or both, comma-separated
    (`NAME=model:M,params:FILE.yaml`); `NAME=` alone is the node as it is."""
    name, sep, rest = text.partition("=")
    name = name.strip()
    if not sep or not name:
        raise ConditionError(
            f"condition {text!r}: expected NAME=model:MODEL and/or NAME=params:FILE.yaml"
        )
    if any(c in name for c in "@, /"):
        raise ConditionError(f"condition {text!r}: name {name!r} may not contain '@', ',', '/' "
                             "or spaces")
    model = ""
    parameters: dict[str, ParameterValue] = {}
    for part in filter(None, (p.strip() for p in rest.split(","))):
        kind, colon, value = part.partition(":")
        if not colon or not value:
            raise ConditionError(
                f"condition {text!r}: part {part!r}: expected model:MODEL or params:FILE.yaml"
            )
        if kind == "model":
            model = value
        elif kind == "params":
            path = Path(value).expanduser()
            if base_dir is not None and not path.is_absolute():
                path = base_dir / path
            parameters.update(read_overlay(path))
        else:
            raise ConditionError(
                f"condition {text!r}: part {part!r}: expected model: or params:, got {kind!r}"
            )
    if "model" in parameters and model:
        raise ConditionError(f"condition {text!r}: the model is given twice (model: and in the "
                             "params file)")
    model = model or str(parameters.pop("model", ""))
    return Condition(name, model, parameters, text)


def with_model_files(condition: Condition, started_model: str = "") -> Condition:
    """`condition` with its model's own parameters files beneath its params (what the launch
    loads for that model, e.g. cosmos3's three camera views), so a model condition runs as
    `make demo --model` runs it. Refused when the model plays another robot than
    `started_model` (the --sim world's): one world cannot judge both."""
    if not condition.model:
        return condition
    from sequence_ai_ros.params.launch import model_robot, share_file

    robot = model_robot(condition.model)
    if started_model:
        started = model_robot(started_model)
        if (robot.simulator, robot.base) != (started.simulator, started.base):
            raise ConditionError(
                f"condition {condition.spec!r}: model {condition.model} runs on "
                f"{robot.simulator} ({robot.base or 'the DROID arm'}), --model {started_model} "
                f"on {started.simulator} ({started.base or 'the DROID arm'}); expected a model "
                "of the robot the evaluation starts"
            )
    values: dict[str, ParameterValue] = {}
    for relative in robot.overlays:
        values.update(read_overlay(share_file(relative)))
    values.pop("model", None)
    return replace(condition, parameters=values | dict(condition.parameters))


def time_modes(choice: str) -> tuple[str, ...]:
    """`--time-mode realtime|frozen|both` as the modes to run."""
    if choice == "both":
        return TIME_MODES
    if choice not in TIME_MODES:
        raise ConditionError(f"--time-mode {choice!r}: expected realtime, frozen or both")
    return (choice,)


@dataclass(frozen=True)
class Arm:
    """One compared setting: a condition in a time mode."""

    condition: Condition
    time_mode: str

    def key(self, several_modes: bool) -> str:
        return f"{self.condition.name}@{self.time_mode}" if several_modes else (
            self.condition.name
        )


# `--perturb` moves an object across the table, at most this far along x and along y: the
# physics world's workspace (docs/sim.md) is 0.7 m deep, and its layouts leave the cup 0.5 m or
# more inside it along y.
MAX_PERTURB_M = 0.5


@dataclass(frozen=True)
class Perturbation:
    """`--perturb cup:dx,dy@t`: move `object` by (dx, dy, 0) m at t s after the goal starts."""

    object: str
    offset: tuple[float, float, float]
    at_s: float

    @classmethod
    def parse(cls, text: str) -> Perturbation:
        shape = "OBJECT:DX,DY@SECONDS (metres, seconds after the goal starts), e.g. cup:0.05,0@2"
        bound = (f"a planar move of at most {MAX_PERTURB_M:g} m along x and y, at a finite time "
                 ">= 0 s")
        what, colon, rest = text.partition(":")
        offsets, at, when = rest.partition("@")
        if not colon or not at or what not in ("cup", "block"):
            raise ConditionError(f"--perturb {text!r}: expected {shape}; object cup or block")
        try:
            numbers = [float(v) for v in offsets.split(",")]
            at_s = float(when)
        except ValueError:
            raise ConditionError(f"--perturb {text!r}: expected {shape}") from None
        if len(numbers) == 3:
            raise ConditionError(
                f"--perturb {text!r}: a z offset lifts the object off the table; expected {bound}"
            )
        if len(numbers) != 2:
            raise ConditionError(f"--perturb {text!r}: expected {shape}")
        dx, dy = numbers
        if not (abs(dx) <= MAX_PERTURB_M and abs(dy) <= MAX_PERTURB_M and 0 <= at_s < math.inf):
            raise ConditionError(f"--perturb {text!r}: expected {bound}")
        return cls(what, (dx, dy, 0.0), at_s)

    def text(self) -> str:
        dx, dy, _ = self.offset
        return f"{self.object}:{dx:g},{dy:g}@{self.at_s:g}"


@dataclass(frozen=True)
class ScheduledTrial:
    """One trial of the plan: its place in the order, its arm and its seed."""

    index: int
    arm: str
    seed: int


def schedule(
    arms: Sequence[str], seeds: Sequence[int], order_seed: int
) -> list[ScheduledTrial]:
    """Every arm on every seed, interleaved: the seeds in a shuffled order, and for each seed
    every arm once in a shuffled order (a randomised block design), so drift over the run (a
    warming service, a heating motor) falls on every arm alike. Seeded: the same order again."""
    if len(set(arms)) != len(arms):
        raise ConditionError(f"arms {list(arms)}: expected distinct names")
    if len(set(seeds)) != len(seeds):
        raise ConditionError(f"seeds {list(seeds)}: expected distinct seeds")
    rng = random.Random(order_seed)
    blocks = list(seeds)
    rng.shuffle(blocks)
    trials: list[ScheduledTrial] = []
    for seed in blocks:
        order = list(arms)
        rng.shuffle(order)
        trials.extend(ScheduledTrial(len(trials), arm, seed) for arm in order)
    return trials
