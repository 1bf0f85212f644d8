"""The demo's robot descriptions: the target is where the gateway's simulated model takes the
arm, the measured state and the commands are read as the simulators and the configs name them,
and `--model` picks the planner a robot can be driven by."""

from __future__ import annotations

import math
import types
from pathlib import Path

import pytest
import yaml

from sequence_ai_lab.demo import robots
from sequence_ai_lab.demo.robots import ROBOTS, cartesian_robot, robot_for
from sequence_ai_lab.demo.run import _parse

ROOT = Path(__file__).resolve().parents[3]
INSTRUCTIONS = ("pick up the cup", "put the cup on the blue block")


def _converged(policy: object, instruction: str, joints: int, grippers: int) -> list[float]:
    """Where an arm that plays the policy's rows ends up (the rows' last absolute target)."""
    from sequence_ai_gateway.policies import PolicyObservation

    state = [0.0] * joints
    for _ in range(200):
        rows = policy.steps(PolicyObservation(instruction, state, [0.0] * grippers))
        state = rows[-1][:joints]
    return state


# pi05-droid and cosmos3 look at the frames (no instruction target): the hash-reach models only.
@pytest.mark.parametrize(("model", "joints", "grippers"), [("sim-bimanual-reach", 12, 2)])
@pytest.mark.parametrize("instruction", INSTRUCTIONS)
def test_the_target_is_where_the_gateways_model_takes_the_arm(
    model: str, joints: int, grippers: int, instruction: str
) -> None:
    pytest.importorskip("fastapi")
    from sequence_ai_gateway.models.vision_policies import builtin_policies

    (policy,) = [p for p in builtin_policies() if p.row["id"].endswith(model)]
    target = robot_for(model).instruction_target(instruction)
    assert len(target) == joints
    assert _converged(policy, instruction, joints, grippers) == pytest.approx(target, abs=1e-9)


def test_pi05_droid_keeps_the_target_it_always_had() -> None:
    pytest.importorskip("fastapi")
    from sequence_ai_gateway.models import catalogue
    from sequence_ai_gateway.policies import instruction_target

    for instruction in INSTRUCTIONS:
        assert ROBOTS["pi05-droid"].instruction_target(instruction) == instruction_target(
            instruction, catalogue.PANDA_LOWER, catalogue.PANDA_UPPER
        )


def test_the_bimanual_state_is_read_as_sim_bimanual_publishes_it() -> None:
    pytest.importorskip("rclpy")
    from sensor_msgs.msg import JointState

    from sequence_ai_lab.robots.sim_bimanual.bimanual import GRIPPERS, JOINT_NAMES, SPECS

    robot = ROBOTS["sim-bimanual-reach"]
    assert robot.channels == (*JOINT_NAMES, *GRIPPERS)
    assert robot.cameras == f"{SPECS['image_width'].default}x{SPECS['image_height'].default}"
    names = [*JOINT_NAMES, *GRIPPERS]
    # Published in another order: read back in the robot's channel order.
    msg = JointState(name=names[::-1], position=[float(i) for i in range(len(names))][::-1])
    assert robot.read_state(msg) == [float(i) for i in range(len(names))]
    assert robot.read_state(JointState(name=names[:-1], position=[0.0] * 13)) is None
    assert robot.state_topic == "joint_states"
    assert robots.message_class(robot.state_message) is JointState


def test_the_bimanual_commands_are_the_configs_command_groups() -> None:
    document = yaml.safe_load((ROOT / "config" / "sim-bimanual-reach.yaml").read_text())
    params = document["/**/sequence_ai"]["ros__parameters"]
    robot = ROBOTS["sim-bimanual-reach"]
    expected = {
        params[f"command_groups.{group}.topic"]: robot.channels.index(
            params[f"command_groups.{group}.joints"][0]
        )
        for group in params["command_groups"]
    }
    assert {c.topic: c.first for c in robot.commands} == expected
    right_arm = next(c for c in robot.commands if c.topic.startswith("right_arm"))
    row = robot.command_row(right_arm, types.SimpleNamespace(data=[1.0] * 6))
    assert row is not None and len(row) == 14
    assert [i for i, v in enumerate(row) if not math.isnan(v)] == list(range(6, 12))


