"""Wire types of ``POST /v1/act``. Field names are the wire's names verbatim."""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Optional

from .errors import InvalidResponse

__all__ = ["ActionChunk", "ImageFrame", "Observation", "Prediction", "Proprioception"]


@dataclass(frozen=True)
class ImageFrame:
    """One camera view: ``data`` is base64 JPEG/PNG (no ``data:`` prefix)."""

    view: str
    data: str
    timestamp_ms: Optional[int] = None

    def __repr__(self) -> str:
        # The payload is tens of kB of base64; its size is the useful part in a log.
        return (
            f"ImageFrame(view={self.view!r}, data=<{len(self.data)} base64 chars>, "
            f"timestamp_ms={self.timestamp_ms!r})"
        )

    def to_wire(self) -> dict[str, Any]:
        # An unset timestamp goes out as null, the wire form the live gateway is known to take.
        return {"view": self.view, "data": self.data, "timestamp_ms": self.timestamp_ms}


@dataclass(frozen=True)
class Proprioception:
    """Robot state. ``None`` means "not reported", which is not the same as zeros."""

    joint_positions: list[float]
    joint_velocities: Optional[list[float]] = None
    end_effector_pose: Optional[list[float]] = None
    gripper: Optional[list[float]] = None

    def to_wire(self) -> dict[str, Any]:
        out: dict[str, Any] = {"joint_positions": [float(v) for v in self.joint_positions]}
        # Unset optionals are sent as explicit null, as the reference client does (§1.3): the
        # live gateway is known to accept that form, while "absent" is only specified for it.
        for name in ("joint_velocities", "end_effector_pose", "gripper"):
            value = getattr(self, name)
            out[name] = None if value is None else [float(v) for v in value]
        return out


@dataclass(frozen=True)
class Observation:
    """What one request carries: camera frames, robot state and the instruction."""

    images: list[ImageFrame]
    proprioception: Proprioception
    instruction: str

    def to_wire(self) -> dict[str, Any]:
        return {
            "images": [frame.to_wire() for frame in self.images],
            "proprioception": self.proprioception.to_wire(),
            "instruction": self.instruction,
        }

    def with_instruction(self, text: str) -> Observation:
        """A copy carrying ``text`` as its instruction (frames and state are shared)."""
        if not isinstance(text, str):
            raise TypeError(f"instruction must be a str, got {type(text).__name__}")
        return dataclasses.replace(self, instruction=text)

    @property
    def views(self) -> list[str]:
        return [frame.view for frame in self.images]

    @property
    def view_bytes(self) -> dict[str, int]:
        """Bytes each view puts on the wire (its base64 text), by view name."""
        return {frame.view: len(frame.data) for frame in self.images}

    @property
    def image_bytes(self) -> int:
        """Bytes of every view together: most of a request's body, and so of its latency."""
        return sum(len(frame.data) for frame in self.images)


def _finite_number(value: object, where: str) -> float:
    # bool is an int subclass; a true/false in a step is a server bug, not a 1.0/0.0.
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise InvalidResponse(f"{where} is {value!r}; expected a number")
    try:
        number = float(value)
    except OverflowError:  # an integer beyond any float, e.g. 10**400
        raise InvalidResponse(f"{where} is {value!r:.40}; expected a finite number") from None
    if not math.isfinite(number):
        raise InvalidResponse(f"{where} is {value!r}; expected a finite number")
    return number


