"""Where an ee model's commands are expressed (issue 21): `command_frame`, and the transform
that takes base_frame — the frame of the model's rows and of the measured pose — into it.

The same frame (or an empty command_frame) needs none. Otherwise the transform is
`command_frame_transform` (base_frame's pose in command_frame, as static_transform_publisher
takes it) where it is given, else tf2's newest `command_frame <- base_frame`, looked up for
every command, so a moving command frame is followed. Without either, configure refuses.
"""

from __future__ import annotations

import importlib.util
import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Protocol

from sequence_ai_ros.core.freshness import StaleObservation
from sequence_ai_ros.core.pose_math import Transform, pose_vector_to_pose
from sequence_ai_ros.core.readings import TransformLookup

# Which transform runs, as /diagnostics says it (`command_frame_source`).
SAME = "same as base_frame"
PARAMETER = "command_frame_transform"
TF2 = "tf2"


class FrameConfig(Protocol):
    """The parameters the command frame is read from (`NodeConfig`); read-only, so a frozen
    dataclass satisfies it."""

    @property
    def base_frame(self) -> str: ...
    @property
    def command_frame(self) -> str: ...
    @property
    def command_frame_transform(self) -> tuple[float, ...]: ...


class CommandFrame(Protocol):
    """The transform from base_frame to command_frame, now."""

    @property
    def source(self) -> str: ...

    def transform(self) -> Transform:
        """The transform, or StaleObservation when it cannot be had."""
        ...


@dataclass(frozen=True)
class FixedFrame:
    """A transform that does not change: none (the same frame) or the parameter's."""

    source: str = SAME
    fixed: Transform = field(default_factory=Transform)

    def transform(self) -> Transform:
        return self.fixed


class TfFrame:
    """tf2's newest command_frame <- base_frame, for every command."""

    source = TF2

    def __init__(self, buffer: TransformLookup, command_frame: str, base_frame: str) -> None:
        # tf2's "the newest transform" (time zero); rclpy only where tf2 runs.
        from rclpy.time import Time

        self._latest = Time()
        self._buffer = buffer
        self._command_frame = command_frame
        self._base_frame = base_frame

    def transform(self) -> Transform:
        try:
            found = self._buffer.lookup_transform(
                self._command_frame, self._base_frame, self._latest
            )
        except Exception as exc:  # noqa: BLE001 - every tf2 failure is a missing transform
            raise StaleObservation(
                f"tf {self._command_frame} <- {self._base_frame}: {type(exc).__name__}: {exc}"
            ) from exc
        t, q = found.transform.translation, found.transform.rotation
        return Transform.of_pose((t.x, t.y, t.z), (q.x, q.y, q.z, q.w))


def tf2_imports() -> bool:
    return importlib.util.find_spec("tf2_ros") is not None


def differs(config: FrameConfig) -> bool:
    command = config.command_frame.lstrip("/")
    return bool(command) and command != config.base_frame.lstrip("/")


def problem(config: FrameConfig, model: str, tf2: bool) -> str | None:
    """Why no transform into command_frame can be had, naming the parameters and the model."""
    given = config.command_frame_transform
    if given:
        return _transform_problem(given)
    if differs(config) and not tf2:
        return (
            f"command_frame {config.command_frame!r} differs from base_frame "
            f"{config.base_frame!r} and tf2_ros does not import here; expected "
            f"command_frame_transform (base_frame's pose in command_frame: x, y, z, roll, "
            f"pitch, yaw) or command_frame {config.base_frame!r} for model {model}"
        )
    return None


def command_frame(config: FrameConfig, buffer: TransformLookup | None) -> CommandFrame:
    """The transform source for `config` (problem() said it can be had)."""
    if config.command_frame_transform:
        position, quaternion = pose_vector_to_pose(config.command_frame_transform)
        return FixedFrame(PARAMETER, Transform.of_pose(position, quaternion))
    if not differs(config):
        return FixedFrame()
    if buffer is None:
        raise ValueError(problem(config, "", tf2=False))
    return TfFrame(buffer, config.command_frame, config.base_frame)


def _transform_problem(values: Sequence[float]) -> str | None:
    if len(values) != 6 or not all(math.isfinite(v) for v in values):
        return (
            f"command_frame_transform is {list(values)}; expected 6 finite values (x, y, z in "
            "m, roll, pitch, yaw in rad) or [] to look it up with tf2"
        )
    return None
