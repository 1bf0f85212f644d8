"""RequestScheduler: when the next request goes, and how many are in flight."""

from __future__ import annotations

import threading
from typing import Optional

import pytest

from sequence_ai._run.scheduling import LEAD_FACTOR, Capture, Request, RequestScheduler


class DoneFetch:
    """Stands in for a Fetch: only whether it finished matters to the scheduler."""

    def __init__(self, done: bool) -> None:
        self.done = done

    def is_done(self) -> bool:
        return self.done


def request(sequence: int, done: bool = False) -> Request:
    return Request(DoneFetch(done), Capture(sequence=sequence))  # type: ignore[arg-type]


def scheduler(max_in_flight: int = 3, prefetch: bool = True) -> RequestScheduler:
    return RequestScheduler(max_in_flight, prefetch, threading.Lock())


def due(s: RequestScheduler, *, now: float, latency: Optional[float], left: float,
        stop_by: Optional[float] = None, position: float = 0.0) -> bool:
    return s.top_up_due(now=now, latency_s=latency, position=position, horizon_left=left,
                        period_s=0.1, stop_by=stop_by)


def test_requests_are_staggered_at_latency_over_the_limit() -> None:
    s = scheduler(3)
    assert s.next_stagger(0.6, 0.0) is None  # none in flight: the lead time decides, not a stagger
    s.started(request(0), at=10.0, position=0.0)
    assert s.next_stagger(0.6, 0.0) == pytest.approx(10.2)
    assert not due(s, now=10.1, latency=0.6, left=8)
    assert due(s, now=10.2, latency=0.6, left=8)
    s.started(request(1), at=10.2, position=0.0)
    s.started(request(2), at=10.4, position=0.0)
    assert not s.has_room and s.next_stagger(0.6, 0.0) is None
    assert not due(s, now=20.0, latency=0.6, left=0)


def test_the_first_round_trip_staggers_until_a_warm_sample_exists() -> None:
    s = scheduler(2)
    s.first_answered(started=5.0, latency_s=0.4)
    s.started(request(0), at=5.5, position=0.0)
    assert s.next_stagger(None, 0.0) == pytest.approx(5.7)


def test_with_none_in_flight_a_request_starts_once_the_horizon_left_falls_to_the_lead() -> None:
    s = scheduler(1)
    lead = LEAD_FACTOR * 0.4 + 0.1
    assert not due(s, now=0.0, latency=0.4, left=lead / 0.1 + 1)
    assert due(s, now=0.0, latency=0.4, left=lead / 0.1)
    # No latency measured yet: at once.
    assert due(s, now=0.0, latency=None, left=100)


def test_no_request_whose_answer_would_land_after_the_last_playable_moment() -> None:
    s = scheduler(1)
    assert not due(s, now=9.7, latency=0.4, left=0, stop_by=10.0)
    assert due(s, now=9.5, latency=0.4, left=0, stop_by=10.0)


def test_without_prefetch_nothing_is_topped_up() -> None:
    s = scheduler(3, prefetch=False)
    assert not due(s, now=0.0, latency=None, left=0)
    s.started(request(0), at=0.0, position=0.0)
    assert s.next_stagger(0.3, 0.0) is None


def test_finished_requests_are_taken_in_observation_order() -> None:
    s = scheduler(3)
    late, early, open_ = request(5, done=True), request(2, done=True), request(7)
    for r in (late, early, open_):
        s.started(r, at=0.0, position=0.0)
    assert s.any_done()
    assert s.take_done() == [early, late]
    assert s.requests == [open_] and not s.any_done()


def test_newer_in_flight_counts_a_request_not_yet_observing() -> None:
    s = scheduler(3)
    s.started(request(4), at=0.0, position=0.0)
    assert not s.newer_in_flight(4) and s.newer_in_flight(3)
    s.started(request(-1), at=0.0, position=0.0)
    assert s.newer_in_flight(10)
    s.abandon()
    assert s.in_flight == 0


def test_requests_are_at_least_horizon_over_n_rows_of_motion_apart() -> None:
    # A fast service (10 ms) would be asked every 5 ms at N=2; the motion since the last
    # request bounds it to N requests per open-loop horizon.
    s = scheduler(2)
    s.installed(horizon_rows=8)
    s.started(request(0), at=10.0, position=3.0)
    assert s.next_stagger(0.01, 5.0) is None  # 2 rows played of the 4 due first
    assert not due(s, now=11.0, latency=0.01, left=6, position=6.9)
    assert s.next_stagger(0.01, 7.0) == pytest.approx(10.005)
    assert due(s, now=11.0, latency=0.01, left=4, position=7.0)
    # With none in flight, the lead time decides only once the motion allows a request.
    s.abandon()
    assert not due(s, now=12.0, latency=0.01, left=0, position=6.0)
    assert due(s, now=12.0, latency=0.01, left=0, position=7.0)


def test_without_a_warm_sample_the_motion_does_not_hold_a_request_back() -> None:
    s = scheduler(1)
    s.installed(horizon_rows=8)
    s.started(request(0), at=0.0, position=0.0)
    s.abandon()
    assert due(s, now=0.1, latency=None, left=8, position=1.0)