def test_the_bimanual_distance_is_per_arm_and_leaves_the_grippers_out() -> None:
    robot = ROBOTS["sim-bimanual-reach"]
    target = [0.0] * 12
    state = [0.0] * 6 + [3.0, 4.0, 0.0, 0.0, 0.0, 0.0] + [1.0, 1.0]
    left, right = robot.groups
    assert robot.distance(state, target, left) == 0.0
    assert robot.distance(state, target, right) == pytest.approx(5.0)
    assert robot.distance(state, target) == pytest.approx(5.0)


def _stand_in_target(instruction: str) -> list[float]:
    # Where the gateway's ee models will aim: a point inside CARTESIAN.md's target box.
    return [0.5, 0.1 if "cup" in instruction else -0.1, 0.3]


@pytest.mark.parametrize("space", ["ee_delta", "ee_absolute"])
def test_a_cartesian_robot_measures_the_end_effector_from_ee_pose(space: str) -> None:
    pytest.importorskip("rclpy")
    from geometry_msgs.msg import PoseStamped

    robot = cartesian_robot(f"sim-{space}", space, _stand_in_target)
    assert (robot.channels, robot.unit, robot.state_topic) == (("x", "y", "z"), "m", "ee_pose")
    assert robots.message_class(robot.state_message) is PoseStamped
    pose = PoseStamped()
    pose.pose.position.x, pose.pose.position.y, pose.pose.position.z = 0.4, -0.2, 0.5
    assert robot.read_state(pose) == [0.4, -0.2, 0.5]
    target = robot.instruction_target("pick up the cup")
    assert robot.distance([0.5, 0.1, 0.7], target) == pytest.approx(0.4)
    if space == "ee_delta":
        assert robot.commands == ()  # twists to Servo: no position to draw
    else:
        (command,) = robot.commands
        assert command.topic == "cartesian_motion_controller/target_frame"
        assert robot.command_row(command, pose) == [0.4, -0.2, 0.5]
    assert robot.no_vlm_planner  # sim-planner judges Panda joints only


def test_a_cartesian_robot_refuses_a_joint_space_and_a_target_that_does_not_fit() -> None:
    with pytest.raises(ValueError, match="joint_absolute"):
        cartesian_robot("m", "joint_absolute", _stand_in_target)
    robot = cartesian_robot("m", "ee_absolute", lambda _instruction: [0.1, 0.2, 0.3, 0.4])
    with pytest.raises(ValueError, match="4 values; expected 1..3"):
        robot.instruction_target("pick up the cup")


def test_every_model_the_launch_plan_maps_has_a_description() -> None:
    from sequence_ai_lab.demo.run import _params_files
    from sequence_ai_ros.params.launch import ARGUMENTS, MODEL_ROBOTS

    assert ARGUMENTS["model"].default == robots.DEFAULT_MODEL
    assert set(MODEL_ROBOTS) <= set(ROBOTS)
    assert _params_files("pi05-droid") == ("config/droid.yaml",)
    assert _params_files("cosmos3-edge-policy-droid") == (
        "config/droid.yaml", "config/cosmos3-edge-policy-droid.yaml",
    )
    assert _params_files("sim-bimanual-reach") == ("config/sim-bimanual-reach.yaml",)
    with pytest.raises(ValueError, match="--model sim-nothing: the demo knows"):
        robot_for("sim-nothing")


def test_model_picks_the_planner_its_robot_can_be_driven_by(
    capsys: pytest.CaptureFixture[str],
) -> None:
    default = _parse([])
    assert (default.model, default.planner, default.planner_note) == ("pi05-droid", "vlm", "")
    bimanual = _parse(["--model", "sim-bimanual-reach"])
    assert bimanual.planner == "scripted"
    assert "scripted planner, since" in bimanual.planner_note
    assert "7 Panda joint positions" in bimanual.planner_note
    assert _parse(["--model", "sim-bimanual-reach", "--planner", "scripted"]).planner_note == ""
    with pytest.raises(SystemExit):
        _parse(["--model", "sim-bimanual-reach", "--planner", "vlm"])
    assert "use --planner scripted" in capsys.readouterr().err


def test_the_simulated_chat_model_cannot_read_a_two_arm_state() -> None:
    """Why `--planner vlm` is refused for sim-bimanual-reach: sim-planner's prompt format."""
    pytest.importorskip("fastapi")
    from sequence_ai_gateway.models.planner_model import PromptRejected, read_prompt

    joints = ", ".join("0.1" for _ in range(12))
    with pytest.raises(PromptRejected, match="expected 7 finite numbers"):
        read_prompt(f"Task: pick up the cup\nJoint positions: [{joints}]")
