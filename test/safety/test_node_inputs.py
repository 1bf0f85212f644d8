"""Bad input on the ROS side: malformed camera and joint messages stop a goal with a reason
before any request is sent; malformed goals are rejected or capped; an underrun on a velocity
arm does not leave the last velocity running."""

from __future__ import annotations

import contextlib
import math
import re
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np
import pytest
from action_msgs.msg import GoalStatus
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from rclpy.qos import qos_profile_sensor_data
from sensor_msgs.msg import Image, JointState
from std_msgs.msg import Float64MultiArray
from support.gateway_fixture import run_gateway
from support.node_harness import GRIPPER, JOINTS, node_parameters
from support.ros_support import NodeSystem, key_file_for, new_commands, wait_commands
from support.waiting import wait_for

from sequence_ai_ros.core.freshness import StaleObservation
from sequence_ai_ros.inputs.image_conversion import SUPPORTED_ENCODINGS
from sequence_ai_ros.inputs.observation_cache import ObservationCache

BAD_VIEW = "wrist_left"
# Longer than a chunk's runway, shorter than the request timeout: the goal waits, then resumes.
VELOCITY_STALL_S = 2.0


@pytest.fixture(scope="module")
def input_system(safety_ros_context: Any, tmp_path_factory: Any) -> Iterator[tuple[Any, ...]]:
    with run_gateway() as gw:
        nodes = NodeSystem(safety_ros_context, "safety_inputs")
        try:
            key_file = key_file_for(tmp_path_factory.mktemp("key"), gw.api_key)
            node, arm = nodes.start(**node_parameters(gw.url, key_file))
            arm.configure_and_activate()
            yield gw, node, arm, BadInput(arm)
        finally:
            nodes.close()


class BadInput:
    """Publishes one malformed camera or joint message in place of the test arm's own.

    Made once per node: destroying publishers or timers while an executor spins is racy in
    rclpy, so these live as long as the arm and are only switched on and off.
    """

    def __init__(self, arm: Any) -> None:
        self.arm = arm
        self.image: Image | None = None
        self.joints: JointState | None = None
        self._images = arm.create_publisher(Image, f"cameras/{BAD_VIEW}/image_raw",
                                            qos_profile_sensor_data)
        self._joints = arm.create_publisher(JointState, "joint_states", qos_profile_sensor_data)
        arm.create_timer(0.02, self._publish)

    def _publish(self) -> None:
        image, joints = self.image, self.joints
        if image is not None:
            self._images.publish(image)
        if joints is not None:
            self._joints.publish(joints)

    @contextlib.contextmanager
    def sending(self, *, image: Image | None = None,
                joints: JointState | None = None) -> Iterator[None]:
        if image is not None:
            self.arm.paused_views.add(BAD_VIEW)
        if joints is not None:
            self.arm.publish_joints = False
        self.image, self.joints = image, joints
        try:
            yield
        finally:
            self.image = self.joints = None
            self.arm.paused_views.discard(BAD_VIEW)
            self.arm.publish_joints = True


def _image(width: int, height: int, encoding: str = "rgb8", step: int | None = None,
           size: int | None = None) -> Image:
    channels = 1 if encoding == "mono8" else 3
    msg = Image(width=width, height=height, encoding=encoding,
                step=width * channels if step is None else step)
    msg.data = bytes(height * width * channels if size is None else size)
    return msg


def _joints(names: list[str], positions: list[float]) -> JointState:
    return JointState(name=names, position=positions)


ALL_NAMES = JOINTS + [GRIPPER]

# The node's input ages (node_parameters): the cache is probed with the same bounds.
MAX_AGE_S = 1.0
# (case, message factory, words the goal's result must contain)
BAD_IMAGES: list[tuple[str, Callable[[], Image], tuple[str, ...]]] = [
    ("encoding", lambda: _image(320, 180, encoding="16UC1"), ("camera wrist_left", "16UC1")),
    ("step", lambda: _image(320, 180, step=100), ("camera wrist_left", "step 100")),
    ("size", lambda: _image(320, 180, size=1000), ("camera wrist_left", "1000 bytes")),
    ("empty", lambda: _image(0, 180), ("camera wrist_left", "0x180")),
]
# (case, factory, words, held): a joint missing from the messages goes stale, and a stale,
# non-finite or inconsistent joint state is no pose to hold at: nothing is published.
# Each factory gets the arm's true pose (7 joints + gripper), so a hold can be recognised.
BAD_JOINTS: list[tuple[str, Callable[[list[float]], JointState], tuple[str, ...], bool]] = [
    ("missing_name", lambda pose: _joints(ALL_NAMES[1:], pose[1:]),
     ("joint_states", "panda_joint1", "max_state_age_s"), False),
    ("nan", lambda pose: _joints(ALL_NAMES, [math.nan] + pose[1:]),
     ("non-finite", "panda_joint1"), False),
    ("inf_gripper", lambda pose: _joints(ALL_NAMES, pose[:-1] + [math.inf]),
     ("non-finite", GRIPPER), False),
    ("lengths", lambda pose: _joints(ALL_NAMES, pose[:3]),
     ("joint_states", "8 names", "3 positions"), False),
]


