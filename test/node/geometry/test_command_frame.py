"""An ee model's commands in a command_frame other than base_frame (issue 21): the transform
from the parameter or tf2, refusals that name the parameters, and the gate checking every
twist, pose target and hold in command_frame — the workspace included — after the transform."""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

import pytest
from geometry_msgs.msg import TransformStamped
from node.safety.test_cartesian_space import (
    EE_RULES,
    RULES,
    _Buffer,
    _play,
    _pose_msg,
)
from node.safety.test_cartesian_space import _gate as _cartesian_gate

from sequence_ai_ros.core import pose_math
from sequence_ai_ros.core.command_kinds import EE_ABSOLUTE, EE_DELTA
from sequence_ai_ros.core.freshness import StaleObservation
from sequence_ai_ros.core.node_config import NodeConfig
from sequence_ai_ros.geometry import command_frame as frames
from sequence_ai_ros.params.preflight_cartesian import PoseProbe, pose_problem
from sequence_ai_ros.params.spec_table import SPECS

# base_frame (panda_link0) seen from a command frame turned a quarter left about z and 1 m
# along its x: a base-frame x becomes command-frame y.
QUARTER = [1.0, 0.0, 0.0, 0.0, 0.0, math.pi / 2]


@dataclass
class _Config:
    base_frame: str = "panda_link0"
    command_frame: str = "world"
    command_frame_transform: tuple[float, ...] = ()


def _frame() -> frames.CommandFrame:
    return frames.command_frame(_Config(command_frame_transform=tuple(QUARTER)), None)


def _gate(space: str, workspace: tuple[tuple[float, ...], tuple[float, ...]] | None = None):
    """(gate, output, poses): the Cartesian gate's helper, with base_frame turned QUARTER."""
    cartesian = EE_RULES
    if workspace is not None:
        limits = replace(EE_RULES.limits, workspace_min=workspace[0], workspace_max=workspace[1])
        cartesian = replace(EE_RULES, limits=limits)
    gate, output, poses, _, _ = _cartesian_gate(
        space, rules=replace(RULES, cartesian=cartesian), frame=_frame()
    )
    return gate, output, poses


# In command_frame the arm at base (0.5, 0, 0.4) is at (1.0, 0.5, 0.4).
AROUND_ARM = ((0.7, 0.2, 0.05), (1.3, 0.8, 0.8))


def test_the_same_frame_needs_no_transform_and_a_differing_one_needs_one() -> None:
    same = frames.command_frame(_Config(command_frame=""), None)
    assert same.source == frames.SAME and same.transform() == pose_math.Transform()
    assert frames.problem(_Config(command_frame="/panda_link0"), "m", tf2=False) is None
    reason = frames.problem(_Config(), "sim-ee-absolute-reach", tf2=False)
    assert reason is not None
    for words in ("command_frame 'world'", "base_frame 'panda_link0'", "tf2_ros",
                  "command_frame_transform", "sim-ee-absolute-reach"):
        assert words in reason
    # With tf2 the transform is looked up; with the parameter it is the parameter's.
    assert frames.problem(_Config(), "m", tf2=True) is None
    assert _frame().source == frames.PARAMETER


@pytest.mark.parametrize("values", [(1.0, 0.0, 0.0), (0.0, 0.0, 0.0, 0.0, 0.0, math.nan)])
def test_a_malformed_transform_is_refused_naming_the_parameter(values: tuple[float, ...]) -> None:
    reason = frames.problem(_Config(command_frame_transform=values), "m", tf2=True)
    assert reason is not None and "command_frame_transform" in reason and "6 finite" in reason


def test_tf2_gives_command_frame_from_base_frame_at_every_command() -> None:
    msg = TransformStamped()
    msg.transform.translation.x = 1.0
    q = pose_math.rpy_to_quaternion(0.0, 0.0, math.pi / 2)
    r = msg.transform.rotation
    r.x, r.y, r.z, r.w = q
    buffer = _Buffer()
    buffer.transform = msg
    frame = frames.command_frame(_Config(), buffer)
    assert frame.source == frames.TF2
    assert frame.transform().point((0.5, 0.0, 0.4)) == pytest.approx((1.0, 0.5, 0.4))
    assert buffer.asked == [("world", "panda_link0")]
    buffer.transform = None
    with pytest.raises(StaleObservation, match="tf world <- panda_link0"):
        frame.transform()


