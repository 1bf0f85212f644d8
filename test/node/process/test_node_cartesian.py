"""End-effector models end to end through the node (issue 21): the node's config for each, the
local gateway, and a light Cartesian arm (support/ee_harness.py) that publishes `ee_pose` and
records the TwistStamped / PoseStamped commands — every command through the gate, every stop
ending in a hold (a zero twist, or the measured pose)."""

from __future__ import annotations

import math
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from action_msgs.msg import GoalStatus
from geometry_msgs.msg import TwistStamped
from rclpy.executors import SingleThreadedExecutor
from support.ee_harness import BASE_FRAME, DOWN, START, EeArm
from support.ee_policy import MODEL as EE_ABSOLUTE_MODEL
from support.ee_policy import TARGET
from support.waiting import wait_for

from sequence_ai_lab.episodes import reader

# Starts processes or ROS nodes: `-m "not slow"` leaves it out.
pytestmark = pytest.mark.slow

CONFIG = Path(__file__).resolve().parents[3] / "config"


def _parameters(name: str, base_url: str, key_file: str, **changes: Any) -> dict[str, Any]:
    document = yaml.safe_load((CONFIG / f"{name}.yaml").read_text(encoding="utf-8"))
    values = dict(document["/**/sequence_ai"]["ros__parameters"])
    # As every node test's harness does: the shared machine may delay a frame.
    values.update(base_url=base_url, api_key_file=key_file, max_image_age_s=1.0,
                  max_pose_age_s=1.0, max_state_age_s=1.0)
    values.update(changes)
    return values


@pytest.fixture
def ee_system(ros_system: Any, ros_context: Any) -> Iterator[Any]:
    """`ee_system(**parameters)` -> (arm harness for the clients, the Cartesian test arm)."""
    started: list[tuple[EeArm, SingleThreadedExecutor, threading.Thread]] = []

    def start(**values: Any) -> tuple[Any, EeArm]:
        node, arm = ros_system(**values)
        ee = EeArm(node.get_namespace(), ros_context)
        executor = SingleThreadedExecutor(context=ros_context)
        executor.add_node(ee)
        spinner = threading.Thread(target=executor.spin, daemon=True)
        spinner.start()
        started.append((ee, executor, spinner))
        return arm, ee

    yield start
    for ee, executor, spinner in started:
        executor.shutdown(timeout_sec=5.0)
        spinner.join(timeout=5.0)
        ee.destroy_node()


def test_ee_delta_sends_unitless_twists_in_command_frame_and_ends_in_a_zero_twist(
    ee_system: Any, gateway: Any, key_file: str
) -> None:
    arm, ee = ee_system(**_parameters("sim-stateless-ee-delta", gateway.url, key_file))
    arm.configure_and_activate()
    handle, _ = arm.send_goal("push the block left", max_seconds=30.0, max_actions=20)
    assert handle.accepted
    status, result = arm.result(handle)
    assert status == GoalStatus.STATUS_SUCCEEDED, result.message
    assert result.reason == "completed" and result.actions == 20
    # 20 steps, then the hold: a zero twist.
    wait_for(lambda: len(ee.twists_seen()) >= 21 and ee.twists_seen()[-1].is_zero,
             what="the steps and the hold")
    twists = ee.twists_seen()
    assert all(t.frame_id == BASE_FRAME and t.stamp_s > 0 for t in twists)
    assert all(abs(v) <= 1.0 for t in twists for v in t.values)
    assert sum(1 for t in twists if not t.is_zero) >= 20
    # The twists moved the arm (the model pushes along an instruction-derived direction).
    assert ee.moved_m() > 0.001
    wait_for(lambda: (arm.node_status() or {}).get("pose_source") == "topic",
             what="/diagnostics naming the pose source")
    assert (arm.node_status() or {}).get("ee_pose_age_s", "never received") != "never received"


def test_twists_go_out_in_another_command_frame_through_its_transform(
    ee_system: Any, gateway: Any, key_file: str
) -> None:
    # base_frame turned a quarter about z in "world": the arm at base (0.5, 0, 0.4) is at
    # world (0, 0.5, 0.4), inside a workspace written in world.
    arm, ee = ee_system(**_parameters(
        "sim-stateless-ee-delta", gateway.url, key_file, command_frame="world",
        command_frame_transform=[0.0, 0.0, 0.0, 0.0, 0.0, math.pi / 2],
        workspace_min=[-0.3, 0.2, 0.05], workspace_max=[0.3, 0.8, 0.8],
    ))
    arm.configure_and_activate()
    handle, _ = arm.send_goal("push the block left", max_seconds=30.0, max_actions=10)
    status, result = arm.result(handle)
    assert status == GoalStatus.STATUS_SUCCEEDED, result.message
    wait_for(lambda: len(ee.twists_seen()) >= 11 and ee.twists_seen()[-1].is_zero,
             what="the steps and the hold")
    assert {t.frame_id for t in ee.twists_seen()} == {"world"}
    wait_for(lambda: (arm.node_status() or {}).get("command_frame_source")
             == "command_frame_transform", what="/diagnostics naming the command frame's source")


def test_a_stale_pose_stops_the_goal_with_a_zero_twist(
    ee_system: Any, gateway: Any, key_file: str
) -> None:
    arm, ee = ee_system(**_parameters(
        "sim-stateless-ee-delta", gateway.url, key_file, max_pose_age_s=0.25
    ))
    arm.configure_and_activate()
    handle, _ = arm.send_goal("push the block left", max_seconds=60.0)
    assert handle.accepted
    wait_for(lambda: len(ee.twists_seen()) >= 3, what="the first twists")
    ee.publish_pose = False
    status, result = arm.result(handle)
    assert status == GoalStatus.STATUS_ABORTED, result.message
    assert result.reason == "stale_input"
    assert "max_pose_age_s" in result.message and "ee_pose" in result.message
    wait_for(lambda: ee.twists_seen()[-1].is_zero, what="the hold")


