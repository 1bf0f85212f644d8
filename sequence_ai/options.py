"""Options as values: ``RunOptions`` (every option of one ``run()``/``act()``, checked once,
frozen) and ``Connection`` (where the service is, for every entry point).

The argument checks shared by ``connect``, ``predict`` and ``wait_until_ready`` live here
too, so every bad value gets the same kind of message: the field, the value, what was expected.
"""

from __future__ import annotations

import difflib
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Callable, Optional

from ._model.controllers import Controller, as_controller
from ._playback.playback import InstalledRows
from ._playback.seam import SeamLimits
from ._playback.speed import PlaybackSpeed, check_playback_speed
from ._run.status import PROGRESS_MODES, Progress, RunStatus
from ._transport.connection import Connection
from ._transport.transport import MAX_IN_FLIGHT
from .events import Observer, as_sink
from .types import Observation, Prediction

__all__ = [
    "RESERVED_BODY_FIELDS",
    "Connection",
    "RunOptions",
    "SeamLimits",
    "body_fields",
    "check_spelling",
    "check_max_in_flight",
    "positive_int",
    "positive_seconds",
    "run_options_of",
]

Row = list[float]
# Body keys a caller's **options may not overwrite.
RESERVED_BODY_FIELDS = ("model", "observation")


def positive_seconds(
    name: str,
    value: object,
    *,
    allow_none: bool,
    allow_zero: bool = False,
    unit: str = "seconds",
) -> None:
    """Durations and rates: finite, positive (or zero if allowed), or None if allowed."""
    if value is None and allow_none:
        return
    ok = (
        isinstance(value, (int, float))
        and not isinstance(value, bool)
        and math.isfinite(value)
        and (value >= 0 if allow_zero else value > 0)
    )
    if not ok:
        expected = f"a finite number of {unit}"
        expected += " >= 0" if allow_zero else " > 0"
        if allow_none:
            expected += " or None"
        raise ValueError(f"{name} is {value!r}; expected {expected}")


def positive_int(name: str, value: object) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
        raise ValueError(f"{name} is {value!r}; expected a positive integer")


def check_max_in_flight(name: str, value: object) -> int:
    """Requests a run may have in flight: an integer in 1..MAX_IN_FLIGHT."""
    if (
        isinstance(value, bool)
        or not isinstance(value, int)
        or not 1 <= value <= MAX_IN_FLIGHT
    ):
        raise ValueError(f"{name} is {value!r}; expected an integer from 1 to {MAX_IN_FLIGHT}")
    return value


def body_fields(options: Mapping[str, object]) -> Mapping[str, object]:
    """A caller's extra request-body fields: reserved keys refused, None values dropped."""
    for key in RESERVED_BODY_FIELDS:
        if key in options:
            raise ValueError(
                f"option {key!r} cannot be passed through: the Policy sets the request's {key}"
            )
    return MappingProxyType({key: value for key, value in options.items() if value is not None})


def check_spelling(options: Mapping[str, object], known: Iterable[str], method: str) -> None:
    """An extra keyword close to a known option is a typo (``smoth_seam=3``), not a request-body
    field: a TypeError naming the option it resembles. Other extra keywords stay allowed."""
    names = list(known)
    for key in options:
        close = difflib.get_close_matches(key, names, n=1, cutoff=0.8)
        if close:
            raise TypeError(
                f"{method}() got an unexpected keyword argument {key!r}; did you mean "
                f"{close[0]!r}? (other extra keywords go to the service as request-body fields)"
            )


def _callable(name: str, value: object, *, optional: bool) -> None:
    if value is None and optional:
        return
    if not callable(value):
        expected = "a callable or None" if optional else "a callable"
        raise TypeError(f"{name} is {value!r}; expected {expected}")


