"""Shared helpers for the Policy / control-loop tests: a recording robot and observations.

Frames are a pre-encoded 64x36 (16:9) JPEG so these tests need no Pillow (Python 3.9 venv).
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from typing import Any, Callable, Optional

import sequence_ai
from sequence_ai import ImageFrame, Observation, Proprioception

FRAME_16_9 = (
    "/9j/4AAQSkZJRgABAQAAAQABAAD/2wBDAAMCAgMCAgMDAwMEAwMEBQgFBQQEBQoHBwYIDAoMDAsKCwsNDhIQDQ4R"
    "DgsLEBYQERMUFRUVDA8XGBYUGBIUFRT/2wBDAQMEBAUEBQkFBQkUDQsNFBQUFBQUFBQUFBQUFBQUFBQUFBQUFBQU"
    "FBQUFBQUFBQUFBQUFBQUFBQUFBQUFBQUFBT/wAARCAAkAEADASIAAhEBAxEB/8QAHwAAAQUBAQEBAQEAAAAAAAAA"
    "AAECAwQFBgcICQoL/8QAtRAAAgEDAwIEAwUFBAQAAAF9AQIDAAQRBRIhMUEGE1FhByJxFDKBkaEII0KxwRVS0fAk"
    "M2JyggkKFhcYGRolJicoKSo0NTY3ODk6Q0RFRkdISUpTVFVWV1hZWmNkZWZnaGlqc3R1dnd4eXqDhIWGh4iJipKT"
    "lJWWl5iZmqKjpKWmp6ipqrKztLW2t7i5usLDxMXGx8jJytLT1NXW19jZ2uHi4+Tl5ufo6erx8vP09fb3+Pn6/8QA"
    "HwEAAwEBAQEBAQEBAQAAAAAAAAECAwQFBgcICQoL/8QAtREAAgECBAQDBAcFBAQAAQJ3AAECAxEEBSExBhJBUQdh"
    "cRMiMoEIFEKRobHBCSMzUvAVYnLRChYkNOEl8RcYGRomJygpKjU2Nzg5OkNERUZHSElKU1RVVldYWVpjZGVmZ2hp"
    "anN0dXZ3eHl6goOEhYaHiImKkpOUlZaXmJmaoqOkpaanqKmqsrO0tba3uLm6wsPExcbHyMnK0tPU1dbX2Nna4uPk"
    "5ebn6Onq8vP09fb3+Pn6/9oADAMBAAIRAxEAPwDn6KKK/Qz48KKKKACiiigAooooAKKKKACiiigAooooAKKKKACi"
    "iigAooooAKKKKACiiigD/9k="
)

PI05 = "pi05-droid"
COSMOS = "cosmos3-edge-policy-droid"
# pi05's and cosmos3's action spaces moving to a target hashed from the instruction: for tests
# of the control loop, which need rows that move whatever the frames show (the simulated pi05
# and cosmos3 look at the frames, and hold where they see no cup).
REACH = "sim-droid-reach"
ABSOLUTE_REACH = "sim-droid-absolute-reach"
VIEWS = {
    PI05: ("exterior_1", "wrist_left"),
    COSMOS: ("exterior_1", "exterior_2", "wrist_left"),
    REACH: ("exterior_1", "wrist_left"),
    ABSOLUTE_REACH: ("exterior_1", "exterior_2", "wrist_left"),
}
# Generous bound for waiting on a condition: never a measurement, only a hang guard.
PATIENCE_S = 30.0


def make_observation(
    model: str = PI05,
    *,
    joints: Optional[Sequence[float]] = None,
    instruction: str = "pick up the cup",
) -> Observation:
    return Observation(
        images=[ImageFrame(view=view, data=FRAME_16_9) for view in VIEWS[model]],
        proprioception=Proprioception(
            joint_positions=list(joints if joints is not None else [0.0] * 7), gripper=[0.0]
        ),
        instruction=instruction,
    )


def open_policy(gateway: Any, model: str = PI05, **kwargs: Any) -> sequence_ai.Policy:
    return sequence_ai.connect(model, api_key=gateway.api_key, base_url=gateway.url, **kwargs)


class Robot:
    """Records what the loop did: observations (with the action count at the time), acts, holds.

    ``joints_for`` lets a test give each observation different joints (to tell requests apart).
    """

    def __init__(self, model: str = PI05, instruction: str = "pick up the cup") -> None:
        self.model = model
        self.instruction = instruction
        self.lock = threading.Lock()
        self.acts: list[list[float]] = []
        self.observed_at: list[int] = []
        self.observations: list[Observation] = []
        self.holds = 0
        self.statuses: list[str] = []
        self.chunks: list[sequence_ai.Prediction] = []
        self.installed_at: list[int] = []
        self.underruns: list[float] = []
        self.events: list[tuple[str, int]] = []
        # (acts handed out when reported, the report) for every on_rows call, and its thread.
        self.reports: list[tuple[int, sequence_ai.InstalledRows]] = []
        self.report_threads: set[str] = set()
        self.observe_threads: set[str] = set()
        self.act_threads: set[str] = set()

    def joints_for(self, n: int) -> list[float]:
        return [0.01 * n] * 7

    def observe(self) -> Observation:
        with self.lock:
            self.observe_threads.add(threading.current_thread().name)
            n = len(self.observations)
            self.observed_at.append(len(self.acts))
            self.events.append(("observe", len(self.acts)))
        obs = make_observation(self.model, joints=self.joints_for(n), instruction=self.instruction)
        with self.lock:
            self.observations.append(obs)
        return obs

    def act(self, row: list[float]) -> None:
        with self.lock:
            self.act_threads.add(threading.current_thread().name)
            self.acts.append(list(row))
            self.events.append(("act", len(self.acts)))

    def validate(self, row: list[float]) -> bool:
        return True

    def hold(self) -> None:
        with self.lock:
            self.holds += 1
            self.events.append(("hold", len(self.acts)))

    def on_status(self, state: str) -> None:
        self.statuses.append(state)

    def on_chunk(self, prediction: sequence_ai.Prediction) -> None:
        with self.lock:
            self.chunks.append(prediction)
            self.installed_at.append(len(self.acts))

    def after_first_chunk(
        self, action: Callable[[], object]
    ) -> Callable[[sequence_ai.Prediction], None]:
        """An on_chunk that records like ``on_chunk`` and runs ``action`` once the first chunk
        arrived (the usual moment to inject a fault: the run is moving when it hits)."""

        def on_chunk(prediction: sequence_ai.Prediction) -> None:
            self.on_chunk(prediction)
            if len(self.chunks) == 1:
                action()

        return on_chunk

    def rows_due(self, index: int) -> float:
        """Rows of chunk ``index`` whose time passed while it was in flight (skipped): where
        its first on_rows report starts (fractional if it arrived during a rest ramp)."""
        return next(report.start for _, report in self.reports if report.chunk == index + 1)

    def first_reports(self) -> list[sequence_ai.InstalledRows]:
        """The report each install made (a late driving thread adds re-timed ones)."""
        return [
            next(r for _, r in self.reports if r.chunk == k + 1) for k in range(len(self.chunks))
        ]

    def whole_row_installs(
        self,
    ) -> list[tuple[sequence_ai.Prediction, sequence_ai.InstalledRows, int]]:
        """(chunk, its first report, due row) of every chunk installed at a whole row: before
        its rest ramp, its report's rows are then the chunk's own rows from the due row."""
        found = []
        for k, prediction in enumerate(self.chunks):
            report = next(r for _, r in self.reports if r.chunk == k + 1)
            if report.start == int(report.start):
                found.append((prediction, report, int(report.start)))
        return found

    def on_underrun(self, waited_s: float) -> None:
        self.underruns.append(waited_s)

    def on_rows(self, rows: sequence_ai.InstalledRows) -> None:
        with self.lock:
            self.report_threads.add(threading.current_thread().name)
            self.reports.append((len(self.acts), rows))

    def played_as_reported(self) -> bool:
        """Every act is the next row of the last on_rows report, in order: what on_rows said
        would be played is what was played (until a newer report)."""
        for k, (at, report) in enumerate(self.reports):
            end = self.reports[k + 1][0] if k + 1 < len(self.reports) else len(self.acts)
            if self.acts[at:end] != report.rows[: end - at]:
                return False
        return not self.reports or self.reports[0][0] == 0

    def chunk_rows_played(self, index: int) -> list[list[float]]:
        """The acts played from install ``index`` (until the next install)."""
        at = self.installed_at[index]
        end = self.installed_at[index + 1] if index + 1 < len(self.installed_at) else None
        return self.acts[at:end]

    def callbacks(self) -> dict[str, Any]:
        """Every callback of run(), wired to this robot."""
        return {
            "validate": self.validate,
            "hold": self.hold,
            "on_status": self.on_status,
            "on_chunk": self.on_chunk,
            "on_underrun": self.on_underrun,
            "on_rows": self.on_rows,
            "progress": False,
        }


def fetch_threads() -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name.startswith("sequence_ai-fetch")]


class PerTestGateway:
    """A module-wide gateway as one test sees it: counters are relative to the test's start.

    Starting a gateway per test dominates the suite's run time; tests that only need warm
    models and consumable faults share one, each through its own PerTestGateway.
    """

    def __init__(self, handle: Any) -> None:
        self.handle = handle
        self.url = handle.url
        self.api_key = handle.api_key
        self._base = handle.counters()

    def inject(self, fault: str, **kwargs: Any) -> None:
        self.handle.inject(fault, **kwargs)

    def clear_faults(self) -> None:
        self.handle.clear_faults()

    def act_requests(self) -> int:
        return self.handle.counters()["requests"]["act"] - self._base["requests"]["act"]

    def connections(self) -> int:
        return self.handle.counters()["connections"] - self._base["connections"]