def _stopped_by_bad_input(
    gw: Any, node: Any, arm: Any, words: tuple[str, ...], *, held: bool
) -> None:
    """A goal under a bad input ends stale_input with no request sent."""
    acts_before = gw.counters()["requests"]["act"]
    start = arm.command_count()
    # The bad message must be the newest one the node holds before the goal observes.
    wait_for(lambda: all(w in _refusal(node) for w in words), what=f"the node to see {words}")
    handle, _ = arm.send_goal("pick up the cup", 10.0)
    assert handle.accepted
    status, result = arm.result(handle)
    assert status == GoalStatus.STATUS_ABORTED
    assert result.reason == "stale_input" and result.actions == 0
    for word in words:
        assert word in result.message, result.message
    assert gw.counters()["requests"]["act"] == acts_before
    if held:
        wait_for(lambda: arm.holds(start), what="the hold")
        # Commands first: a hold sent again meanwhile is in holds() taken after.
        commands = arm.commands_since(start)
        assert all(c in arm.holds(start) for c in commands)
    else:
        # No fresh, usable joint state: nothing is provably still, so the goal publishes
        # nothing, and the result says so. (Until the bad message arrived, the idle node may
        # have sent the hold already in force again.)
        assert new_commands(arm, start) == []
        assert "could not be held" in result.message, result.message


def _refusal(node: Any) -> str:
    """Why the node's input cache would refuse an observation now ("" when it would not)."""
    try:
        node._configured.cache.images(MAX_AGE_S)
        node._configured.cache.joints(MAX_AGE_S)
    except StaleObservation as exc:
        return str(exc)
    return ""


@pytest.mark.parametrize("case,factory,words", BAD_IMAGES, ids=[c[0] for c in BAD_IMAGES])
def test_a_malformed_image_stops_the_goal_before_any_request(
    input_system: tuple[Any, ...], case: str, factory: Callable[[], Image],
    words: tuple[str, ...],
) -> None:
    gw, node, arm, bad = input_system
    with bad.sending(image=factory()):
        _stopped_by_bad_input(gw, node, arm, words, held=True)
    wait_for(lambda: not _refusal(node), what="good camera frames again")


@pytest.mark.parametrize("case,factory,words,held", BAD_JOINTS, ids=[c[0] for c in BAD_JOINTS])
def test_a_malformed_joint_state_stops_the_goal_before_any_request(
    input_system: tuple[Any, ...], case: str, factory: Callable[[list[float]], JointState],
    words: tuple[str, ...], held: bool,
) -> None:
    gw, node, arm, bad = input_system
    with bad.sending(joints=factory(list(arm.positions) + [arm.gripper])):
        _stopped_by_bad_input(gw, node, arm, words, held=held)
    wait_for(lambda: not _refusal(node), what="good joint states again")


@pytest.mark.parametrize(
    "instruction,max_seconds",
    [("", 5.0), ("   ", 5.0), ("pick up the cup", 0.0), ("pick up the cup", -1.0),
     ("pick up the cup", math.nan), ("pick up the cup", math.inf),
     ("pick up the cup", -math.inf)],
    ids=["empty", "blank", "zero", "negative", "nan", "inf", "minus_inf"],
)
def test_malformed_goals_are_rejected(
    input_system: tuple[Any, ...], instruction: str, max_seconds: float
) -> None:
    gw, _, arm, _ = input_system
    acts_before = gw.counters()["requests"]["act"]
    start = arm.command_count()
    handle, _ = arm.send_goal(instruction, max_seconds)
    assert not handle.accepted
    assert new_commands(arm, start) == []
    assert gw.counters()["requests"]["act"] == acts_before


def test_max_seconds_over_the_cap_is_capped(
    input_system: tuple[Any, ...], capfd: pytest.CaptureFixture[str]
) -> None:
    _, _, arm, _ = input_system
    (changed,) = arm.set_parameters(max_goal_seconds=1.0)
    assert changed.successful, changed.reason
    try:
        handle, _ = arm.send_goal("pick up the cup", 1.0e9)
        assert handle.accepted
        status, result = arm.result(handle)
    finally:
        (restored,) = arm.set_parameters(max_goal_seconds=120.0)
    assert restored.successful
    assert status == GoalStatus.STATUS_SUCCEEDED
    assert result.reason == "timeout" and result.stopped_early
    # The node logs the max_seconds it applied when the goal starts.
    assert re.search(r"max_seconds 1\b", capfd.readouterr().err)


