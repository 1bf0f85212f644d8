"""Policy.run: prefetch, endings, hold, errors, cold start, seam, controllers, progress."""

from __future__ import annotations

import contextlib
import io
import sys
import warnings
from typing import Iterator

import pytest
from support.policy_support import (
    ABSOLUTE_REACH,
    REACH,
    Robot,
    fetch_threads,
    make_observation,
    open_policy,
)
from support.waiting import wait_for

import sequence_ai
from sequence_ai import InvalidResponse, OutOfCredit, SequencesError, Unavailable


@contextlib.contextmanager
def quiet_loading_notice() -> Iterator[None]:
    """Silence the "model is loading" UserWarning where it is not what the test checks."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        yield


def run(policy: sequence_ai.Policy, robot: Robot, **kwargs):
    options = robot.callbacks()
    options.update(kwargs)
    return policy.run(robot.observe, robot.act, **options)


def test_completed_run_plays_max_actions_without_hold(gw) -> None:
    robot = Robot()
    with open_policy(gw, control_hz=60) as policy:
        outcome = run(policy, robot, max_actions=20)
        assert policy.buffered == 0
    assert outcome.reason == "completed" and not outcome.stopped_early
    assert outcome.actions == len(robot.acts) == 20
    # A pi05 chunk's open-loop horizon is 8 steps: at least three chunks for 20 steps, each
    # replacing the last when it lands; one request per chunk. On a loaded machine a chunk can
    # come back after its horizon had passed (discarded: the run waited for the next), and the
    # request for the next horizon can still be in flight when the last chunk's rows beyond
    # its horizon have played the 20th step.
    assert outcome.chunks == len(robot.chunks) >= 3
    in_flight = outcome.requests - outcome.chunks - outcome.discarded
    assert in_flight == 0 or (in_flight == 1 and outcome.rows_beyond_horizon > 0), outcome
    assert outcome.chunks + outcome.discarded <= gw.act_requests() <= outcome.requests
    assert outcome.discarded == 0 or outcome.underruns > 0
    assert outcome.action_space == "joint_delta" and outcome.max_in_flight == 1
    assert robot.holds == 0
    # A loaded machine may deliver a chunk late: each underrun waits, then runs again.
    waits = ["waiting", "running"] * outcome.underruns
    assert robot.statuses == ["starting", "running", *waits, "done"]
    assert all(isinstance(state, sequence_ai.RunStatus) for state in robot.statuses)
    assert outcome.ending is sequence_ai.Ending.COMPLETED and outcome.error is None
    assert repr(outcome).startswith(f"RunOutcome(20 actions over {outcome.chunks} chunks in ")
    assert repr(outcome).endswith(", completed)")


def test_never_fetches_beyond_max_actions(gw) -> None:
    robot = Robot()
    with open_policy(gw, control_hz=60) as policy:
        outcome = run(policy, robot, max_actions=16)
    # Every chunk requested was played: none was fetched for steps max_actions does not need.
    assert gw.act_requests() == outcome.chunks == len(set(robot.installed_at))
    assert robot.installed_at[-1] < 16


@pytest.mark.slow  # over half a second of wall time
def test_each_request_carries_its_own_fresh_observation(gw) -> None:
    robot = Robot()
    with open_policy(gw, control_hz=60) as policy:
        outcome = run(policy, robot, max_actions=40)
    assert gw.act_requests() == outcome.chunks == len(robot.observations)
    assert [p.observation for p in robot.chunks] == robot.observations
    # Each chunk's first step was requested after the previous chunk had started playing.
    assert robot.observed_at[0] == 0
    assert all(later > 0 for later in robot.observed_at[1:])


@pytest.mark.slow  # over half a second of wall time
def test_prefetch_keeps_30_chunks_flowing_without_underrun(gateway) -> None:
    # A real inference time well below the 0.4 s runway: the lead's 25 % margin on it then
    # absorbs scheduling noise on a loaded machine.
    gateway.set_latency(latency_ms=150, jitter_ms=0, scale=1.0)
    robot = Robot()
    with open_policy(gateway, control_hz=20) as policy:
        outcome = run(policy, robot, max_actions=31 * 8)
    # One request per open-loop horizon (8 rows) of motion, the most a run asks of one in
    # flight: each answer lands as the horizon of the chunk playing runs out, and the last
    # rows need none. Nothing is discarded.
    assert outcome.chunks >= 30 and outcome.requests == outcome.chunks
    assert outcome.underruns == 0 and robot.underruns == []
    assert "waiting" not in robot.statuses
    # One request in flight at a time: the gateway never queued two from this loop.
    assert max(gateway.counters()["max_queue_depth"].values()) <= 1


@pytest.mark.slow  # over half a second of wall time
def test_without_prefetch_every_chunk_boundary_is_an_underrun(gw) -> None:
    robot = Robot()
    with open_policy(gw, control_hz=60) as policy:
        outcome = run(policy, robot, max_actions=40, prefetch=False)
    chunks = outcome.chunks
    assert chunks >= 3 and outcome.underruns == chunks - 1 == len(robot.underruns)
    assert outcome.underrun_s > 0
    # Each chunk plays its open-loop horizon (8 rows) and slows to rest on its last row (delta
    # rows: a zero velocity); only then is the next observation taken: strictly closed loop.
    reports = robot.first_reports()
    lengths = [len(report.rows) for report in reports]
    assert all(report.rows[-1][:7] == [0.0] * 7 for report in reports[:-1])
    assert all(report.rows[:report.ramp_index] == p.action_chunk.steps[:report.ramp_index]
               for report, p in zip(reports, robot.chunks))
    assert robot.observed_at == [sum(lengths[:k]) for k in range(chunks)]
    assert robot.played_as_reported() and outcome.rows_beyond_horizon == 0
    assert robot.statuses == (
        ["starting", "running"] + ["waiting", "running"] * (chunks - 1) + ["done"]
    )
    assert f"{chunks - 1} underruns" in repr(outcome)


@pytest.mark.slow  # over half a second of wall time
def test_cold_start_is_waited_out_and_latency_average_seeded_warm(gateway_factory) -> None:
    gateway = gateway_factory(cold_start_s=1.5)
    robot = Robot()
    warming: list = []
    with open_policy(gateway, control_hz=30, on_warming=lambda w, e: warming.append(e)) as p:
        with pytest.warns(UserWarning, match="loading"):
            outcome = run(p, robot, max_actions=6 * 8)
    assert outcome.reason == "completed" and outcome.chunks >= 6
    assert robot.statuses[0] == "starting" and "running" in robot.statuses
    assert warming and all(eta == pytest.approx(1.5, abs=0.5) for eta in warming)
    # Every cold attempt re-observed: more than one observation before the first action.
    cold_attempts = robot.observed_at.count(0)
    assert cold_attempts >= 2
    assert gateway.counters()["requests"]["act"] == cold_attempts - 1 + outcome.chunks
    prefetches = [n for n in robot.observed_at if n > 0]
    # No warm sample yet: the first prefetch fires after the first step of the first chunk.
    assert prefetches[0] == 1
    # Later prefetches use an average of warm requests only; seeded with the 1.5 s cold wait
    # the lead would exceed the 8-step runway and they would fire after one step again.
    played_when_fired = [n - at for n, at in zip(prefetches[1:], robot.installed_at[1:])]
    assert all(played >= 3 for played in played_when_fired[:3])


@pytest.mark.slow  # over half a second of wall time
def test_ready_lets_the_first_request_seed_the_prefetch_lead(gw) -> None:
    robot = Robot()
    with open_policy(gw, control_hz=30) as policy:
        assert policy.ready()[0]
        run(policy, robot, max_actions=16)
    # The model was known loaded, so the first request measured plain latency: the prefetch
    # waits for its lead instead of firing after the first step.
    assert robot.observed_at[1] > 1


@pytest.mark.slow  # over half a second of wall time
def test_on_warming_gets_the_full_load_eta_not_a_countdown(gateway_factory) -> None:
    gateway = gateway_factory(cold_start_s=30.0)
    robot = Robot()
    etas: list = []
    with open_policy(gateway, on_warming=lambda waited, eta: etas.append(eta)) as policy:
        # Start the load and let part of it pass, so a countdown would have shrunk.
        with pytest.raises(Unavailable):
            policy.wait_until_ready(timeout_s=2.0, poll_s=0.5)
        with quiet_loading_notice():
            outcome = run(policy, robot, max_actions=10, max_seconds=0.8)
    assert outcome.reason == "timeout"
    assert etas and all(eta == pytest.approx(30.0, abs=0.01) for eta in etas)


def test_strict_check_of_a_prefetch_observation_fails_where_it_was_taken(gw) -> None:
    robot = Robot()
    first = robot.observe

    def observe():
        obs = first()
        if len(robot.observations) == 2:
            # The second observation lost a camera.
            return sequence_ai.Observation(obs.images[:1], obs.proprioception, obs.instruction)
        return obs

    with open_policy(gw, control_hz=60, validate="strict") as policy:
        with pytest.raises(sequence_ai.InvalidRequest, match="missing view") as info:
            policy.run(observe, robot.act, max_actions=40, **robot.callbacks())
    # Raised on the request's own thread before anything was sent, and handed to the driving
    # thread while the first chunk was still playing.
    assert robot.observed_at[1] <= len(robot.acts) < len(robot.reports[0][1].rows)
    assert info.value.outcome.reason == "raised:InvalidRequest" and robot.holds == 1
    assert gw.act_requests() == 1


@pytest.mark.slow  # over half a second of wall time
def test_startup_budget_exhausted_raises_unavailable_with_hold(gateway_factory) -> None:
    gateway = gateway_factory(cold_start_s=60.0)
    robot = Robot()
    with open_policy(gateway) as policy:
        with quiet_loading_notice(), pytest.raises(Unavailable) as info:
            run(policy, robot, max_actions=10, startup_timeout_s=0.8)
    assert info.value.warming is True
    assert info.value.outcome.reason == "raised:Unavailable"
    assert info.value.outcome.actions == 0 and robot.acts == []
    assert robot.holds == 1


@pytest.mark.slow  # over half a second of wall time
def test_max_seconds_bounds_the_cold_start(gateway_factory) -> None:
    gateway = gateway_factory(cold_start_s=60.0)
    robot = Robot()
    with open_policy(gateway) as policy:
        with quiet_loading_notice():
            outcome = run(policy, robot, max_actions=10, max_seconds=0.8)
    assert outcome.reason == "timeout" and outcome.stopped_early
    assert robot.acts == [] and robot.holds == 1


@pytest.mark.slow  # over half a second of wall time
def test_max_seconds_bounds_an_unwaited_first_fill_that_stalls(gw) -> None:
    robot = Robot()
    gw.inject("stall", seconds=None)
    with open_policy(gw) as policy:
        outcome = run(policy, robot, max_actions=10, max_seconds=0.5, startup_timeout_s=0)
        gw.clear_faults()
    assert outcome.reason == "timeout" and robot.holds == 1 and robot.acts == []


@pytest.mark.slow  # over half a second of wall time
def test_max_seconds_bounds_a_fetch_stalled_mid_run(gw) -> None:
    robot = Robot()

    stall_after_first = robot.after_first_chunk(lambda: gw.inject("stall", seconds=None))

    with open_policy(gw, control_hz=60) as policy:
        outcome = run(policy, robot, max_actions=100, max_seconds=1.0, on_chunk=stall_after_first)
        gw.clear_faults()
    assert outcome.reason == "timeout"
    # The first chunk played to its last row and came to rest there; then the loop waited.
    assert outcome.chunks == 1 and outcome.actions == len(robot.reports[0][1].rows)
    assert outcome.rows_beyond_horizon > 0 and robot.played_as_reported()
    assert outcome.underruns == 1 and robot.holds == 1


def test_mid_run_warming_raises_unavailable_and_holds(gateway) -> None:
    robot = Robot()

    go_cold = robot.after_first_chunk(lambda: gateway.inject("warming", seconds=30))

    with open_policy(gateway, control_hz=60) as policy:
        with pytest.raises(Unavailable) as info:
            run(policy, robot, max_actions=100, on_chunk=go_cold)
    assert info.value.warming is True
    assert info.value.outcome.reason == "raised:Unavailable"
    assert 1 <= len(robot.acts) <= len(robot.reports[0][1].rows) and robot.holds == 1
    assert robot.played_as_reported() and len(robot.chunks) == 1


@pytest.mark.parametrize(
    ("fault", "status", "error"),
    [
        ("status", 500, SequencesError),
        ("status", 503, Unavailable),
        ("status", 402, OutOfCredit),
        ("reset", None, Unavailable),
    ],
)
def test_service_errors_mid_run_are_raised_with_outcome_after_hold(
    gw, fault: str, status, error
) -> None:
    robot = Robot()

    fail_next = robot.after_first_chunk(lambda: gw.inject(fault, status=status))

    with open_policy(gw, control_hz=60) as policy:
        with pytest.raises(error) as info:
            run(policy, robot, max_actions=100, on_chunk=fail_next)
    assert info.value.outcome.reason == f"raised:{type(info.value).__name__}"
    assert info.value.outcome.ending is sequence_ai.Ending.RAISED
    assert info.value.outcome.error == type(info.value).__name__
    assert info.value.outcome.stopped_early
    # Raised at the step after the failure arrived, not after the chunk playing ran out.
    assert 1 <= len(robot.acts) <= len(robot.reports[0][1].rows) and robot.holds == 1
    assert robot.played_as_reported() and len(robot.chunks) == 1


@pytest.mark.parametrize("fault", ["nan", "inf", "wrong_dim", "empty", "malformed"])
def test_a_chunk_failing_sanity_checks_never_reaches_act(gw, fault: str) -> None:
    robot = Robot()

    corrupt_next = robot.after_first_chunk(lambda: gw.inject(fault))

    with open_policy(gw, control_hz=60) as policy:
        with pytest.raises(InvalidResponse) as info:
            run(policy, robot, max_actions=100, on_chunk=corrupt_next)
    assert info.value.outcome.reason == "raised:InvalidResponse"
    # Only the first (good) chunk was played.
    assert len(robot.chunks) == 1 and robot.played_as_reported()
    assert robot.acts == robot.chunks[0].action_chunk.steps[: len(robot.acts)]
    assert robot.holds == 1


@pytest.mark.parametrize("where", ["observe", "act", "validate", "until", "on_chunk"])
def test_callback_errors_are_reraised_with_outcome_after_one_hold(gw, where: str) -> None:
    robot = Robot()
    calls = {"n": 0}

    def boom(*args):
        calls["n"] += 1
        if calls["n"] == 2:
            raise RuntimeError(f"{where} failed")
        return {"observe": robot.observe, "act": robot.act}.get(where, lambda *a: None)(*args)

    kwargs = {"max_actions": 40}
    if where in ("observe", "act"):
        observe = boom if where == "observe" else robot.observe
        act = boom if where == "act" else robot.act
        options = robot.callbacks()
        with open_policy(gw, control_hz=60) as policy:
            with pytest.raises(RuntimeError) as info:
                policy.run(observe, act, **kwargs, **options)
    else:
        def false_until(*args):
            boom(*args)
            return False

        def true_validate(*args):
            boom(*args)
            return True

        hook = {"validate": true_validate, "until": false_until, "on_chunk": boom}[where]
        with open_policy(gw, control_hz=60) as policy:
            with pytest.raises(RuntimeError) as info:
                run(policy, robot, **kwargs, **{where: hook})
    assert info.value.outcome.reason == "raised:RuntimeError"
    assert info.value.outcome.stopped_early
    assert robot.holds == 1


def test_validate_false_stops_before_act_and_holds(gw) -> None:
    robot = Robot()
    seen: list = []

    def validate(row) -> bool:
        seen.append(row)
        return len(seen) < 3

    with open_policy(gw, control_hz=60) as policy:
        outcome = run(policy, robot, max_actions=40, validate=validate)
    assert outcome.reason == "validate" and outcome.stopped_early
    assert len(robot.acts) == 2 and robot.holds == 1


def test_until_ends_early_and_holds_once(gw) -> None:
    robot = Robot()
    with open_policy(gw, control_hz=60) as policy:
        outcome = run(policy, robot, max_actions=40, until=lambda: len(robot.acts) >= 5)
    assert outcome.reason == "until" and outcome.stopped_early
    assert len(robot.acts) == 5 and robot.holds == 1


def test_each_run_starts_with_an_empty_buffer(gw) -> None:
    with open_policy(gw, control_hz=60) as policy:
        policy.predict(make_observation(joints=[0.5] * 7))
        assert policy.buffered == 8
        first = Robot(instruction="wave")
        stop = run(policy, first, max_actions=40, validate=lambda row: len(first.acts) < 3)
        assert stop.reason == "validate" and policy.buffered == 0
        second = Robot(instruction="stack the blocks")
        run(policy, second, max_actions=4)
    # The second run played its own chunk, requested with its own observation.
    assert second.chunks[0].observation is second.observations[0]
    assert second.acts == second.chunks[0].action_chunk.steps[:4]


def test_loop_callbacks_cannot_reenter_the_policy(gw) -> None:
    robot = Robot()
    with open_policy(gw, control_hz=60) as policy:

        def on_chunk(prediction) -> None:
            policy.predict(make_observation())

        with pytest.raises(SequencesError, match="inside a running loop") as info:
            run(policy, robot, max_actions=16, on_chunk=on_chunk)
    assert info.value.outcome.reason == "raised:SequencesError" and robot.holds == 1
    assert robot.acts == []


def test_validate_none_warns_once_per_policy(gw) -> None:
    robot = Robot()
    with open_policy(gw, control_hz=60) as policy:
        with pytest.warns(UserWarning, match="validate"):
            policy.run(robot.observe, robot.act, max_actions=2, progress=False)
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            policy.run(robot.observe, robot.act, max_actions=2, progress=False)


def test_no_fetch_thread_survives_close(gw) -> None:
    robot = Robot()
    with open_policy(gw, control_hz=60) as policy:
        run(policy, robot, max_actions=24)
    assert fetch_threads() == []


def test_run_checks_its_arguments(gw) -> None:
    robot = Robot()
    with open_policy(gw) as policy:
        for bad in ({"max_actions": 0}, {"max_actions": 1.5}, {"max_actions": True},
                    {"max_actions": 5, "max_seconds": 0},
                    {"max_actions": 5, "max_seconds": float("inf")},
                    {"max_actions": 5, "smooth_seam": -1},
                    {"max_actions": 5, "controller": "torque"},
                    {"max_actions": 5, "progress": "yes"},
                    {"max_actions": 5, "model": "other"}):
            with pytest.raises(ValueError):
                policy.run(robot.observe, robot.act, validate=robot.validate, **bad)
        with pytest.raises(TypeError):
            policy.run(robot.observe, robot.act, 5)  # max_actions is keyword-only
    assert gw.act_requests() == 0


# -- seam ------------------------------------------------------------------------------------


def _two_runs(gateway, model: str, **kwargs):
    # Synchronous refills play every chunk from its first row, so the two runs compare row
    # for row (with prefetch, how many rows are due on arrival depends on timing).
    kwargs.setdefault("prefetch", False)
    plain, smoothed = Robot(model), Robot(model)
    with open_policy(gateway, model=model, control_hz=120) as policy:
        first = run(policy, plain, max_actions=kwargs.pop("max_actions"), **kwargs)
        second = run(policy, smoothed, max_actions=first.actions, smooth_seam=4, **kwargs)
    return plain, smoothed, first, second


@pytest.mark.slow  # over half a second of wall time
def test_smooth_seam_blends_absolute_rows_but_measures_before(gw) -> None:
    plain, smoothed, first, second = _two_runs(gw, ABSOLUTE_REACH, max_actions=64)
    # The first chunk's commands: its 32 rows, the last ones slowing to rest.
    per_chunk = len(plain.reports[0][1].rows)
    assert first.chunks == second.chunks == 2 and first.action_space == "joint_absolute"
    # Measured on the rows act would get, before blending: the same jump either way.
    assert first.max_seam_jump is not None and first.max_seam_jump > 0
    assert second.max_seam_jump == pytest.approx(first.max_seam_jump)
    # Never the first chunk; only the first 4 rows of a later one; then identical again.
    assert smoothed.acts[:per_chunk] == plain.acts[:per_chunk]
    blended = smoothed.acts[per_chunk:per_chunk + 4]
    assert all(b != p for b, p in zip(blended, plain.acts[per_chunk:per_chunk + 4]))
    assert smoothed.acts[per_chunk + 4:] == plain.acts[per_chunk + 4:]
    # Each blended row lies between the last executed row and the chunk's own row.
    last = plain.acts[per_chunk - 1]
    for blend, own in zip(blended, plain.acts[per_chunk:]):
        for b, lo_hi in zip(blend, zip(last, own)):
            assert min(lo_hi) - 1e-9 <= b <= max(lo_hi) + 1e-9


def test_smooth_seam_passes_delta_rows_through(gw) -> None:
    plain, smoothed, first, second = _two_runs(gw, REACH, max_actions=24)
    assert first.action_space == "joint_delta"
    assert smoothed.acts == plain.acts
    assert second.max_seam_jump == pytest.approx(first.max_seam_jump)


@pytest.mark.slow  # over half a second of wall time
def test_smooth_seam_on_joint_positions_leaves_the_gripper_dim_alone(gw) -> None:
    with open_policy(gw, model=REACH) as policy:
        # Walk the simulated arm to the instruction's target, where the gripper closes.
        target = [0.0] * 7
        for _ in range(6):
            steps = policy.predict(make_observation(REACH, joints=target)).action_chunk.steps
            target = [q + d for q, d in zip(target, steps[-1][:7])]

    class Reacher(Robot):
        # First chunk from far away (gripper open), every later one at the target (closed).
        def joints_for(self, n: int) -> list:
            return [0.0] * 7 if n == 0 else target

    plain, smoothed = Reacher(REACH), Reacher(REACH)
    with open_policy(gw, model=REACH, control_hz=120) as policy:
        first = run(policy, plain, max_actions=24, controller="joint_position", prefetch=False)
        second = run(
            policy, smoothed, max_actions=24, controller="joint_position", smooth_seam=4,
            prefetch=False,
        )
    n = len(plain.reports[0][1].rows)
    assert plain.acts[n - 1][7] == 0.0 and plain.acts[n][7] == 1.0
    assert smoothed.acts[:n] == plain.acts[:n]
    for b, p in zip(smoothed.acts[n : n + 4], plain.acts[n : n + 4]):
        assert b[7] == p[7] == 1.0
        assert b[:7] != p[:7]
    assert second.max_seam_jump == pytest.approx(first.max_seam_jump)
    assert first.max_seam_jump >= 1.0


# -- controllers ------------------------------------------------------------------------------


def test_native_controller_hands_prepared_rows(gw) -> None:
    robot = Robot()
    with open_policy(gw, control_hz=60) as policy:
        model = policy.spec()
        run(policy, robot, max_actions=16, controller="native")
    assert robot.played_as_reported()
    installs = robot.whole_row_installs()
    assert installs and installs[0][2] == 0
    for prediction, report, due in installs:
        # Before the rest ramp, the chunk's own prepared rows from its due row.
        assert report.rows[: report.ramp_index] == [
            sequence_ai.prepare(prediction.action_chunk, model, due + i)
            for i in range(report.ramp_index)
        ]
    assert all(row[7] in (0.0, 1.0) and all(-1 <= v <= 1 for v in row) for row in robot.acts)


def test_joint_position_controller_offsets_each_chunk_by_its_own_request_joints(gw) -> None:
    robot = Robot()
    with open_policy(gw, control_hz=60) as policy:
        model = policy.spec()
        run(policy, robot, max_actions=24, controller="joint_position")
    assert len(robot.chunks) >= 3 and robot.played_as_reported()
    # The first chunk plays from row 0; a prefetched one from the row due on arrival
    # (test_continuity.py checks that row under a delayed answer).
    assert robot.rows_due(0) == 0
    for prediction, report, due in robot.whole_row_installs():
        q = prediction.observation.proprioception.joint_positions
        assert q in [robot.joints_for(n) for n in range(len(robot.observations))]
        for i, target in enumerate(report.rows[: report.ramp_index]):
            row = sequence_ai.prepare(prediction.action_chunk, model, due + i)
            assert target[:7] == pytest.approx([qj + r for qj, r in zip(q, row[:7])])
            assert target[7] == row[7]


def test_joint_position_controller_passes_absolute_rows_prepared(gw) -> None:
    robot = Robot(ABSOLUTE_REACH)
    with open_policy(gw, model=ABSOLUTE_REACH, control_hz=120) as policy:
        run(policy, robot, max_actions=32, controller="joint_position")
    assert robot.played_as_reported()
    installs = robot.whole_row_installs()
    assert installs and installs[0][2] == 0
    for prediction, report, due in installs:
        steps = prediction.action_chunk.steps
        assert report.rows[: report.ramp_index] == steps[due : due + report.ramp_index]


def test_joint_position_controller_refuses_a_model_without_conversion(gw) -> None:
    robot = Robot()
    with open_policy(gw, model="sim-stateless-ee-delta") as policy:
        with pytest.raises(ValueError, match="conversion"):
            run(policy, robot, max_actions=5, controller="joint_position")
    assert gw.act_requests() == 0


# -- progress ---------------------------------------------------------------------------------


class _Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


@pytest.mark.parametrize(("tty", "progress", "shown"), [
    (False, "auto", False), (True, "auto", True), (True, False, False), (False, True, True),
])
def test_progress_line_goes_to_stderr_only_when_asked_or_a_terminal(
    gw, monkeypatch: pytest.MonkeyPatch, tty: bool, progress, shown: bool
) -> None:
    stderr = _Terminal() if tty else io.StringIO()
    monkeypatch.setattr(sys, "stderr", stderr)
    robot = Robot()
    with open_policy(gw, control_hz=60) as policy:
        run(policy, robot, max_actions=10, progress=progress)
    text = stderr.getvalue()
    if shown:
        assert text.startswith("\r") and "running" in text and text.endswith("\n")
        assert text.count("\n") == 1
    else:
        assert text == ""


def test_an_unlisted_model_needs_control_hz_from_connect(gw) -> None:
    robot = Robot()
    with open_policy(gw, model="not-in-the-catalogue") as policy:
        with pytest.raises(ValueError, match="does not list it; pass control_hz="):
            run(policy, robot, max_actions=8)
    assert robot.observations == [] and robot.holds == 0
    with open_policy(gw, model="not-in-the-catalogue", control_hz=15) as policy:
        # Past the refusal: the request goes out, and the gateway does not serve the model.
        with pytest.raises(sequence_ai.InvalidRequest, match="404"):
            run(policy, robot, max_actions=8)
    assert len(robot.observations) == 1 and robot.holds == 1



# -- the catalogue sets rate and horizon; every request ends; 429 --------------------------------


def test_predict_refuses_a_chunk_disagreeing_with_a_known_catalogue_row(gw) -> None:
    with open_policy(gw) as policy:
        assert policy.spec().control_hz == 15.0
        gw.inject("chunk_fields", fields={"control_frequency_hz": 1000.0})
        with pytest.raises(InvalidResponse, match="frequency_hz is 1000, expected control_hz = 15"):
            policy.predict(make_observation())
        assert policy.buffered == 0
        gw.inject("rows", rows=16)
        with pytest.raises(InvalidResponse, match="16 rows, expected at most action_horizon = 15"):
            policy.next_action(make_observation())
        assert len(policy.predict(make_observation()).action_chunk) == 15


@pytest.mark.slow  # over half a second of wall time
def test_no_fetch_thread_outlives_its_run_by_more_than_its_deadline(gw) -> None:
    # The prefetch trickles (a byte every 0.2 s, for minutes); the run ends at max_seconds,
    # and the request it abandoned ends at its own deadline, half a second later.
    robot = Robot()

    trickle_next = robot.after_first_chunk(lambda: gw.inject("trickle", seconds=0.2))

    with open_policy(gw, control_hz=60) as policy:
        outcome = run(policy, robot, max_actions=1000, max_seconds=1.0, on_chunk=trickle_next)
        assert outcome.reason == "timeout" and robot.holds == 1
        # A hang guard, not a timer: without the whole-request deadline it never ends.
        assert wait_for(lambda: fetch_threads() == [])
        gw.clear_faults()


@pytest.mark.slow  # over half a second of wall time
def test_a_rate_limit_before_the_first_action_is_waited_out(gw) -> None:
    robot = Robot()
    gw.inject("status", status=429, seconds=1)
    with open_policy(gw, control_hz=60) as policy:
        with pytest.warns(UserWarning, match="rate limited"):
            outcome = run(policy, robot, max_actions=16)
    assert outcome.reason == "completed" and robot.holds == 0
    # The limited attempt and the retry were both taken before the first action.
    assert robot.observed_at[:2] == [0, 0]
    assert gw.act_requests() == outcome.chunks + 1


def test_a_rate_limit_without_startup_budget_raises_with_hold(gw) -> None:
    robot = Robot()
    gw.inject("status", status=429, seconds=1)
    with open_policy(gw, control_hz=60) as policy:
        with pytest.raises(sequence_ai.RateLimited) as info:
            run(policy, robot, max_actions=16, startup_timeout_s=0)
    assert info.value.retry_after_s == 1.0
    assert info.value.outcome.reason == "raised:RateLimited" and robot.acts == []
    assert robot.holds == 1
