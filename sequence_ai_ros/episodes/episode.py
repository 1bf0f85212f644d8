"""One goal's recording: the domain's events turned into ROS messages on the episode's topics,
and the summary written when the goal ends."""

from __future__ import annotations

import array
import base64
import dataclasses
import enum
import math
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING

from builtin_interfaces.msg import Duration, Time
from diagnostic_msgs.msg import DiagnosticStatus, KeyValue
from sensor_msgs.msg import CompressedImage, JointState
from std_msgs.msg import Float64MultiArray, String
from trajectory_msgs.msg import JointTrajectory, JointTrajectoryPoint

import sequence_ai
from sequence_ai_interfaces.action import Act
from sequence_ai_ros.episodes.files import SUMMARY_RECORD

if TYPE_CHECKING:
    from sequence_ai_ros.episodes.writer import EpisodeWriter, WriterStats

# Topics under the node's namespace and name; docs/recording.md lists what each carries.
OBSERVATION = "observation"
STATE = "observation/state"
# An ee model's end-effector pose as sent (outside observation/: those are the views).
EE_POSE = "end_effector_pose"
OBSERVATION_INFO = "observation/info"
CHUNK = "chunk"
CHUNK_INFO = "chunk/info"
COMMAND = "command"
GRIPPER_COMMAND = "command/gripper"
REFUSAL = "refusal"
EVENT = "event"
GOAL = "goal"
INSTRUCTION = "instruction"
FEEDBACK = "feedback"
RESULT = "result"
OUTCOME = "outcome"


class Disposition(str, enum.Enum):
    """What became of a chunk that arrived (the client's events say which)."""

    INSTALLED = "installed"
    # Overtaken by a newer answer: never played.
    DISCARDED = "discarded"
    # It could not be played and brought to rest by max_seconds: not installed.
    REFUSED = "refused"