# ----- the image and joint cache on its own: any header is a stop reason, never a crash -----

_ENCODINGS = st.sampled_from(list(SUPPORTED_ENCODINGS) + ["16UC1", "yuv422", "", "RGB8 ", "bayer"])


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    width=st.integers(-2, 40), height=st.integers(-2, 40), encoding=_ENCODINGS,
    step=st.integers(-5, 200), size=st.integers(0, 6000), bigendian=st.integers(0, 3),
)
def test_any_image_header_converts_or_names_the_camera(
    width: int, height: int, encoding: str, step: int, size: int, bigendian: int
) -> None:
    cache = ObservationCache(["exterior_1"], JOINTS, [GRIPPER])
    msg = Image()
    # The message type refuses negative sizes itself; those never reach the node.
    try:
        msg.width, msg.height, msg.step, msg.is_bigendian = width, height, step, bigendian
    except (AssertionError, ValueError, TypeError):
        return
    msg.encoding = encoding
    msg.data = bytes(size)
    cache.store_image("exterior_1", msg)
    try:
        frames = cache.images(max_age_s=10.0)
    except StaleObservation as exc:
        assert str(exc).startswith("camera exterior_1:"), str(exc)
        return
    frame = frames["exterior_1"]
    assert frame.dtype == np.uint8 and frame.shape[:2] == (height, width)


@pytest.mark.slow  # over half a second of wall time
@settings(max_examples=200, deadline=None)
@given(
    names=st.lists(st.sampled_from(ALL_NAMES + ["elbow", ""]), max_size=10),
    positions=st.lists(st.one_of(st.floats(allow_nan=True, allow_infinity=True),
                                 st.floats(-3, 3)), max_size=10),
)
def test_any_joint_state_reorders_or_names_the_problem(
    names: list[str], positions: list[float]
) -> None:
    cache = ObservationCache(["exterior_1"], JOINTS, [GRIPPER])
    cache.store_joint_state(JointState(name=names, position=positions))
    try:
        snapshot = cache.joints(max_age_s=10.0)
    except StaleObservation as exc:
        assert "joint_states" in str(exc), str(exc)
        return
    assert len(snapshot.positions) == len(JOINTS)
    assert all(math.isfinite(v) for v in snapshot.positions)
    assert snapshot.gripper is not None and all(math.isfinite(g) for g in snapshot.gripper)


# ----- an underrun on a velocity arm -----


def test_an_underrun_on_a_velocity_arm_commands_zero_velocity(
    safety_ros_context: Any, tmp_path: Any
) -> None:
    """While the next chunk is late, the last velocity must not stay in force.

    A forward velocity controller keeps applying the last command until a new one arrives,
    so an underrun without a zero command lets the arm keep moving for as long as the
    service stalls — well past the one period the safety check allowed for.
    """
    with run_gateway() as gw:
        nodes = NodeSystem(safety_ros_context, "safety_velocity")
        try:
            key_file = key_file_for(tmp_path, gw.api_key)
            _, arm = nodes.start(**node_parameters(
                gw.url, key_file, command_interface="velocity",
                command_topic="forward_velocity_controller/commands",
            ))
            velocities: list[tuple[float, ...]] = []
            arm.create_subscription(
                Float64MultiArray, "forward_velocity_controller/commands",
                lambda msg: velocities.append(tuple(msg.data)), 10,
            )
            arm.configure_and_activate()
            handle, _ = arm.send_goal("pick up the cup", 60.0, 40)
            assert handle.accepted
            wait_for(lambda: velocities, what="the first velocity command")
            gw.inject("stall", seconds=VELOCITY_STALL_S)
            status, result = arm.result(handle)
            assert status == GoalStatus.STATUS_SUCCEEDED and result.underruns >= 1
            # The goal's final hold is a zero too; one followed by more steps was sent mid-goal.
            zeros = [i for i, v in enumerate(velocities) if not any(v)]
            assert zeros and zeros[0] < len(velocities) - 1, velocities
        finally:
            nodes.close()


def test_the_node_still_drives_after_the_bad_inputs(input_system: tuple[Any, ...]) -> None:
    """Nothing above left the node unable to run a goal."""
    _, _, arm, _ = input_system
    start = arm.command_count()
    handle, _ = arm.send_goal("pick up the cup", 30.0, 8)
    status, result = arm.result(handle)
    assert status == GoalStatus.STATUS_SUCCEEDED and result.actions == 8
    wait_commands(arm, start + 9, "the goal's commands and its hold")
