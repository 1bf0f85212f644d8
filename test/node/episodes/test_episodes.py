"""Episodes: with `record: goals` every `act` goal, however it ends, leaves one MCAP file that
the `mcap` and `rosbags` readers open, whose messages deserialise with the ROS classes, whose
summary matches the goal's result, and that holds no secret."""

from __future__ import annotations

import math
import re
from pathlib import Path
from typing import Any

import pytest
from action_msgs.msg import GoalStatus
from lifecycle_msgs.msg import Transition
from rclpy.qos import qos_profile_sensor_data
from sensor_msgs.msg import JointState
from support.node_harness import TRAJECTORY_TOPIC, ArmHarness, node_parameters
from support.sim_process import simulator
from support.waiting import wait_for

from sequence_ai_lab.episodes import reader

pytest.importorskip("rosbags")

INSTRUCTION = "pick up the cup"
STATUS_NAMES = {
    GoalStatus.STATUS_SUCCEEDED: "succeeded",
    GoalStatus.STATUS_ABORTED: "aborted",
    GoalStatus.STATUS_CANCELED: "canceled",
}


def _recording(ros_system: Any, gateway: Any, key_file: str, folder: Path,
               **changes: Any) -> tuple[Any, ArmHarness]:
    return ros_system(**node_parameters(
        gateway.url, key_file, record="goals", record_dir=str(folder), **changes
    ))


def _files(folder: Path) -> list[Path]:
    return reader.episode_files(folder)


def _check_file(path: Path, key: str, status: int, result: Any) -> reader.EpisodeFile:
    """Opens with both readers, every message deserialises, no key, summary = result."""
    from mcap.reader import make_reader
    from rosbags.highlevel import AnyReader

    data = path.read_bytes()
    assert key.encode() not in data, "the API key is in the episode file"
    with open(path, "rb") as stream:
        mcap_reader = make_reader(stream)
        summary = mcap_reader.get_summary()
        assert summary is not None and summary.statistics is not None
        assert all(s.encoding == "ros2msg" for s in summary.schemas.values())
        assert all(c.message_encoding == "cdr" for c in summary.channels.values())
        names = [m.name for m in mcap_reader.iter_metadata()]
        assert "rosbag2" in names
    with AnyReader([path]) as bag:
        count = 0
        for connection, _, raw in bag.messages():
            bag.deserialize(raw, connection.msgtype)
            count += 1
    episode = reader.read(path)
    assert not episode.cut
    assert len(episode.messages) == count == int(episode.summary["messages"])
    assert episode.summary["dropped"] == "0"
    expected = {
        "status": STATUS_NAMES[status], "reason": result.reason,
        "actions": str(result.actions), "chunks": str(result.chunks),
        "underruns": str(result.underruns),
        "stopped_early": str(result.stopped_early).lower(),
    }
    assert {k: episode.summary[k] for k in expected} == expected
    recorded = episode.on("result")
    assert len(recorded) == 1 and _fields(recorded[0].message) == _fields(result)
    assert episode.on("goal")[0].message.instruction == episode.instruction
    assert "api_key" not in episode.episode["parameters"].lower().replace("api_key_file", "")
    return episode


def _stamp_ns(stamp: Any) -> int:
    return stamp.sec * 1_000_000_000 + stamp.nanosec


def _fields(message: Any) -> dict[str, Any]:
    """A message's fields, NaN as a string (NaN != NaN)."""
    values = {name: getattr(message, name) for name in message.get_fields_and_field_types()}
    return {k: "nan" if isinstance(v, float) and math.isnan(v) else v for k, v in values.items()}


def _closed(path: Path) -> bool:
    try:
        return not reader.read(path).cut
    except reader.EpisodeError:
        return False  # its first records only, so far


def _one_file(folder: Path, before: int = 0) -> Path:
    files = _files(folder)
    assert len(files) == before + 1, files
    # Closed on its writer thread after the result: the goal's end does not wait for the disk.
    wait_for(lambda: _closed(files[-1]), what="the episode file's close")
    return files[-1]


