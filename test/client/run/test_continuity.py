"""Continuity: requests in flight and their order, the rest ramp and resume, playback speed,
observe off the driving thread, on_rows, and what a run reports it cost."""

from __future__ import annotations

import json
import threading

import pytest
from support.policy_support import ABSOLUTE_REACH, PATIENCE_S, PI05, REACH, Robot, open_policy

import sequence_ai
from sequence_ai._playback.playback import commands_for, ramp_rows_for
from sequence_ai._playback.speed import MAX_SPEED_CHANGE, MIN_SPEED, auto_speed, next_speed


def run(policy: sequence_ai.Policy, robot: Robot, **kwargs):
    options = robot.callbacks()
    options.update(kwargs)
    return policy.run(robot.observe, robot.act, **options)


def observation_index(robot: Robot, prediction: sequence_ai.Prediction) -> int:
    return next(i for i, obs in enumerate(robot.observations) if obs is prediction.observation)


def steps_of(rows: list) -> list:
    """Largest per-dimension change between consecutive rows (arm dims only)."""
    return [max(abs(b - a) for a, b in zip(r0[:7], r1[:7])) for r0, r1 in zip(rows, rows[1:])]


# -- requests in flight ---------------------------------------------------------------------


def test_an_answer_overtaken_by_a_newer_one_is_discarded_never_played(gw) -> None:
    robot = Robot()
    released = threading.Event()
    stalling = threading.Event()

    def on_chunk(prediction) -> None:
        robot.on_chunk(prediction)
        # Hold the next request the gateway takes and release it once another answer is in:
        # that one overtook it. If the stall caught a request observed after the answer that
        # came in (it was sent before the fault reached the gateway), nothing was overtaken,
        # and the next install starts the cycle again.
        if not stalling.is_set():
            gw.inject("stall", seconds=None)
            stalling.set()
        else:
            gw.clear_faults()
            stalling.clear()
            released.set()

    with open_policy(gw, control_hz=60, max_in_flight=2) as policy:
        assert policy.ready()[0]  # a warm first request: its latency sets the stagger

        def discarded() -> bool:
            # Until the released answer has come back and been thrown away: a run that ends
            # first drops it uncounted, however slow the machine.
            progress = policy.progress
            return progress is not None and progress.discarded >= 1

        outcome = run(policy, robot, max_actions=100_000, max_seconds=PATIENCE_S,
                      on_chunk=on_chunk, until=discarded, controller="joint_position")
    assert outcome.reason == "until" and released.is_set()
    assert outcome.discarded >= 1 and outcome.max_in_flight == 2
    # Installed in observation order only: an answer overtaken by a newer one (the discarded
    # one: which request the stall caught depends on when the gateway took the fault) was never
    # installed after it.
    order = [observation_index(robot, p) for p in robot.chunks]
    assert order == sorted(order) and len(set(order)) == len(order)
    assert robot.played_as_reported()
    assert outcome.requests >= outcome.chunks + outcome.discarded


def test_a_late_answer_starts_at_its_due_row(gw) -> None:
    robot = Robot(REACH)
    release_at = 6

    def act(row) -> None:
        robot.act(row)
        if len(robot.acts) == release_at:
            gw.clear_faults()

    stall_next = robot.after_first_chunk(lambda: gw.inject("stall", seconds=None))
    with open_policy(gw, model=REACH, control_hz=60) as policy:
        outcome = policy.run(robot.observe, act, max_actions=20,
                             **{**robot.callbacks(), "on_chunk": stall_next})
    assert outcome.reason == "completed" and len(robot.chunks) >= 2
    # Requested after the first step; the rows whose time passed while it was held are
    # skipped: it plays from the row due when it arrived, never rewinding the arm.
    due = int(robot.rows_due(1))
    assert due == robot.rows_due(1) and due >= release_at - robot.observed_at[1] - 1 >= 1
    played = robot.chunk_rows_played(1)
    assert played[:4] == robot.chunks[1].action_chunk.steps[due : due + len(played[:4])]