def _positive_int(value: object, where: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise InvalidResponse(f"{where} is {value!r}; expected a positive integer")
    return value


def _require(d: Mapping[str, Any], key: str, where: str) -> Any:
    if key not in d or d[key] is None:
        raise InvalidResponse(f"{where}.{key} is missing; the response must include it")
    return d[key]


def _parse_row(raw: Any, where: str, width: int) -> list[float]:
    # The live gateway sends {"index", "values"} objects; flat lists are accepted too.
    if isinstance(raw, Mapping):
        if "values" not in raw:
            raise InvalidResponse(f"{where}.values is missing; expected the step's values")
        raw = raw["values"]
        where = f"{where}.values"
    if not isinstance(raw, (list, tuple)):
        raise InvalidResponse(f"{where} is {raw!r:.80}; expected a list of numbers")
    if len(raw) != width:
        raise InvalidResponse(f"{where} has {len(raw)} values; expected action_dim = {width}")
    return [_finite_number(v, f"{where}[{i}]") for i, v in enumerate(raw)]


@dataclass
class ActionChunk:
    """A block of future actions: ``steps`` rows of ``action_dim`` values at the chunk's rate."""

    steps: list[list[float]]
    robot: str
    action_space: str
    action_dim: int
    control_frequency_hz: float
    covers_seconds: float
    open_loop_horizon: Optional[int] = None
    sustains_seconds: Optional[float] = None

    def __len__(self) -> int:
        return len(self.steps)

    def __repr__(self) -> str:
        replan = ""
        if self.open_loop_horizon is not None and self.open_loop_horizon != len(self.steps):
            replan = f", replan after {self.open_loop_horizon}"
        return (
            f"ActionChunk({len(self.steps)} steps x {self.action_dim} dims, "
            f"{self.action_space}, {self.robot}, {self.control_frequency_hz:g} Hz, "
            f"covers {self.covers_seconds:.3g}s{replan})"
        )

    @classmethod
    def from_wire(cls, d: object) -> ActionChunk:
        """Parse and sanity-check ``action_chunk``; any defect raises ``InvalidResponse``."""
        where = "action_chunk"
        if not isinstance(d, Mapping):
            raise InvalidResponse(f"{where} is {d!r:.80}; expected an object")
        action_dim = _positive_int(_require(d, "action_dim", where), f"{where}.action_dim")
        hz = _finite_number(
            _require(d, "control_frequency_hz", where), f"{where}.control_frequency_hz"
        )
        if hz <= 0:
            raise InvalidResponse(
                f"{where}.control_frequency_hz is {hz!r}; expected a positive rate"
            )
        robot = _require(d, "robot", where)
        space = _require(d, "action_space", where)
        for key, value in (("robot", robot), ("action_space", space)):
            if not isinstance(value, str):
                raise InvalidResponse(f"{where}.{key} is {value!r}; expected a string")
        covers = _finite_number(_require(d, "covers_seconds", where), f"{where}.covers_seconds")
        raw_steps = _require(d, "steps", where)
        if not isinstance(raw_steps, (list, tuple)):
            raise InvalidResponse(f"{where}.steps is {raw_steps!r:.80}; expected a list")
        if not raw_steps:
            raise InvalidResponse(f"{where}.steps is empty; expected at least one step")
        steps = [
            _parse_row(row, f"{where}.steps[{i}]", action_dim) for i, row in enumerate(raw_steps)
        ]
        horizon = d.get("open_loop_horizon")
        if horizon is not None:
            horizon = _positive_int(horizon, f"{where}.open_loop_horizon")
        sustains = d.get("sustains_seconds")
        if sustains is not None:
            sustains = _finite_number(sustains, f"{where}.sustains_seconds")
        return cls(
            steps=steps,
            robot=robot,
            action_space=space,
            action_dim=action_dim,
            control_frequency_hz=hz,
            covers_seconds=covers,
            open_loop_horizon=horizon,
            sustains_seconds=sustains,
        )


@dataclass
class Prediction:
    """One ``/v1/act`` answer, plus the observation it was computed from (not on the wire)."""

    id: str
    model: str
    action_chunk: ActionChunk
    perf: dict[str, Any] = field(default_factory=dict)
    usage: dict[str, Any] = field(default_factory=dict)
    warnings: list[str] = field(default_factory=list)
    observation: Optional[Observation] = field(default=None, repr=False, compare=False)
    # Not on the wire: the size of the request body the client sent for this answer.
    request_bytes: Optional[int] = field(default=None, compare=False)

    @classmethod
    def from_wire(cls, d: object, observation: Optional[Observation] = None) -> Prediction:
        """Parse a 200 body of ``POST /v1/act``; any defect raises ``InvalidResponse``."""
        if not isinstance(d, Mapping):
            raise InvalidResponse(f"response is {d!r:.80}; expected an object")
        ident = _require(d, "id", "response")
        model = _require(d, "model", "response")
        chunk = ActionChunk.from_wire(_require(d, "action_chunk", "response"))
        perf = d.get("perf") or {}
        usage = d.get("usage") or {}
        warnings = d.get("warnings") or []
        if not isinstance(perf, Mapping) or not isinstance(usage, Mapping):
            raise InvalidResponse("response.perf and response.usage must be objects")
        if not isinstance(warnings, Sequence) or isinstance(warnings, str):
            raise InvalidResponse(f"response.warnings is {warnings!r:.80}; expected a list")
        return cls(
            id=str(ident),
            model=str(model),
            action_chunk=chunk,
            perf=dict(perf),
            usage=dict(usage),
            warnings=[str(w) for w in warnings],
            observation=observation,
        )