def test_a_completed_goal_records_what_was_sent_received_and_commanded(
    ros_system: Any, gateway: Any, key_file: str, tmp_path: Path
) -> None:
    _, arm = _recording(ros_system, gateway, key_file, tmp_path)
    arm.configure_and_activate()
    handle, _ = arm.send_goal(INSTRUCTION, max_seconds=30.0, max_actions=30)
    status, result = arm.result(handle)
    assert status == GoalStatus.STATUS_SUCCEEDED, result.message

    path = _one_file(tmp_path)
    episode = _check_file(path, gateway.api_key, status, result)
    # Its writer thread, once the file is closed, names it in /diagnostics.
    wait_for(lambda: (v := arm.node_status()) and v["recording"] == f"last {path}",
             what="the closed episode in /diagnostics")
    assert episode.model == "sim-droid-reach" and episode.instruction == INSTRUCTION
    images = episode.on("observation/exterior_1")
    assert images and all(m.message.format == "jpeg" for m in images)
    # The bytes the model saw: a JPEG, not a re-encode of the camera frame.
    assert bytes(images[0].message.data[:2]) == b"\xff\xd8"
    assert len(episode.on("observation/wrist_left")) == len(images)
    assert len(episode.on("observation/state")) == len(images)
    chunks = episode.on("chunk")
    assert len(chunks) == result.chunks
    infos = [m.message for m in episode.on("chunk/info")]
    installed = [i for i in infos if i.message == "installed"]
    assert len(installed) == result.chunks
    assert all({kv.key for kv in i.values} >= {"request_id", "latency_s", "observation",
                                                "sequence"} for i in installed)
    # Every answer the loop did not install (the result's `discarded`) is recorded too, from
    # the run's event stream.
    unplayed = [i for i in infos if i.message in ("discarded", "refused")]
    recorded = sum(int(episode.summary[k]) for k in ("recorded_discarded",
                                                      "recorded_chunks_refused"))
    assert len(unplayed) == result.discarded == recorded
    assert len(infos) == len(installed) + len(unplayed)
    events = [m.message.name for m in episode.on("event")]
    assert events.count("run_ended") == 1
    # Every step the arm got, and the hold at the end, as the controller got them.
    commands = episode.on("command")
    assert len(commands) >= result.actions + 1
    assert [list(m.message.data) for m in commands][-1] == list(arm.holds()[-1].values)
    assert episode.on("feedback") and episode.on("outcome")
    assert int(episode.summary["recorded_commands"]) == len(commands)
    # Every observation sent is answered by an installed chunk or listed as unanswered.
    unanswered = [m.message for m in episode.on("event") if m.message.name == "unanswered"]
    listed = {kv.key: kv.value for kv in unanswered[0].values}["count"] if unanswered else "0"
    assert int(listed) == int(episode.summary["recorded_unanswered"])
    assert len(images) == result.chunks + int(listed)
    assert episode.parameters()["record"] == "goals"


def test_a_chunk_mode_goal_records_each_trajectory_and_decimated_camera_frames(
    ros_system: Any, gateway: Any, key_file: str, tmp_path: Path
) -> None:
    folder = tmp_path / "episodes"
    node, arm = _recording(
        ros_system, gateway, key_file, folder, command_topic=TRAJECTORY_TOPIC,
        command_type="trajectory_msgs/msg/JointTrajectory", command_mode="chunk",
        record_cameras_hz=5.0,
    )
    # sim_robot plays the trajectories and is the cameras, in a process of its own
    # (support/sim_process.py says why); the test arm only listens.
    arm.publish_joints = False
    arm.paused_views.update(("exterior_1", "exterior_2", "wrist_left"))
    quiet_ns = arm.get_clock().now().nanoseconds
    states: list[JointState] = []
    arm.create_subscription(JointState, "joint_states", states.append, qos_profile_sensor_data)

    def from_the_simulator() -> bool:
        return any(_stamp_ns(m.header.stamp) > quiet_ns for m in list(states))

    feed = {"views": "[exterior_1,wrist_left]", "camera_frames": "premade",
            "image_width": "320", "image_height": "180"}
    with simulator("sequence_ai_lab.robots.sim_robot.robot", node.get_namespace(),
                   tmp_path / "sim_robot.log", feed):
        wait_for(from_the_simulator, what="sim_robot's joint states")
        arm.configure_and_activate()
        handle, _ = arm.send_goal(INSTRUCTION, max_seconds=30.0, max_actions=30)
        status, result = arm.result(handle)
    # The recording is under test. On a loaded machine the arm may fall behind its trajectory
    # and the next chunk's seam be refused: then the file holds that refusal too.
    assert result.reason in ("completed", "validate"), result.message
    episode = _check_file(_one_file(folder), gateway.api_key, status, result)
    if result.reason == "validate":
        assert episode.on("refusal"), "the refusal is not in the episode"
    sent = [m.message for m in episode.on("command")]
    assert sent and all(len(t.points) >= 1 for t in sent)
    # The raw frames as the cameras published them, at most 5 a second of goal.
    raw = episode.on("camera/exterior_1")
    assert raw and all(m.type_name == "sensor_msgs/msg/Image" for m in raw)
    assert len(raw) <= 5 * result.elapsed_s + 1
    assert raw[0].message.width > 0 and len(raw[0].message.data) > 0