@pytest.mark.slow  # over half a second of wall time
def test_requests_are_counted_with_their_connections_and_bytes(gw) -> None:
    robot = Robot()
    with open_policy(gw, control_hz=60, max_in_flight=3) as policy:
        assert policy.ready()[0]
        first = run(policy, robot, max_actions=40)
        again = run(policy, Robot(), max_actions=20)
        opened = policy.connections_opened
    # Closing joined every request: what the gateway saw is what the runs sent.
    assert gw.act_requests() == first.requests + again.requests
    assert first.requests >= first.chunks + first.discarded
    # At most one kept-alive connection per request in flight, kept for the next run: over
    # both runs (and the readiness check) no more than three are ever opened. A run counts the
    # ones opened before it ended; the second opens one only where the first never had all
    # three in flight at once.
    assert opened == gw.connections() <= 3
    assert first.connections + again.connections <= opened
    assert first.requests_per_s == pytest.approx(first.requests / first.motion_s)
    for prediction in robot.chunks:
        body = {"model": policy.model, "observation": prediction.observation.to_wire()}
        sent = json.dumps(body, separators=(",", ":")).encode()
        assert prediction.request_bytes == len(sent)
        assert prediction.observation.view_bytes == {
            frame.view: len(frame.data) for frame in prediction.observation.images
        }
    assert first.request_bytes >= sum(p.request_bytes for p in robot.chunks)


