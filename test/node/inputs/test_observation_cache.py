"""The latest-message cache: ages, reordering by joint_names, clear stop reasons."""

from __future__ import annotations

import math
import threading
import time

import numpy as np
import pytest
from sensor_msgs.msg import Image, JointState

from sequence_ai_ros.core.freshness import StaleObservation
from sequence_ai_ros.inputs.camera_feed import TakenImage
from sequence_ai_ros.inputs.observation_cache import ObservationCache


class FakeClock:
    """A monotonic clock the test moves by hand."""

    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def _joint_state(names: list[str], positions: list[float]) -> JointState:
    return JointState(name=names, position=positions)


def _rgb(width: int = 4, height: int = 3) -> Image:
    msg = Image(height=height, width=width, encoding="rgb8", step=width * 3)
    msg.data = bytes(range(width * height * 3))
    return msg


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
def cache(clock: FakeClock) -> ObservationCache:
    return ObservationCache(["front", "wrist"], ["j1", "j2", "j3"], ["finger"], clock=clock)


def test_joints_are_reordered_by_joint_names(cache: ObservationCache) -> None:
    cache.store_joint_state(_joint_state(["finger", "j3", "j1", "j2"], [0.5, 3.0, 1.0, 2.0]))
    snapshot = cache.joints(max_age_s=0.25)
    assert snapshot.positions == [1.0, 2.0, 3.0]
    assert snapshot.gripper == [0.5]


def test_missing_joint_is_named(cache: ObservationCache) -> None:
    cache.store_joint_state(_joint_state(["j1", "j2", "finger"], [1.0, 2.0, 0.0]))
    with pytest.raises(StaleObservation, match="lacks j3"):
        cache.joints(max_age_s=0.25)


def test_nan_joint_is_named(cache: ObservationCache) -> None:
    cache.store_joint_state(_joint_state(["j1", "j2", "j3", "finger"], [1.0, math.nan, 3, 0]))
    with pytest.raises(StaleObservation, match="non-finite position for j2"):
        cache.joints(max_age_s=0.25)


def test_old_joint_state_is_refused(cache: ObservationCache, clock: FakeClock) -> None:
    cache.store_joint_state(_joint_state(["j1", "j2", "j3", "finger"], [1.0, 2.0, 3.0, 0.0]))
    clock.now += 0.3
    with pytest.raises(StaleObservation, match="max_state_age_s"):
        cache.joints(max_age_s=0.25)


def test_images_need_every_view_and_fresh_frames(
    cache: ObservationCache, clock: FakeClock
) -> None:
    cache.store_image("front", _rgb())
    with pytest.raises(StaleObservation, match="camera wrist: no image"):
        cache.images(max_age_s=0.5)
    cache.store_image("wrist", _rgb())
    frames = cache.images(max_age_s=0.5)
    assert set(frames) == {"front", "wrist"}
    assert isinstance(frames["front"], np.ndarray) and frames["front"].shape == (3, 4, 3)
    clock.now += 0.6
    with pytest.raises(StaleObservation, match="camera front: newest image is 0.600 s old"):
        cache.images(max_age_s=0.5)


def test_bad_image_becomes_a_stop_reason(cache: ObservationCache) -> None:
    bad = Image(height=2, width=2, encoding="yuv422", step=4)
    bad.data = bytes(8)
    cache.store_image("front", bad)
    cache.store_image("wrist", _rgb())
    with pytest.raises(StaleObservation, match="camera front: .*yuv422"):
        cache.images(max_age_s=0.5)


def test_ages_report_never_received(cache: ObservationCache, clock: FakeClock) -> None:
    cache.store_image("front", _rgb())
    clock.now += 0.2
    ages = cache.ages()
    assert ages["front"] == pytest.approx(0.2)
    assert ages["wrist"] is None and ages["joint_states"] is None


def test_arm_and_gripper_in_separate_messages_are_merged(
    cache: ObservationCache, clock: FakeClock
) -> None:
    cache.store_joint_state(_joint_state(["j1", "j2", "j3"], [1.0, 2.0, 3.0]))
    clock.now += 0.1
    cache.store_joint_state(_joint_state(["finger"], [0.8]))
    snapshot = cache.joints(max_age_s=0.25)
    assert snapshot.positions == [1.0, 2.0, 3.0] and snapshot.gripper == [0.8]
    # The arm's positions are the oldest part: they decide the age.
    assert snapshot.age_s == pytest.approx(0.1)
    clock.now += 0.2
    cache.store_joint_state(_joint_state(["finger"], [0.9]))
    with pytest.raises(StaleObservation, match="max_state_age_s"):
        cache.joints(max_age_s=0.25)


