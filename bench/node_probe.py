"""Run the node (``sequence_ai_ros.node.main``) with observation ages recorded for the bench.

    python bench/node_probe.py AGES.json --ros-args ...

Wraps methods of the node's observation path in this process only: the cache's
``take_images()`` (the frames a request takes: each view's age when taken) and the goal runner's
``_observe()`` (how long building the observation took, and on which thread). On exit the
samples are written to AGES.json: "requests" (per observation: observe() seconds, its thread's
name, and each view's frame age at the moment the frames were taken — since received and since
its header stamp), "stale" (the StaleObservation messages raised by observe()), "underruns"
(monotonic end times of the waits for a late chunk: the run's ``UnderrunEnded`` events) and
"installs" (each chunk the client's loop installs, in either command mode: [monotonic time of
the install, monotonic due time of its first row, chunk number], from an ``on_rows`` hook added
to the run's options ahead of the node's own: no event carries the due time) and "publishes"
(monotonic time of each step the arm gate published, the run's ``RowPlayed`` events: the node's
own command timing, free of the transport and of the bench process's scheduling), "cancels"
(monotonic time each cancel request reached the goal runner) and "holds" (monotonic time each
hold the arm gate published returned). The events come from an observer added to each goal's
run (``observers``), beside the node's feedback; what no event carries is wrapped.
"""

from __future__ import annotations

import dataclasses
import json
import sys
import threading
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))


def _instrument(record: dict[str, list[Any]]) -> None:
    import sequence_ai
    from sequence_ai.events import RowPlayed, RunEvent, UnderrunEnded
    from sequence_ai_ros.core import freshness
    from sequence_ai_ros.goals import driving, runner
    from sequence_ai_ros.inputs import observation_cache
    from sequence_ai_ros.safety import gate

    # Per thread: with several requests in flight, each observes on its own fetch thread.
    local = threading.local()
    original_take = observation_cache.ObservationCache.take_images
    original_observe = driving.GoalDriver._observe
    original_run_policy = driving.GoalDriver._run_policy
    original_hold = gate.ArmGate.hold
    original_cancel = runner.GoalRunner.cancel

    def hold(self: Any) -> Any:
        problem = original_hold(self)
        if problem is None:
            record["holds"].append(time.monotonic())
        return problem

    def cancel(self: Any, handle: Any) -> None:
        record["cancels"].append(time.monotonic())
        original_cancel(self, handle)

    def on_event(event: RunEvent) -> None:
        # Stamped on the run's driving thread: a row when act() (the gate's publish) returned,
        # an underrun where the wait ended.
        if isinstance(event, RowPlayed):
            record["publishes"].append(event.time)
        elif isinstance(event, UnderrunEnded):
            record["underruns"].append(event.time)

    def take_images(self: Any, views: Any = None, older_than_s: float = 0.0) -> None:
        original_take(self, views, older_than_s)
        if older_than_s == 0.0:  # a request's take: every view's newest frame
            now, wall = time.monotonic(), time.time()
            with self._lock:
                entries = dict(self._images)
            local.taken = {
                "received": {v: now - e.received_s for v, e in entries.items()},
                "stamped": {v: wall - e.stamp_s for v, e in entries.items()},
            }

    def observe(self: Any, *args: Any, **kwargs: Any) -> Any:
        local.taken = {}
        start = time.monotonic()
        try:
            observation = original_observe(self, *args, **kwargs)
        except freshness.StaleObservation as exc:
            record["stale"].append(str(exc))
            raise
        record["requests"].append({
            "observe_s": time.monotonic() - start,
            "thread": threading.current_thread().name,
            "since_receipt_s": local.taken.get("received", {}),
            "since_stamp_s": local.taken.get("stamped", {}),
        })
        return observation

    def run_policy(self: Any, run: Any, options: sequence_ai.RunOptions) -> Any:
        # Step mode passes no on_rows; the hook only records, then hands on to the node's.
        node_on_rows = options.on_rows
        seen: set[int] = set()

        def on_rows(installed: Any) -> None:
            if installed.chunk not in seen:  # a re-timed chunk is the same seam
                seen.add(installed.chunk)
                record["installs"].append([time.monotonic(), installed.first_due, installed.chunk])
            if node_on_rows is not None:
                node_on_rows(installed)

        observers = [*options.observers, on_event]
        return original_run_policy(
            self, run, dataclasses.replace(options, on_rows=on_rows, observers=observers)
        )

    observation_cache.ObservationCache.take_images = take_images  # type: ignore[method-assign]
    driving.GoalDriver._observe = observe  # type: ignore[method-assign]
    driving.GoalDriver._run_policy = run_policy  # type: ignore[method-assign]
    gate.ArmGate.hold = hold  # type: ignore[method-assign]
    runner.GoalRunner.cancel = cancel  # type: ignore[method-assign]


def main() -> int:
    out = Path(sys.argv[1])
    record: dict[str, list[Any]] = {
        "requests": [], "stale": [], "underruns": [], "installs": [], "publishes": [],
        "cancels": [], "holds": [],
    }
    _instrument(record)
    from sequence_ai_ros import node

    try:
        return node.main([sys.argv[0], *sys.argv[2:]])
    finally:
        out.write_text(json.dumps(record), encoding="utf-8")


if __name__ == "__main__":
    sys.exit(main())