def test_a_twist_is_turned_into_command_frame() -> None:
    gate, output, _ = _gate(EE_DELTA, AROUND_ARM)
    _play(gate, [0.5, 0.0, -0.25, 0.2, 0.0, 0.0, 1.0])
    assert output.arm == [pytest.approx([0.0, 0.5, -0.25, 0.0, 0.2, 0.0], abs=1e-12)]


def test_a_unitless_twist_turned_beyond_one_is_refused_not_rescaled() -> None:
    eighth = frames.command_frame(
        _Config(command_frame_transform=(0.0, 0.0, 0.0, 0.0, 0.0, math.pi / 4)), None
    )
    gate, output, _, _, _ = _cartesian_gate(EE_DELTA, frame=eighth)
    # (0.6, 0.6) turned an eighth is (0, 0.85): within one; (0.85, 0.85) is 1.2 on y (0.48 m/s,
    # within max_linear_speed).
    assert gate.check([0.6, 0.6, 0, 0, 0, 0, 0.0]) is None
    reason = gate.check([0.85, 0.85, 0, 0, 0, 0, 0.0])
    assert reason is not None and "command_frame" in reason and "[-1, 1]" in reason
    assert output.arm == []


def test_the_workspace_is_in_command_frame() -> None:
    # The base-frame default box (x 0.2..0.8) does not hold the arm at command x 1.0.
    gate, _, _ = _gate(EE_DELTA)
    reason = gate.check([0.1, 0, 0, 0, 0, 0, 0.0])
    assert reason is not None and "workspace" in reason
    gate, _, _ = _gate(EE_DELTA, AROUND_ARM)
    assert gate.check([0.1, 0, 0, 0, 0, 0, 0.0]) is None


def test_a_pose_target_and_its_hold_are_in_command_frame() -> None:
    gate, output, poses = _gate(EE_ABSOLUTE, AROUND_ARM)
    # 1 cm along base x from the arm: 1 cm along command y.
    _play(gate, [0.51, 0.0, 0.4, math.pi, 0.0, 0.0, 0.0])
    (target,) = output.arm
    assert target[:3] == pytest.approx([1.0, 0.51, 0.4])
    turned = pose_math.quaternion_to_matrix(pose_math.rpy_to_quaternion(*target[3:]))
    expected = pose_math.quaternion_to_matrix(
        pose_math.rpy_to_quaternion(math.pi, 0.0, math.pi / 2)
    )
    assert sum(turned, []) == pytest.approx(sum(expected, []), abs=1e-9)
    # The next target is checked from the last one, in the same frame: another 1 cm passes.
    _play(gate, [0.52, 0.0, 0.4, math.pi, 0.0, 0.0, 0.0])
    # The hold is the measured pose, turned into command_frame.
    poses.store(_pose_msg((0.515, 0.0, 0.4)))
    assert gate.hold() is None
    assert output.arm[-1][:3] == pytest.approx([1.0, 0.515, 0.4])


def test_preflight_finds_the_pose_in_the_workspace_of_command_frame() -> None:
    def config(**changes: object) -> NodeConfig:
        values = {name: spec.default for name, spec in SPECS.items()}
        values.update(command_frame="world", command_frame_transform=QUARTER, **changes)
        return NodeConfig.from_values(values)

    probe = PoseProbe(None, "/ee_pose")
    received = [_pose_msg((0.5, 0.0, 0.4))]
    inside = config(workspace_min=list(AROUND_ARM[0]), workspace_max=list(AROUND_ARM[1]))
    assert pose_problem(probe, inside, received, lambda _msg: 0.0)[0] is None
    # The default box holds base-frame x 0.5, not command-frame x 1.0.
    problem, _ = pose_problem(probe, config(), received, lambda _msg: 0.0)
    assert problem is not None and "[1.000, 0.500, 0.400] m in command_frame" in problem
    assert "outside workspace_min" in problem