@dataclass(frozen=True)
class RunOptions:
    """One run's callbacks, bounds and choices; see ``Policy.run`` for what each means.

    ``policy.run(options=...)`` and ``policy.act(instruction, options=...)`` take it whole; the
    same fields as keywords are the convenience form. ``max_actions`` bounds ``run`` (needed
    there); ``act`` is bounded by ``max_seconds`` instead.
    """

    observe: Callable[[], Observation]
    act: Callable[[Row], object]
    max_actions: Optional[int] = None
    validate: Optional[Callable[[Row], object]] = None
    hold: Optional[Callable[[], object]] = None
    until: Optional[Callable[[], object]] = None
    on_chunk: Optional[Callable[[Prediction], object]] = None
    on_underrun: Optional[Callable[[float], object]] = None
    on_status: Optional[Callable[[RunStatus], object]] = None
    on_rows: Optional[Callable[[InstalledRows], object]] = None
    progress: Progress = "auto"
    prefetch: bool = True
    smooth_seam: int = 0
    # What a seam's fade keeps its rows within (None: smooth_seam alone decides).
    seam_limits: Optional[SeamLimits] = None
    max_seconds: Optional[float] = None
    # None: the Policy's startup_timeout_s from connect().
    startup_timeout_s: Optional[float] = None
    open_loop_horizon: Optional[int] = None
    controller: Controller = Controller.RAW
    # None: the Policy's from connect().
    max_in_flight: Optional[int] = None
    playback_speed: Optional[PlaybackSpeed] = None
    # Extra fields of every request body (the **options of run/act).
    body: Mapping[str, object] = field(default_factory=lambda: MappingProxyType({}))
    # Observers of the run's events (sequence_ai.events), called on a thread of their own.
    observers: Sequence[Observer] = ()

    def __post_init__(self) -> None:
        _callable("observe", self.observe, optional=False)
        _callable("act", self.act, optional=False)
        for name in (
            "validate", "hold", "until", "on_chunk", "on_underrun", "on_status", "on_rows"
        ):
            _callable(name, getattr(self, name), optional=True)
        if self.max_actions is not None:
            positive_int("max_actions", self.max_actions)
        if self.open_loop_horizon is not None:
            positive_int("open_loop_horizon", self.open_loop_horizon)
        seam = self.smooth_seam
        if isinstance(seam, bool) or not isinstance(seam, int) or seam < 0:
            raise ValueError(f"smooth_seam is {seam!r}; expected an integer >= 0")
        if self.seam_limits is not None and not isinstance(self.seam_limits, SeamLimits):
            raise TypeError(
                f"seam_limits is {self.seam_limits!r}; expected a sequence_ai.SeamLimits or None"
            )
        positive_seconds("max_seconds", self.max_seconds, allow_none=True)
        positive_seconds(
            "startup_timeout_s", self.startup_timeout_s, allow_none=True, allow_zero=True
        )
        object.__setattr__(self, "controller", as_controller(self.controller))
        if self.max_in_flight is not None:
            check_max_in_flight("max_in_flight", self.max_in_flight)
        if self.playback_speed is not None:
            object.__setattr__(
                self, "playback_speed", check_playback_speed("playback_speed", self.playback_speed)
            )
        if self.progress not in PROGRESS_MODES:
            raise ValueError(f"progress is {self.progress!r}; expected 'auto', True or False")
        # Normalised in place once; the instance is frozen from here on.
        object.__setattr__(self, "prefetch", bool(self.prefetch))
        check_spelling(self.body, _OPTION_NAMES, "run")
        object.__setattr__(self, "body", body_fields(self.body))
        if isinstance(self.observers, (str, bytes)) or not isinstance(self.observers, Sequence):
            raise TypeError(
                f"observers is {self.observers!r}; expected a list of callables or objects "
                "with an on_event(event) method"
            )
        for observer in self.observers:
            as_sink(observer)
        object.__setattr__(self, "observers", tuple(self.observers))


# What run()/act() take by name (the request body's fields are anything else).
_OPTION_NAMES = (
    *(name for name in RunOptions.__dataclass_fields__ if name != "body"), "call", "instruction"
)


def run_options_of(
    options: Optional[RunOptions],
    observe: Optional[Callable[[], Observation]],
    act: Optional[Callable[[Row], object]],
    keywords: Mapping[str, object],
    method: str,
) -> RunOptions:
    """The ``RunOptions`` of one ``run``/``act`` call: ``options=`` whole, or built from the
    callbacks and keywords (those named like a field are its options, the rest request-body
    fields) — never both."""
    if options is not None:
        if not isinstance(options, RunOptions):
            raise TypeError(f"options is {options!r}; expected a sequence_ai.RunOptions")
        given = [name for name, value in (("observe", observe), ("act", act)) if value is not None]
        given += list(keywords)
        if given:
            raise TypeError(
                f"{method}() got options= and {', '.join(given)}; pass them in the RunOptions "
                "(dataclasses.replace(options, ...) changes one)"
            )
        return options
    if observe is None or act is None:
        raise TypeError(f"{method}() needs observe and act (or options=RunOptions(...))")
    named = {key: value for key, value in keywords.items() if key in _FIELDS}
    body = {key: value for key, value in keywords.items() if key not in _FIELDS}
    return RunOptions(observe=observe, act=act, body=body, **named)  # type: ignore[arg-type]


# The fields a keyword may set by name ("body" is the request body itself: a keyword of that
# name is a body field, as any other unknown one).
_FIELDS = frozenset(
    name for name in RunOptions.__dataclass_fields__ if name not in ("observe", "act", "body")
)
