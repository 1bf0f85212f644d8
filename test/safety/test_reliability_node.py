"""Reliability round 3, node side: the arm bounds the catalogue's rate and velocity commands,
an invalid ChangeState is refused while a goal runs on, a readiness check that never answers
is a WARN and leaks nothing over activate/deactivate cycles, long and invisible instructions
are rejected and never logged whole, a frame past any camera's size is a StaleObservation.
Configure against a catalogue that never answers is in test_reliability_process.py (main()'s
executor). The cells of a goal's run are in test_fault_matrix_node.py; the lifecycle cells
(LIFECYCLE_CELLS) are here, each recorded as a row of the fault matrix."""

from __future__ import annotations

import contextlib
import io
import math
import threading
from collections.abc import Iterator
from typing import Any

import pytest
from action_msgs.msg import GoalStatus
from diagnostic_msgs.msg import DiagnosticStatus
from lifecycle_msgs.msg import Transition
from lifecycle_msgs.srv import ChangeState
from sensor_msgs.msg import CompressedImage
from support.gateway_fixture import run_gateway
from support.node_harness import SAG, ArmHarness, node_parameters
from support.ros_support import NodeSystem, holds_until_next_goal, key_file_for
from support.safety_support import (
    LIFECYCLE_CELLS,
    LIFECYCLE_SIDE,
    MatrixRow,
    invalid_arm_commands,
    jumps,
    new_threads,
    record,
)
from support.waiting import wait_for

import sequence_ai
from sequence_ai_ros.goals.feedback import request_latency_s
from sequence_ai_ros.inputs.image_conversion import ImageConversionError, to_array
from sequence_ai_ros.node import SequenceAiNode
from sequence_ai_ros.params.spec_table import PANDA_LOWER, PANDA_UPPER
from sequence_ai_ros.safety import joint_rules

GOAL_S = 30.0
# The readiness watch's thread (sequence_ai_ros/bringup/readiness.py).
READINESS_THREAD = "sequence_ai-readiness"
NEXT_GOAL_ACTIONS = 16
MAX_STEP = 0.25


@pytest.fixture(scope="module")
def gw() -> Iterator[Any]:
    with run_gateway() as handle:
        yield handle


@contextlib.contextmanager
def _node(context: Any, gw: Any, directory: Any, prefix: str, **changes: Any
          ) -> Iterator[tuple[SequenceAiNode, ArmHarness, NodeSystem]]:
    nodes = NodeSystem(context, prefix)
    try:
        node, arm = nodes.start(**node_parameters(gw.url, key_file_for(directory, gw.api_key),
                                                  **changes))
        yield node, arm, nodes
    finally:
        nodes.close()
        gw.clear_faults()


class _Row:
    """One lifecycle cell's matrix row, from before its fault to the goal after it."""

    def __init__(self, name: str, arm: ArmHarness, nodes: NodeSystem) -> None:
        (cell,) = [c for c in LIFECYCLE_CELLS if c.name == name]
        self.row: MatrixRow = record(LIFECYCLE_SIDE, cell, cell.expected)
        self._arm, self._nodes = arm, nodes
        self._threads = threading.enumerate()
        self._start = arm.command_count()

    def settle(self, *, goal_ran: bool = False) -> None:
        """Fill in the row: steps published since the fault, holds (the cell's goal's, or every
        command when no goal may move), threads left, and a goal on the node made active; then
        assert it."""
        arm, row = self._arm, self._row_checked()
        ignore = self._nodes.pool_prefixes()
        wait_for(lambda: not new_threads(self._threads, ignore), what="the cell's threads to end")
        row.leaked = len(new_threads(self._threads, ignore))
        state = arm.state()
        if state == "unconfigured":
            arm.configure_and_activate()
        elif state == "inactive":
            arm.activate()
        next_start = arm.command_count()
        if not goal_ran:
            row.holds = next_start - self._start
        handle, _ = arm.send_goal("the goal after the fault", GOAL_S, NEXT_GOAL_ACTIONS)
        status, result = arm.result(handle)
        row.next_run = result.reason
        if goal_ran:
            row.holds = holds_until_next_goal(arm, self._start, next_start)
        assert row.observed == row.expected
        assert row.holds == row.expected_holds and row.invalid_steps == 0 and row.leaked == 0
        assert status == GoalStatus.STATUS_SUCCEEDED and row.next_run == "completed"

    def _row_checked(self) -> MatrixRow:
        commands = self._arm.commands_since(self._start)
        self.row.invalid_steps = (
            len(invalid_arm_commands([c.values for c in commands]))
            + len(jumps(commands, MAX_STEP, SAG))
        )
        return self.row


def _status(arm: ArmHarness) -> DiagnosticStatus | None:
    for array in reversed(list(arm.diagnostics)):
        for status in array.status:
            if status.name == arm.node_status_name:
                return status
    return None


# ----- 1. the rate bound -----