def test_cancel_preempt_service_error_and_refusal_each_leave_one_matching_file(
    ros_system: Any, gateway: Any, key_file: str, tmp_path: Path
) -> None:
    _, arm = _recording(ros_system, gateway, key_file, tmp_path)
    arm.configure_and_activate()
    key = gateway.api_key

    handle, _ = arm.send_goal(INSTRUCTION, max_seconds=30.0)
    before = arm.command_count()
    wait_for(lambda: arm.command_count() >= before + 5, what="the goal's first commands")
    handle.cancel()
    status, result = arm.result(handle)
    assert status == GoalStatus.STATUS_CANCELED, result.message
    _check_file(_one_file(tmp_path), key, status, result)

    first, _ = arm.send_goal(INSTRUCTION, max_seconds=30.0)
    before = arm.command_count()
    wait_for(lambda: arm.command_count() >= before + 5, what="the first goal's commands")
    second, _ = arm.send_goal("put the cup in the sink", max_seconds=30.0, max_actions=10)
    results = [arm.result(first), arm.result(second)]
    assert results[0][1].reason == "preempted" and results[1][1].reason == "completed"
    files = _files(tmp_path)
    assert len(files) == 3
    by_instruction = {reader.read(f, messages=False).instruction: f for f in files[1:]}
    _check_file(by_instruction[INSTRUCTION], key, *results[0])
    _check_file(by_instruction["put the cup in the sink"], key, *results[1])

    handle, _ = arm.send_goal(INSTRUCTION, max_seconds=30.0)
    before = arm.command_count()
    wait_for(lambda: arm.command_count() >= before + 5, what="the goal's first commands")
    gateway.inject("status", status=401)
    status, result = arm.result(handle)
    assert result.reason == "raised:AuthError", result.message
    _check_file(_one_file(tmp_path, 3), key, status, result)

    # A step the gate refuses ends the goal; the refusal and its reason are in the file.
    arm.set_parameters(max_step=0.001)
    handle, _ = arm.send_goal(INSTRUCTION, max_seconds=30.0)
    status, result = arm.result(handle)
    assert result.reason == "validate", result.message
    episode = _check_file(_one_file(tmp_path, 4), key, status, result)
    refusals = episode.on("refusal")
    assert refusals and "max_step" in refusals[0].message.message
    assert int(episode.summary["recorded_refusals"]) == len(refusals)


def test_a_stale_goal_and_a_shutdown_each_leave_one_file(
    ros_system: Any, gateway: Any, key_file: str, tmp_path: Path
) -> None:
    node, arm = _recording(ros_system, gateway, key_file, tmp_path, input_wait_s=0.5)
    arm.paused_views.add("wrist_left")
    assert arm.transition(Transition.TRANSITION_CONFIGURE), arm.log_text()
    assert arm.transition(Transition.TRANSITION_ACTIVATE)
    wait_for(lambda: (v := arm.node_status()) and v["ready"] == "true", what="a ready model")
    handle, _ = arm.send_goal(INSTRUCTION, max_seconds=30.0)
    status, result = arm.result(handle)
    assert result.reason == "stale_input", result.message
    _check_file(_one_file(tmp_path), gateway.api_key, status, result)

    arm.paused_views.discard("wrist_left")
    handle, _ = arm.send_goal(INSTRUCTION, max_seconds=30.0)
    before = arm.command_count()
    wait_for(lambda: arm.command_count() >= before + 5, what="the goal's first commands")
    node.shut_down_now()
    status, result = arm.result(handle)
    assert status == GoalStatus.STATUS_ABORTED and "shut down" in result.message
    _check_file(_one_file(tmp_path, 1), gateway.api_key, status, result)