def test_cancel_ends_in_a_zero_twist(ee_system: Any, gateway: Any, key_file: str) -> None:
    arm, ee = ee_system(**_parameters("sim-stateless-ee-delta", gateway.url, key_file))
    arm.configure_and_activate()
    handle, _ = arm.send_goal("push the block left", max_seconds=60.0)
    assert handle.accepted
    wait_for(lambda: sum(1 for t in ee.twists_seen() if not t.is_zero) >= 3,
             what="the first twists")
    handle.cancel()
    status, result = arm.result(handle)
    assert status == GoalStatus.STATUS_CANCELED, result.message
    wait_for(lambda: ee.twists_seen()[-1].is_zero, what="the hold")


def test_ee_absolute_sends_pose_targets_and_holds_the_measured_pose(
    ee_system: Any, gateway_factory: Any, tmp_path: Any
) -> None:
    gateway = gateway_factory(policies=["support.ee_policy:ee_absolute"])
    key = tmp_path / "ee.key"
    key.write_text(gateway.api_key + "\n", encoding="utf-8")
    key.chmod(0o600)
    episodes = tmp_path / "episodes"
    arm, ee = ee_system(**_parameters(
        "sim-ee-absolute-reach", gateway.url, str(key), model=EE_ABSOLUTE_MODEL,
        record="goals", record_dir=str(episodes),
    ))
    arm.configure_and_activate()
    handle, _ = arm.send_goal("reach the red block", max_seconds=30.0, max_actions=10)
    assert handle.accepted
    status, result = arm.result(handle)
    assert status == GoalStatus.STATUS_SUCCEEDED, result.message
    assert result.reason == "completed" and result.actions == 10
    # Ten targets, then the hold at the measured pose (where the stiff test arm went).
    wait_for(lambda: len(ee.targets_seen()) >= 11, what="the targets and the hold")
    targets = ee.targets_seen()
    assert all(t.frame_id == BASE_FRAME for t in targets)
    for target in targets:
        assert target.vector[:3] == pytest.approx(TARGET[:3], abs=1e-6)
        dot = abs(sum(a * b for a, b in zip(target.quaternion, DOWN)))
        assert math.isclose(dot, 1.0, abs_tol=1e-9)
    assert ee.gripper and ee.gripper[0] == [1.0]
    # The observations carried the measured pose and the state per the layout: no joints,
    # the gripper.
    (path,) = reader.episode_files(episodes)
    wait_for(lambda: not reader.read(path).cut, what="the episode file's close")
    episode = reader.read(path)
    poses = [list(m.message.data) for m in episode.on("end_effector_pose")]
    assert poses and len(poses) == len(episode.on("observation/state"))
    assert poses[0][:3] == pytest.approx(list(START), abs=1e-9)
    assert abs(poses[0][3]) == pytest.approx(math.pi) and poses[0][4:] == pytest.approx([0, 0])
    assert all(list(m.message.position) == [0.0] for m in episode.on("observation/state"))


def test_an_ee_delta_episode_records_every_twist_the_gate_sent(
    ee_system: Any, gateway: Any, key_file: str, tmp_path: Path
) -> None:
    arm, ee = ee_system(**_parameters(
        "sim-stateless-ee-delta", gateway.url, key_file, record="goals",
        record_dir=str(tmp_path),
    ))
    arm.configure_and_activate()
    handle, _ = arm.send_goal("push the block left", max_seconds=30.0, max_actions=10)
    status, result = arm.result(handle)
    assert status == GoalStatus.STATUS_SUCCEEDED, result.message
    files = reader.episode_files(tmp_path)
    assert len(files) == 1
    wait_for(lambda: not reader.read(files[0]).cut, what="the episode file's close")
    commands = reader.read(files[0]).on("command")
    assert {m.type_name for m in commands} == {"geometry_msgs/msg/TwistStamped"}
    # The steps and the hold, as Servo got them.
    assert len(commands) == result.actions + 1
    last = commands[-1].message.twist
    assert (last.linear.x, last.linear.y, last.linear.z) == (0.0, 0.0, 0.0)
    sent = [t.values for t in ee.twists_seen()]
    recorded = [(m.message.twist.linear.x, m.message.twist.linear.y, m.message.twist.linear.z,
                 m.message.twist.angular.x, m.message.twist.angular.y, m.message.twist.angular.z)
                for m in commands]
    assert recorded == sent[: len(recorded)]


def test_an_ee_dry_run_sends_twists_to_planned_and_nothing_to_servo(
    ee_system: Any, gateway: Any, key_file: str
) -> None:
    arm, ee = ee_system(**_parameters(
        "sim-stateless-ee-delta", gateway.url, key_file, dry_run=True
    ))
    planned: list[TwistStamped] = []
    arm.create_subscription(TwistStamped, "sequence_ai/planned", planned.append, 100)
    arm.configure_and_activate()
    handle, _ = arm.send_goal("push the block left", max_seconds=30.0, max_actions=10)
    status, result = arm.result(handle)
    assert status == GoalStatus.STATUS_SUCCEEDED, result.message
    wait_for(lambda: len(planned) >= 11, what="the planned twists and hold")
    assert all(m.header.frame_id == BASE_FRAME for m in planned)
    assert ee.twists_seen() == [] and ee.moved_m() == 0.0