def stamp(ns: int) -> Time:
    return Time(sec=ns // 1_000_000_000, nanosec=ns % 1_000_000_000)


def _status(name: str, message: str, values: Mapping[str, object], warn: bool = False) -> (
    DiagnosticStatus
):
    return DiagnosticStatus(
        level=DiagnosticStatus.WARN if warn else DiagnosticStatus.OK,
        name=name,
        message=message,
        values=[KeyValue(key=k, value=_text(v)) for k, v in values.items()],
    )


def _text(value: object) -> str:
    if isinstance(value, float):
        return "nan" if math.isnan(value) else repr(value)
    if isinstance(value, enum.Enum):
        return str(value.value)
    return "" if value is None else str(value)


class Episode:
    """The open file of one goal. Safe from any thread: the counters and the observation
    numbers are guarded by `_lock`; the writer queues without blocking."""

    def __init__(
        self,
        writer: EpisodeWriter,
        *,
        prefix: str,
        state_names: Sequence[str],
        period_s: float,
    ) -> None:
        self.writer = writer
        # The catalogue's control period: a chunk's points are timed by it, not by the rate
        # the response claims (that one is kept in chunk/info).
        self._period_ns = round(period_s * 1e9)
        self._prefix = prefix.rstrip("/")
        self._state_names = list(state_names)
        # Lock order: a leaf (nothing is taken or queued under it).
        self._lock = threading.Lock()
        # (number, capture time) by the identity of the observation object the client sent.
        self._observations: dict[int, tuple[int, int]] = {}
        # The numbers of the observations whose chunk was installed.
        self._answered: set[int] = set()
        self._instruction = ""
        self._counts = {"observations": 0, "chunks": 0, "discarded": 0, "chunks_refused": 0,
                        "refusals": 0, "underruns": 0, "holds": 0, "commands": 0}

    def put(self, topic: str, message: object, ns: int | None = None) -> None:
        self.writer.put(f"{self._prefix}/{topic}", message, ns)

    def counts(self) -> dict[str, int]:
        with self._lock:
            return dict(self._counts)

    def _count(self, name: str) -> int:
        with self._lock:
            self._counts[name] += 1
            return self._counts[name]

    # ----- the events -----

    def goal(self, goal: Act.Goal) -> None:
        self.put(GOAL, goal)
        self.instruction(goal.instruction)

    def instruction(self, text: str) -> None:
        with self._lock:
            if text == self._instruction:
                return
            self._instruction = text
        self.put(INSTRUCTION, String(data=text))

    def observation(self, observation: sequence_ai.Observation, captured_ns: int) -> None:
        """The observation as sent: each view's JPEG bytes as they went, the state, its number."""
        with self._lock:
            self._counts["observations"] += 1
            number = self._counts["observations"]
            self._observations[id(observation)] = (number, captured_ns)
        self.instruction(observation.instruction)
        when = stamp(captured_ns)
        for frame in observation.images:
            # An array('B') is taken as it is; bytes would be checked value by value.
            jpeg = array.array("B", base64.b64decode(frame.data))
            image = CompressedImage(format="jpeg", data=jpeg)
            image.header.stamp, image.header.frame_id = when, frame.view
            self.put(f"{OBSERVATION}/{frame.view}", image, captured_ns)
        proprio = observation.proprioception
        positions = list(proprio.joint_positions) + list(proprio.gripper or [])
        state = JointState(name=self._state_names[: len(positions)], position=positions)
        state.header.stamp = when
        self.put(STATE, state, captured_ns)
        if proprio.end_effector_pose is not None:
            pose = Float64MultiArray(data=[float(v) for v in proprio.end_effector_pose])
            self.put(EE_POSE, pose, captured_ns)
        self.put(OBSERVATION_INFO, _status("observation", str(number), {
            "observation": number, "views": ",".join(observation.views),
            "image_bytes": observation.image_bytes,
        }), captured_ns)

    def chunk(self, prediction: sequence_ai.Prediction, sequence: int, arrived_ns: int) -> int:
        """A chunk installed: its rows as a trajectory stamped with its observation's
        capture, and when it went, came and how long it took. Its number in the episode;
        `sequence` is the client's number of its observation (from 0)."""
        number = self._count("chunks")
        with self._lock:
            observation, captured_ns = self._observations.get(
                id(prediction.observation), (0, arrived_ns)
            )
            self._answered.add(observation)
        chunk = prediction.action_chunk
        trajectory = JointTrajectory(joint_names=self._state_names[: chunk.action_dim])
        trajectory.header.stamp = stamp(captured_ns)
        period_ns = self._period_ns
        trajectory.points = [
            JointTrajectoryPoint(
                positions=[float(v) for v in row],
                time_from_start=Duration(sec=(k * period_ns) // 1_000_000_000,
                                         nanosec=(k * period_ns) % 1_000_000_000),
            )
            for k, row in enumerate(chunk.steps)
        ]
        self.put(CHUNK, trajectory, arrived_ns)
        # Latency as the node lived it: from the observation's capture (the request left
        # right after its encoding) to the chunk's arrival at the loop; the service's own
        # time to first action beside it.
        ttfa = prediction.perf.get("ttfa_ms")
        self.put(CHUNK_INFO, _status("chunk", Disposition.INSTALLED.value, {
            "chunk": number, "observation": observation, "sequence": sequence,
            "request_id": prediction.id,
            "model": prediction.model, "captured_ns": captured_ns, "arrived_ns": arrived_ns,
            "latency_s": (arrived_ns - captured_ns) / 1e9,
            "service_ttfa_s": float(ttfa) / 1000.0 if isinstance(ttfa, (int, float)) else None,
            "action_space": chunk.action_space, "control_frequency_hz": chunk.control_frequency_hz,
            "covers_seconds": chunk.covers_seconds, "rows": len(chunk.steps),
        }), arrived_ns)
        return number

    def unplayed(self, sequence: int, disposition: Disposition, reason: str, ns: int) -> None:
        """An answer the client did not install (discarded or refused): its observation's
        client number and why; its rows are not in the event."""
        self._count("discarded" if disposition is Disposition.DISCARDED else "chunks_refused")
        self.put(CHUNK_INFO, _status("chunk", disposition.value, {
            "sequence": sequence, "reason": reason,
        }, warn=disposition is Disposition.REFUSED), ns)

    def command(self, group: str, message: object) -> None:
        """A command the gate published: the very message the controller got."""
        if group == "arm":
            self._count("commands")
        self.put(COMMAND if group == "arm" else GRIPPER_COMMAND, message)

    def refusal(self, reason: str, chunk: int | None) -> None:
        number = self._count("refusals")
        self.put(REFUSAL, _status("refusal", reason, {"refusal": number, "chunk": chunk},
                                  warn=True))

    def underrun(self, waited_s: float, ns: int) -> None:
        self._count("underruns")
        self.put(EVENT, _status("underrun", f"waited {waited_s:.3f} s", {"waited_s": waited_s},
                                warn=True), ns)

    def hold(self) -> None:
        self._count("holds")
        self.put(EVENT, _status("hold", "the arm is held", {}))

    def run_event(self, name: str, message: str, values: Mapping[str, object], ns: int,
                  warn: bool = False) -> None:
        """Another event of the run (its hold() call, its ending), as the client reported it."""
        self.put(EVENT, _status(name, message, values, warn=warn), ns)

    def feedback(self, feedback: Act.Feedback) -> None:
        self.put(FEEDBACK, feedback)

    def ended(self, result: Act.Result, outcome: sequence_ai.RunOutcome | None,
              status: str, on_closed: Callable[[WriterStats], None]) -> None:
        """The result and the run's figures, then the summary; the file is closed on the
        writer thread, which tells `on_closed` (nothing here waits for it)."""
        self.put(RESULT, result)
        if outcome is not None:
            figures = {f.name: getattr(outcome, f.name) for f in dataclasses.fields(outcome)}
            self.put(OUTCOME, _status("outcome", outcome.ending.value, figures))
        with self._lock:
            sent = self._counts["observations"]
            unanswered = [n for n in range(1, sent + 1) if n not in self._answered]
        if unanswered:
            # Their answers were discarded or refused (chunk/info has each), failed, or were
            # still in flight at the end.
            self.put(EVENT, _status("unanswered", f"{len(unanswered)} observations got no "
                                    "installed chunk", {
                                        "observations": ",".join(map(str, unanswered)),
                                        "count": len(unanswered)}))
        counts = self.counts() | {"unanswered": len(unanswered)}

        def summary(stats: WriterStats) -> dict[str, dict[str, str]]:
            values: dict[str, object] = {
                "status": status, "reason": result.reason, "message": result.message,
                "stopped_early": str(result.stopped_early).lower(), "actions": result.actions,
                "chunks": result.chunks, "underruns": result.underruns,
                "elapsed_s": result.elapsed_s, "requests": result.requests,
                "discarded": result.discarded, **{f"recorded_{k}": v for k, v in counts.items()},
                "messages": stats.written, "dropped": stats.dropped, "end_ns": time.time_ns(),
            }
            return {SUMMARY_RECORD: {k: _text(v) for k, v in values.items()}}

        self.writer.finish(summary, on_closed)