def test_an_unwritable_record_dir_logs_one_error_flags_diagnostics_and_the_goal_goes_on(
    ros_system: Any, gateway: Any, key_file: str, tmp_path: Path
) -> None:
    blocker = tmp_path / "not-a-folder"
    blocker.write_text("a file where the folder should be", encoding="utf-8")
    _, arm = _recording(ros_system, gateway, key_file, blocker / "episodes")
    arm.configure_and_activate()
    handle, _ = arm.send_goal(INSTRUCTION, max_seconds=30.0, max_actions=10)
    status, result = arm.result(handle)
    assert (status, result.reason) == (GoalStatus.STATUS_SUCCEEDED, "completed"), result.message
    assert arm.log_text().count("recording stopped") == 1, arm.log_text()
    wait_for(lambda: (v := arm.node_status()) and v["recording"].startswith("error:"),
             what="the recording error in /diagnostics")


def test_the_tools_list_show_plot_write_frames_and_convert_a_recorded_goal(
    ros_system: Any, gateway: Any, key_file: str, tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    from sequence_ai_lab.episodes.export import episode_frames
    from sequence_ai_lab.episodes.tools import main

    folder = tmp_path / "episodes"
    _, arm = _recording(ros_system, gateway, key_file, folder)
    arm.configure_and_activate()
    handle, _ = arm.send_goal(INSTRUCTION, max_seconds=30.0, max_actions=20)
    status, result = arm.result(handle)
    assert status == GoalStatus.STATUS_SUCCEEDED, result.message
    path = _one_file(folder)

    assert main(["list", str(folder)]) == 0
    line = capsys.readouterr().out.strip()
    assert INSTRUCTION in line and "succeeded completed" in line and path.name in line
    assert f"chunks {result.chunks:>3}" in line and "refusals  0" in line
    assert main(["show", str(path)]) == 0
    shown = capsys.readouterr().out
    assert "latency      p50" in shown
    assert re.search(rf"\+\s+\d+\.\d{{3}} s  {re.escape(repr(INSTRUCTION))}", shown), shown
    assert f"actions      {result.actions}" in shown and repr(INSTRUCTION) in shown

    assert main(["plot", str(path), "--out", str(tmp_path / "plot.png")]) == 0
    capsys.readouterr()
    from sequence_ai_lab.episodes.tools import plot_series

    drawn = plot_series(reader.read(path))
    assert len(drawn.holds) == 1 and len(drawn.chunks) == result.chunks
    assert len(drawn.target_t) == len(reader.read(path).on("command"))
    assert (tmp_path / "plot.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert main(["frames", str(path), "--out", str(tmp_path / "frames")]) == 0
    jpegs = sorted((tmp_path / "frames").glob("*.jpg"))
    episode = reader.read(path)
    assert len(jpegs) == 2 * len(episode.on("observation/exterior_1"))
    assert all(j.read_bytes()[:2] == b"\xff\xd8" for j in jpegs)

    # The export's conversion, without lerobot: one frame per row played, the rows as the
    # arm got them (arm targets, then the gripper), the state the model saw last.
    frames = episode_frames(episode)
    assert len(frames) == result.actions
    played = [list(m.message.data) for m in episode.on("command")][: result.actions]
    assert [a[:7] for a in frames.actions] == played
    assert {(len(a), len(s)) for a, s in zip(frames.actions, frames.states)} == {(8, 8)}
    assert set(frames.tasks) == {INSTRUCTION} and frames.fps == 15.0
    assert set(frames.images) == {"exterior_1", "wrist_left"}
    assert all(len(v) == len(frames) for v in frames.images.values())
    assert frames.timestamps == sorted(frames.timestamps) and frames.timestamps[0] == 0.0