def test_a_catalogue_rate_above_max_control_hz_fails_configure_naming_both(
    safety_ros_context: Any, gw: Any, tmp_path: Any
) -> None:
    gw.inject("catalogue_fields", model="sim-droid-reach", fields={"control_hz": 1000.0}, count=10)
    with _node(safety_ros_context, gw, tmp_path, "rate_bound") as (_, arm, nodes):
        cell = _Row("catalogue_rate", arm, nodes)
        assert not arm.transition(Transition.TRANSITION_CONFIGURE)
        assert arm.state() == "unconfigured"
        text = wait_for(lambda: "max_control_hz" in arm.log_text() and arm.log_text(),
                        what="the configure error")
        assert "1000 Hz" in text and "max_control_hz = 50 Hz" in text
        cell.row.observed = "configure failed naming 1000 Hz and max_control_hz 50 Hz"
        gw.clear_faults()
        cell.settle()


def test_a_velocity_command_beyond_max_joint_velocity_is_refused() -> None:
    """The probe's 150 rad/s at a 1 ms period moved 0.15 rad a step, within max_step."""
    names = tuple(f"j{i}" for i in range(7))
    limits = joint_rules.SafetyLimits(names, tuple(PANDA_LOWER), tuple(PANDA_UPPER), 0.25, 2.175)
    measured = [0.0, 0.0, 0.0, -1.5, 0.0, 1.5, 0.0]
    problem = joint_rules.check_velocity_command([150.0] + [0.0] * 6, measured, 0.001, limits)
    assert problem is not None and "max_joint_velocity" in problem and "150.0000" in problem
    assert joint_rules.check_velocity_command([2.0] + [0.0] * 6, measured, 0.001, limits) is None


# ----- 4. a readiness check that never answers -----


def test_a_silent_readiness_check_is_a_warning_and_cycles_leak_nothing(
    safety_ros_context: Any, gw: Any, tmp_path: Any
) -> None:
    with _node(safety_ros_context, gw, tmp_path, "silent_ready") as (_, arm, nodes):
        assert arm.transition(Transition.TRANSITION_CONFIGURE), arm.log_text()
        cell = _Row("readiness_silent", arm, nodes)
        before = threading.enumerate()
        gw.inject("ready_stall", seconds=None, count=1000)
        warned = ""
        for cycle in range(3):
            assert arm.transition(Transition.TRANSITION_ACTIVATE)
            if cycle == 0:
                status = wait_for(
                    lambda: (s := _status(arm)) is not None and s.level == DiagnosticStatus.WARN
                    and "readiness" in s.message and s, what="a readiness WARN")
                assert "timed out" in status.message
                warned = "WARN timed out"
            assert arm.transition(Transition.TRANSITION_DEACTIVATE)
            # The check in flight ends with the deactivate, well before its own deadline.
            leaked = [t for t in new_threads(before, nodes.pool_prefixes())
                      if t.name == READINESS_THREAD]
            assert not leaked
        cell.row.observed = f"{warned}; no readiness thread left"
        gw.clear_faults()
        cell.settle()


# ----- 7. an invalid ChangeState -----


def test_an_unavailable_transition_is_refused_and_the_goal_gets_its_result(
    safety_ros_context: Any, gw: Any, tmp_path: Any
) -> None:
    with _node(safety_ros_context, gw, tmp_path, "bad_transition") as (node, arm, nodes):
        arm.configure_and_activate()
        client = arm.create_client(ChangeState, f"{arm.lifecycle.target}/change_state")
        cell = _Row("bad_transition", arm, nodes)
        handle, _ = arm.send_goal("keep going", GOAL_S, 45)
        assert handle.accepted
        refused = 0
        for transition in (Transition.TRANSITION_CLEANUP, 99, Transition.TRANSITION_CONFIGURE):
            future = client.call_async(ChangeState.Request(transition=Transition(id=transition)))
            reply = wait_for(lambda f=future: f.done() and f.result(), what="ChangeState reply")
            assert reply.success is False
            refused += 1
        status, result = arm.result(handle)
        assert status == GoalStatus.STATUS_SUCCEEDED and result.reason == "completed"
        cell.row.observed = f"{refused} refused; goal {result.reason}"
        assert arm.state() == "active"
        assert "ChangeState refused: transition id 99" in wait_for(arm.log_text, what="log")
        arm.destroy_client(client)
        cell.settle(goal_ran=True)


# ----- 9. instructions -----