def test_names_and_positions_of_different_length_are_reported(cache: ObservationCache) -> None:
    cache.store_joint_state(_joint_state(["j1", "j2", "j3", "finger"], [1.0, 2.0]))
    with pytest.raises(StaleObservation, match="4 names but 2 positions"):
        cache.joints(max_age_s=0.25)


def test_stamp_skew_spans_cameras_and_joints(cache: ObservationCache) -> None:
    assert cache.stamp_skew_s() is None
    for view, sec in (("front", 10), ("wrist", 11)):
        image = _rgb()
        image.header.stamp.sec = sec
        cache.store_image(view, image)
    joints = _joint_state(["j1", "j2", "j3", "finger"], [1.0, 2.0, 3.0, 0.0])
    joints.header.stamp.sec = 12
    cache.store_joint_state(joints)
    assert cache.stamp_skew_s() == pytest.approx(2.0)


class FakeCamera:
    """A frame source: hands out queued frames, counts the takes."""

    def __init__(self) -> None:
        self.queued: dict[str, list[TakenImage]] = {}
        self.takes = 0

    def take(self, view: str) -> TakenImage | None:
        self.takes += 1
        frames = self.queued.get(view) or []
        return frames.pop(0) if frames else None


def _taken(received_s: float, published_s: float, sequence: int | None) -> TakenImage:
    return TakenImage(_rgb(), received_s, published_s, sequence)


def test_frames_are_taken_when_a_request_needs_them_not_before(clock: FakeClock) -> None:
    camera = FakeCamera()
    cache = ObservationCache(["front"], ["j1"], [], clock=clock, feed=camera)
    camera.queued["front"] = [_taken(clock.now, time.time(), 1)]
    assert cache.ages()["front"] == pytest.approx(0.0)
    takes = camera.takes
    # A frame in hand younger than the freshness window is not replaced for an age read…
    clock.now += 0.05
    assert cache.ages()["front"] == pytest.approx(0.05)
    assert camera.takes == takes
    # …but a request always takes the newest.
    camera.queued["front"] = [_taken(clock.now, time.time(), 2)]
    cache.images(max_age_s=0.5)
    assert camera.takes == takes + 1
    assert cache.ages()["front"] == pytest.approx(0.0)


def test_under_a_goal_an_age_read_takes_a_frame_only_near_the_limit(clock: FakeClock) -> None:
    camera = FakeCamera()
    cache = ObservationCache(["front"], ["j1"], [], clock=clock, feed=camera)
    cache.watch_images(0.5)
    camera.queued["front"] = [_taken(clock.now, time.time(), 1)]
    cache.images(max_age_s=0.5)
    takes = camera.takes
    clock.now += 0.35
    assert cache.ages()["front"] == pytest.approx(0.35)
    assert camera.takes == takes
    clock.now += 0.1
    camera.queued["front"] = [_taken(clock.now, time.time(), 2)]
    assert cache.ages()["front"] == pytest.approx(0.0)
    assert camera.takes == takes + 1


def test_an_age_read_does_not_wait_behind_a_take_when_the_frames_in_hand_will_do(
    clock: FakeClock,
) -> None:
    camera = FakeCamera()
    cache = ObservationCache(["front"], ["j1"], [], clock=clock, feed=camera)
    camera.queued["front"] = [_taken(clock.now, time.time(), 1)]
    cache.images(max_age_s=0.5)
    # A request's take in progress holds the take lock; the gate's read needs no new frame.
    with cache._take_lock:
        done = threading.Event()
        reader = threading.Thread(target=lambda: (cache.ages(), done.set()))
        reader.start()
        assert done.wait(10.0), "the age read waited for the take lock"
    reader.join()


def test_a_frame_taken_later_than_two_periods_is_warned_about_once(clock: FakeClock) -> None:
    camera = FakeCamera()
    warnings: list[str] = []
    cache = ObservationCache(["front"], ["j1"], [], clock=clock, feed=camera,
                             warn=warnings.append)
    now = time.time()
    # Publisher sequence numbers 30 apart over one second: a 33 ms frame period.
    camera.queued["front"] = [_taken(clock.now, now - 1.01, 1), _taken(clock.now, now - 0.01, 31)]
    cache.images(max_age_s=0.5)
    cache.images(max_age_s=0.5)
    assert warnings == []
    camera.queued["front"] = [_taken(clock.now, now - 0.2, 32)]
    cache.images(max_age_s=0.5)
    camera.queued["front"] = [_taken(clock.now, now - 0.3, 33)]
    cache.images(max_age_s=0.5)
    assert len(warnings) == 1 and "camera front" in warnings[0] and "33 ms" in warnings[0]
