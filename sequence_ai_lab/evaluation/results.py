"""results.json: the evaluation's settings and every trial, rewritten after each trial so a
killed evaluation continues where it stopped (`--out` again with the same settings)."""

from __future__ import annotations

import json
import math
import os
from collections.abc import Mapping
from dataclasses import MISSING, asdict, dataclass, fields
from pathlib import Path

RESULTS_FILE = "results.json"
# A wire format tag: written when the trial loop lived in the node, kept so old results read.
FORMAT = "sequence_ai_ros.evaluation/1"
# Settings that make two runs the same evaluation (a resumed run must match them).
IDENTITY = ("task", "arms", "seeds", "order_seed", "perturb", "judge", "planner")


class ResultsError(RuntimeError):
    """A results file that cannot be read or continued; the message says why."""


@dataclass
class TrialResult:
    """One trial as it ended: judged success and why, and what the run looked like.

    Measurements that a trial did not produce (no motion, no episode) are NaN; a trial that
    faulted is a failure whose reason starts with "fault:".
    """

    index: int
    arm: str
    condition: str
    time_mode: str
    seed: int
    success: bool
    reason: str
    judge: str
    time_to_success_s: float = math.nan  # world seconds from the trial's start to success
    episode: str = ""  # its last goal's episode file
    goals: int = 0  # act goals it sent (one, or a planned task's steps), each its own episode
    act_reason: str = ""  # the act result's reason ("" when no goal ran)
    elapsed_s: float = math.nan
    underruns: int = 0
    commands: int = 0
    requests: int = 0
    latency_p50_s: float = math.nan
    latency_p95_s: float = math.nan
    latency_p99_s: float = math.nan
    stale_action_ratio: float = math.nan
    effective_control_hz: float = math.nan
    nominal_control_hz: float = math.nan
    started_utc: str = ""
    # A VLM judge's second opinion (None: no judge, or its answer held no verdict).
    vlm_success: bool | None = None
    vlm_reason: str = ""

    @property
    def faulted(self) -> bool:
        return self.reason.startswith("fault:")

    def to_json(self) -> dict[str, object]:
        # JSON has no NaN: a missing measurement is null.
        return {k: (None if isinstance(v, float) and not math.isfinite(v) else v)
                for k, v in asdict(self).items()}

    @classmethod
    def from_json(cls, values: Mapping[str, object]) -> TrialResult:
        known = {f.name: f for f in fields(cls)}
        unknown = sorted(set(values) - set(known))
        if unknown:
            raise ResultsError(f"trial {values.get('index')}: unknown fields {unknown}")
        missing = sorted(f.name for f in known.values() if f.name not in values
                         and f.default is MISSING)
        if missing:
            raise ResultsError(f"trial {values.get('index')}: missing fields {missing}")
        given = {k: (math.nan if v is None and known[k].type == "float" else v)
                 for k, v in values.items()}
        return cls(**given)  # type: ignore[arg-type]


# The JSON type each trial field must have (a float field also takes an int).
_FIELD_TYPES: dict[str, type | tuple[type, ...]] = {
    "index": int, "arm": str, "condition": str, "time_mode": str, "seed": int, "success": bool,
    "reason": str, "judge": str, "time_to_success_s": (int, float), "episode": str, "goals": int,
    "act_reason": str, "elapsed_s": (int, float), "underruns": int, "commands": int,
    "requests": int, "latency_p50_s": (int, float), "latency_p95_s": (int, float),
    "latency_p99_s": (int, float), "stale_action_ratio": (int, float),
    "effective_control_hz": (int, float), "nominal_control_hz": (int, float),
    "started_utc": str, "vlm_success": (bool, type(None)), "vlm_reason": str,
}


@dataclass
class Results:
    """The settings of one evaluation, its provenance and its trials, in run order."""

    settings: dict[str, object]
    provenance: dict[str, object]
    trials: list[TrialResult]

    def done(self) -> set[tuple[str, int]]:
        """(arm, seed) of every trial already recorded."""
        return {(t.arm, t.seed) for t in self.trials}

    def of_arm(self, arm: str) -> list[TrialResult]:
        return [t for t in self.trials if t.arm == arm]


def load(directory: Path) -> Results | None:
    """The results file of `directory`, or None when there is none yet."""
    path = directory / RESULTS_FILE
    if not path.exists():
        return None
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise ResultsError(f"{path}: cannot be read as JSON ({exc})") from None
    if not isinstance(data, dict):
        raise ResultsError(f"{path}: a JSON {type(data).__name__}; expected an object "
                           f"{{format, settings, provenance, trials}}")
    if data.get("format") != FORMAT:
        raise ResultsError(f"{path}: format {data.get('format')!r}; expected {FORMAT!r}")
    settings, provenance, trials = (data.get(k) for k in ("settings", "provenance", "trials"))
    if not isinstance(settings, dict):
        raise ResultsError(f"{path}: settings {_shape(settings)}; expected an object")
    if not isinstance(provenance, (dict, type(None))):
        raise ResultsError(f"{path}: provenance {_shape(provenance)}; expected an object")
    if not isinstance(trials, list):
        raise ResultsError(f"{path}: trials {_shape(trials)}; expected a list")
    return Results(dict(settings), dict(provenance or {}),
                   [_trial(path, number, t) for number, t in enumerate(trials)])


def _shape(value: object) -> str:
    return "missing" if value is None else f"is a {type(value).__name__}"


def _trial(path: Path, number: int, values: object) -> TrialResult:
    """Trial `number` of the file, every field of the type TrialResult declares."""
    if not isinstance(values, dict):
        raise ResultsError(f"{path}: trial {number} {_shape(values)}; expected an object")
    trial = TrialResult.from_json(values)
    for name, kind in _FIELD_TYPES.items():
        value = getattr(trial, name)
        if not isinstance(value, kind) or (kind is int and isinstance(value, bool)):
            raise ResultsError(f"{path}: trial {number} field {name} = {value!r}; expected "
                               f"{' or '.join(k.__name__ for k in _as_tuple(kind))}")
    return trial


def _as_tuple(kind: type | tuple[type, ...]) -> tuple[type, ...]:
    return kind if isinstance(kind, tuple) else (kind,)


def check_same(previous: Results, settings: Mapping[str, object], path: Path) -> None:
    """A resumed evaluation must be the one in the file: same task, arms, seeds, order."""
    for key in IDENTITY:
        if previous.settings.get(key) != settings.get(key):
            raise ResultsError(
                f"{path}: {key} was {previous.settings.get(key)!r}, now {settings.get(key)!r}; "
                "expected the same evaluation to continue (or another --out)"
            )


def save(directory: Path, results: Results) -> Path:
    """Write the results file whole: to a temporary file, then renamed over the old one, so a
    kill leaves either the previous file or the new one, never half of one."""
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / RESULTS_FILE
    temporary = path.with_suffix(".json.partial")
    data = {
        "format": FORMAT,
        "settings": results.settings,
        "provenance": results.provenance,
        "trials": [t.to_json() for t in results.trials],
    }
    with temporary.open("w", encoding="utf-8") as handle:
        handle.write(json.dumps(data, indent=2, allow_nan=False) + "\n")
        handle.flush()
        # On disk before the rename: a power cut leaves the old file or the new, never empty.
        os.fsync(handle.fileno())
    os.replace(temporary, path)
    return path