def test_long_and_invisible_instructions_are_rejected_and_never_logged_whole(
    safety_ros_context: Any, gw: Any, tmp_path: Any
) -> None:
    long_text = "pick up the cup " * 4000  # 64 000 characters
    with _node(safety_ros_context, gw, tmp_path, "instructions") as (_, arm, nodes):
        arm.configure_and_activate()
        cell = _Row("long_instruction", arm, nodes)
        rejected = 0
        for text in (long_text, "\u200b\u2060\ufeff"):
            handle, _ = arm.send_goal(text, GOAL_S, 5)
            assert not handle.accepted
            rejected += 1
        wanted = f"instruction is {len(long_text)} characters long; expected at most " \
                 "max_instruction_chars = 1000"
        log = wait_for(lambda: wanted in arm.log_text() and "invisible" in arm.log_text()
                       and arm.log_text(), what="both rejections in the log")
        assert "pick up the cup " * 10 not in log
        cell.row.observed = f"{rejected} rejected; neither logged whole"
        cell.settle()
        accepted = "place the cup " * 70  # 980 characters: accepted, shown cut
        handle, _ = arm.send_goal(accepted, GOAL_S)
        assert handle.accepted

        def shown() -> list[str]:
            return [kv.value for array in list(arm.diagnostics) for s in array.status
                    for kv in s.values if kv.key == "goal" and "place the cup" in kv.value]

        try:
            values = wait_for(shown, what="the goal in /diagnostics")
        finally:
            handle.cancel()
        arm.result(handle)
        assert accepted not in arm.log_text()
        assert all(len(v) < 200 for v in values), values


# ----- smaller ones -----


def test_an_impossible_round_trip_is_ignored() -> None:
    chunk = {"steps": [[0.0] * 8], "robot": "r", "action_space": "joint_delta",
             "action_dim": 8, "control_frequency_hz": 15.0, "covers_seconds": 0.07}
    prediction = sequence_ai.Prediction.from_wire({
        "id": "a", "model": "m", "action_chunk": chunk,
        "perf": {"round_trip_ms": -40.0, "ttfa_ms": 120.0},
    })
    assert request_latency_s(prediction) == pytest.approx(0.12)
    prediction.perf = {"round_trip_ms": -1.0}
    assert request_latency_s(prediction) is None


def test_a_frame_past_any_camera_is_refused_before_decoding() -> None:
    from PIL import Image as PILImage

    encoded = io.BytesIO()
    PILImage.new("L", (6000, 6000)).save(encoded, format="PNG")
    msg = CompressedImage(format="png")
    msg.data = encoded.getvalue()
    with pytest.raises(ImageConversionError, match="36000000 pixels"):
        to_array(msg)
    assert math.isfinite(len(msg.data))


def test_a_frame_larger_than_the_cameras_deliver_is_refused_by_max_frame_pixels() -> None:
    """The bound is the configured camera size, not only the ceiling: a 1280x720 rig refuses a
    1281x720 frame undecoded and names the parameter; a frame of its size converts."""
    from PIL import Image as PILImage

    def png(width: int, height: int) -> CompressedImage:
        encoded = io.BytesIO()
        PILImage.new("L", (width, height)).save(encoded, format="PNG")
        msg = CompressedImage(format="png")
        msg.data = encoded.getvalue()
        return msg

    assert to_array(png(1280, 720), 1280 * 720).shape == (720, 1280, 3)
    with pytest.raises(ImageConversionError, match=r"1281x720.*max_frame_pixels"):
        to_array(png(1281, 720), 1280 * 720)


# ----- 8. a key with a newline -----


def test_a_two_line_key_file_fails_configure_without_the_key_anywhere(
    safety_ros_context: Any, gw: Any, tmp_path: Any
) -> None:
    first, second = "seq_live_firstline_8f2a91", "seq_live_secondline_77c0de"
    key_file = tmp_path / "two_lines.key"
    key_file.write_text(f"{first}\n{second}\n", encoding="utf-8")
    key_file.chmod(0o600)
    with _node(safety_ros_context, gw, tmp_path, "two_line_key",
               api_key_file=str(key_file)) as (_, arm, nodes):
        cell = _Row("two_line_key", arm, nodes)
        assert not arm.transition(Transition.TRANSITION_CONFIGURE)
        log = wait_for(lambda: "API key has a newline" in arm.log_text() and arm.log_text(),
                       what="the configure error")
        status = wait_for(lambda: (s := _status(arm)) is not None and "API key" in s.message
                          and s, what="the error in /diagnostics")
        shown = log + status.message + " ".join(kv.value for kv in status.values)
        for part in (first, second, "firstline", "secondline"):
            assert part not in shown
        cell.row.observed = "configure failed; the key nowhere"
        good = key_file_for(tmp_path, gw.api_key)
        assert all(r.successful for r in arm.set_parameters(api_key_file=good))
        cell.settle()


def test_the_refused_idle_hold_is_logged_once_while_its_age_grows(
    safety_ros_context: Any, gw: Any, tmp_path: Any
) -> None:
    warning = "the idle hold is not republished"
    with _node(safety_ros_context, gw, tmp_path, "idle_once") as (_, arm, _nodes):
        arm.configure_and_activate()
        handle, _ = arm.send_goal("one short goal", GOAL_S, 5)
        arm.result(handle)
        arm.publish_joints = False
        wait_for(lambda: warning in arm.log_text(), what="the refused idle hold")
        # Three more diagnostics (1 Hz, like the republish at hold_republish_hz 1.0): the
        # refusal was found again each second, with its age grown.
        seen = len(arm.diagnostics)
        wait_for(lambda: len(arm.diagnostics) >= seen + 3, what="three more seconds")
        assert arm.log_text().count(warning) == 1