@pytest.mark.slow  # over half a second of wall time
@pytest.mark.parametrize("in_flight", [1, 2, 4])
def test_a_fast_service_is_asked_at_most_n_times_per_horizon_of_motion(gw, in_flight) -> None:
    # The local gateway answers in about a millisecond: staggered at latency / N, a run would
    # ask it hundreds of times a second and discard most answers. Continuity needs N per
    # open-loop horizon of motion, plus the first request, one sent before any warm latency
    # sample exists, and one per underrun (the arm waiting for a chunk is not motion).
    robot = Robot()
    actions = 96
    with open_policy(gw, control_hz=60, max_in_flight=in_flight) as policy:
        assert policy.ready()[0]
        horizon = policy.spec().open_loop_horizon
        outcome = run(policy, robot, max_actions=actions)
    assert outcome.actions == actions
    bound = 2 + in_flight * -(-actions // horizon) + outcome.underruns
    assert outcome.requests <= bound, outcome
    assert gw.act_requests() <= bound  # what the service was asked (and bills)


# -- observe on the request's thread ------------------------------------------------------


@pytest.mark.slow  # over half a second of wall time
@pytest.mark.parametrize("in_flight", [1, 2])
def test_observe_runs_on_the_requests_threads_never_the_driving_thread(gw, in_flight) -> None:
    robot = Robot()
    driver = threading.current_thread().name
    with open_policy(gw, control_hz=60, max_in_flight=in_flight) as policy:
        outcome = policy.act("wave", robot.observe, robot.act, max_seconds=PATIENCE_S,
                             until=lambda: len(robot.acts) >= 30, **robot.callbacks())
    assert outcome.reason == "until" and len(robot.observations) >= 3
    assert robot.act_threads == robot.report_threads == {driver}
    assert driver not in robot.observe_threads
    assert all(name.startswith("sequence_ai-fetch") for name in robot.observe_threads)
    # The instruction the call starts with is not a swap, whichever thread took it.
    assert outcome.instruction_swaps == 0
    assert all(p.observation.instruction == "wave" for p in robot.chunks)


def test_swaps_are_counted_once_across_requests_in_flight(gw) -> None:
    robot = Robot()
    with open_policy(gw, control_hz=60, max_in_flight=2) as policy:

        def on_chunk(prediction) -> None:
            robot.on_chunk(prediction)
            if len(robot.chunks) == 2:
                policy.set_instruction("put it back")

        outcome = policy.act(
            "pick it up", robot.observe, robot.act, max_seconds=PATIENCE_S,
            until=lambda: any(p.observation.instruction == "put it back" for p in robot.chunks)
            and len(robot.chunks) >= 4,
            **{**robot.callbacks(), "on_chunk": on_chunk},
        )
    assert outcome.reason == "until"
    assert outcome.instruction_swaps == 1 and outcome.max_instruction_lag_s is not None


# -- slowing down and resuming ------------------------------------------------------------


@pytest.mark.slow  # over half a second of wall time
@pytest.mark.parametrize("controller", ["joint_position", "raw"])
def test_a_late_chunk_slows_the_arm_to_rest_then_resumes_at_its_due_row(gw, controller) -> None:
    robot = Robot(REACH)

    def on_status(state) -> None:
        robot.on_status(state)
        if state == "waiting":
            gw.clear_faults()

    stall_next = robot.after_first_chunk(lambda: gw.inject("stall", seconds=None))
    with open_policy(gw, model=REACH, control_hz=60) as policy:
        outcome = run(policy, robot, max_actions=40, controller=controller, smooth_seam=2,
                      on_chunk=stall_next, on_status=on_status)
    assert outcome.reason == "completed" and outcome.underruns == 1
    assert robot.played_as_reported()
    first = robot.reports[0][1]
    rows = first.rows
    n = len(rows)
    assert robot.acts[:n] == rows and first.ramp_index < n
    # The whole chunk was played, past its open-loop horizon of 8 rows.
    assert n > 8 and first.horizon_index == 8 and outcome.rows_beyond_horizon >= n - 8
    if controller == "joint_position":
        # Targets: the step between commands falls through the ramp to a fraction of a
        # regular step; the hold is never reached by a jump.
        steps = steps_of(rows)
        cruise, ramp = steps[: first.ramp_index - 1], steps[first.ramp_index - 1 :]
        assert all(b <= a + 1e-12 for a, b in zip(ramp, ramp[1:]))
        assert ramp[-1] <= 0.25 * max(cruise)
    else:
        # Delta rows are velocities: scaled down to zero.
        speeds = [max(abs(v) for v in row[:7]) for row in rows[first.ramp_index - 1 :]]
        assert all(b <= a + 1e-12 for a, b in zip(speeds, speeds[1:])) and speeds[-1] == 0.0
    # Resumed with the held chunk, from its due row: it was observed after a step or two of
    # the first chunk, which has since been played to its last row (the hold adds none).
    resumed = robot.first_reports()[1]
    last_row = len(robot.chunks[0].action_chunk.steps) - 1
    assert resumed.chunk == 2 and resumed.start >= last_row - robot.observed_at[1]
    assert "waiting" in robot.statuses and robot.statuses[-2] == "running"


@pytest.mark.slow  # over half a second of wall time
def test_act_comes_to_rest_by_its_deadline(gw) -> None:
    robot = Robot()
    with open_policy(gw, control_hz=20) as policy:
        outcome = policy.act("wave", robot.observe, robot.act, max_seconds=1.5,
                             controller="joint_position", **robot.callbacks())
    assert outcome.reason == "timeout" and robot.holds == 1
    at, last = robot.reports[-1]
    # The last chunk's rows were planned to rest by the deadline, and played to the end.
    assert robot.acts[at:] == last.rows and last.ramp_index < len(last.rows)
    steps = steps_of(robot.reports[0][1].rows[:10] + last.rows)
    # The last command before the hold is a fraction of the motion's regular step.
    assert steps[-1] <= 0.25 * max(steps[:9])


# -- playback speed ------------------------------------------------------------------------


def test_a_fixed_speed_resamples_target_rows(gw) -> None:
    robot = Robot(ABSOLUTE_REACH)
    with open_policy(gw, model=ABSOLUTE_REACH, control_hz=120, playback_speed=0.5) as policy:
        outcome = run(policy, robot, max_actions=24, controller="joint_position", prefetch=False)
    report = robot.reports[0][1]
    steps = robot.chunks[0].action_chunk.steps
    assert report.speed == 0.5 and outcome.speed_min == outcome.speed_mean == 0.5
    # Every other command is a chunk row; the ones between are halfway.
    for k in range(0, 10, 2):
        assert report.rows[k] == steps[k // 2]
        assert report.rows[k + 1] == pytest.approx(
            [(a + b) / 2 for a, b in zip(steps[k // 2], steps[k // 2 + 1])]
        )
    assert robot.acts == report.rows[:24]


@pytest.mark.slow  # over half a second of wall time
def test_speed_auto_slows_under_high_latency_and_recovers_when_it_falls(gateway) -> None:
    gateway.set_latency(latency_ms=350, jitter_ms=0, scale=1.0)
    robot = Robot()
    speeds: list = []
    lowered = threading.Event()

    def on_rows(rows) -> None:
        robot.on_rows(rows)
        speeds.append(rows.speed)
        if rows.speed < 1.0 and len(speeds) >= 3 and not lowered.is_set():
            lowered.set()
            gateway.set_latency(latency_ms=10, jitter_ms=0, scale=1.0)

    def recovered() -> bool:
        return lowered.is_set() and speeds[-2:] == [1.0, 1.0]

    with open_policy(gateway, control_hz=30, playback_speed="auto") as policy:
        outcome = run(policy, robot, max_actions=10_000, max_seconds=PATIENCE_S,
                      until=recovered, on_rows=on_rows, controller="joint_position")
    assert outcome.reason == "until"
    assert min(speeds) <= 1.0 - MAX_SPEED_CHANGE
    assert outcome.speed_min == min(speeds) and outcome.speed_mean < 1.0
    changes = [abs(b - a) for a, b in zip(speeds, speeds[1:])]
    assert max(changes) <= MAX_SPEED_CHANGE + 1e-9


def test_speed_arguments_are_checked(gw) -> None:
    robot = Robot()
    for bad in (0.4, 1.5, "fast", True, float("nan")):
        with pytest.raises(ValueError, match="playback_speed"):
            open_policy(gw, playback_speed=bad)
    for bad in (0, 9, 1.5, True):
        with pytest.raises(ValueError, match="max_in_flight"):
            open_policy(gw, max_in_flight=bad)
    with open_policy(gw) as policy:
        with pytest.raises(ValueError, match="playback_speed"):
            run(policy, robot, max_actions=5, playback_speed=0.2)
        with pytest.raises(ValueError, match="max_in_flight"):
            run(policy, robot, max_actions=5, max_in_flight=0)
    assert gw.act_requests() == 0


# -- on_rows --------------------------------------------------------------------------------


@pytest.mark.slow  # over half a second of wall time
def test_on_rows_reports_rows_period_and_order(gw) -> None:
    robot = Robot()
    with open_policy(gw, control_hz=60) as policy:
        model = policy.spec()
        outcome = run(policy, robot, max_actions=50, controller="joint_position")
    assert robot.played_as_reported()
    reports = [report for _, report in robot.reports]
    assert [r.sequence for r in reports] == list(range(1, len(reports) + 1))
    assert [r.chunk for r in reports] == sorted(r.chunk for r in reports)
    assert {r.chunk for r in reports} == set(range(1, outcome.chunks + 1))
    assert all(r.period_s == pytest.approx(1 / 60) and r.speed == 1.0 for r in reports)
    assert all(a.first_due <= b.first_due for a, b in zip(reports, reports[1:]))
    for prediction, report, due in robot.whole_row_installs():
        q = prediction.observation.proprioception.joint_positions
        for i, target in enumerate(report.rows[: report.ramp_index]):
            row = sequence_ai.prepare(prediction.action_chunk, model, due + i)
            assert target[:7] == pytest.approx([a + b for a, b in zip(q, row[:7])])
        assert report.horizon_index >= min(len(report.rows), 8)


def test_on_rows_is_called_again_when_the_driving_thread_runs_late(gw) -> None:
    robot = Robot()
    stalled = threading.Event()

    def act(row) -> None:
        robot.act(row)
        if len(robot.acts) == 3 and not stalled.is_set():
            stalled.set()
            threading.Event().wait(4 / 60)  # a slow callback: the schedule slips

    with open_policy(gw, control_hz=60) as policy:
        run_outcome = policy.run(robot.observe, act, max_actions=12, prefetch=False,
                                 **robot.callbacks())
    assert run_outcome.reason == "completed" and robot.played_as_reported()
    first = robot.reports[0][1]
    retimed = [report for _, report in robot.reports[1:] if report.chunk == 1]
    # The same chunk's remaining rows, re-timed from where the loop resumed (at least after
    # the slow step; a loaded machine may slip elsewhere too).
    assert retimed and all(r.rows == first.rows[len(first.rows) - len(r.rows):] for r in retimed)
    assert any(len(first.rows) - len(r.rows) == 3 for r in retimed)
    assert all(r.first_due > first.first_due for r in retimed)


# -- the pure parts -------------------------------------------------------------------------


def test_the_ramp_decelerates_to_rest_on_the_last_row() -> None:
    rows = [[0.1 * i, 1.0] for i in range(15)]
    commands = commands_for(rows, 2.0, speed=1.0, horizon=8, absolute=True,
                            gripper_dims=[1], ramp_rows=3)
    positions = [c.position for c in commands]
    assert positions[:10] == [2.0 + k for k in range(10)] and positions[-1] == 14.0
    advances = [c.advance for c in commands]
    assert all(b < a for a, b in zip(advances[9:], advances[10:])) and advances[-1] == 0.0
    assert [c.beyond_horizon for c in commands].index(True) == 8
    assert all(c.row[1] == 1.0 for c in commands)
    # max_actions cuts the list without a ramp; a deadline brings it to rest sooner.
    assert len(commands_for(rows, 0.0, speed=1.0, horizon=8, absolute=True,
                            gripper_dims=[], ramp_rows=3, at_most=5)) == 5
    early = commands_for(rows, 0.0, speed=1.0, horizon=8, absolute=True, gripper_dims=[],
                         ramp_rows=3, rest_within=9)
    assert len(early) == 9 and early[-1].advance == 0.0 and early[-1].position < 14.0
    assert ramp_rows_for(1 / 15, 15) == 3 and ramp_rows_for(1 / 60, 15) == 3


def test_auto_speed_is_the_largest_the_latency_sustains() -> None:
    fast = auto_speed(chunk_rows=15, period_s=1 / 15, latency_s=0.3, latency_high_s=0.4,
                      in_flight=1)
    slow = auto_speed(chunk_rows=15, period_s=1 / 15, latency_s=0.65, latency_high_s=0.88,
                      in_flight=1)
    helped = auto_speed(chunk_rows=15, period_s=1 / 15, latency_s=0.65, latency_high_s=0.88,
                        in_flight=2)
    assert fast == 1.0 and MIN_SPEED < slow < helped < 1.0
    assert auto_speed(chunk_rows=15, period_s=1 / 15, latency_s=None, latency_high_s=None,
                      in_flight=1) == 1.0
    assert auto_speed(chunk_rows=15, period_s=1 / 15, latency_s=3.0, latency_high_s=5.0,
                      in_flight=1) == MIN_SPEED
    assert next_speed("auto", 1.0, 0.5) == 1.0 - MAX_SPEED_CHANGE
    assert next_speed("auto", 0.5, 1.0) == 0.5 + MAX_SPEED_CHANGE
    assert next_speed(0.7, 1.0, 0.5) == 0.7


@pytest.mark.slow  # over half a second of wall time
def test_a_chunk_for_a_model_without_horizon_plays_to_its_end(gw) -> None:
    robot = Robot(PI05)
    with open_policy(gw, control_hz=60) as policy:
        outcome = run(policy, robot, max_actions=30, open_loop_horizon=15)
    assert outcome.rows_beyond_horizon == 0


@pytest.mark.slow  # over half a second of wall time
def test_progress_shows_the_running_run_to_any_thread(gw) -> None:
    robot = Robot()
    seen: list = []
    with open_policy(gw, control_hz=60, max_in_flight=2) as policy:
        assert policy.progress is None

        def act(row) -> None:
            robot.act(row)
            # Read from another thread, as a node's diagnostics timer would.
            reader = threading.Thread(target=lambda: seen.append(policy.progress))
            reader.start()
            reader.join(PATIENCE_S)

        outcome = policy.run(robot.observe, act, max_actions=30, **robot.callbacks())
        assert policy.progress is None
    last = seen[-1]
    assert isinstance(last, sequence_ai.RunProgress)
    # Published after each command: the last read saw all but the last one.
    assert last.actions == outcome.actions - 1 and last.chunks <= outcome.chunks
    assert [p.actions for p in seen] == list(range(len(seen)))
    assert last.requests <= outcome.requests and 0 <= last.in_flight <= 2
    assert last.speed == 1.0 and last.requests_per_s is not None
