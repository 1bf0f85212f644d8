"""Run the node (``sequence_ai_ros.node.main``) with observation ages recorded for the bench.

    python bench/node_probe.py AGES.json --ros-args ...

Wraps two methods of the node's observation path in this process only: the cache's
``images()`` (age of each view's newest frame when the request's observation is taken) and
the goal runner's ``_observe()`` (how long building the observation took). On exit the
samples are written to AGES.json: "requests" (per observation: observe() seconds and each
view's frame age carried forward to the end of observe(), i.e. to when the request is sent)
and "frames" (receive times of every camera and joint_states message, per topic).
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))


def _instrument(samples: list[dict[str, Any]], frames: dict[str, list[float]]) -> None:
    from sequence_ai_ros import goals, observations

    taken: dict[str, Any] = {}
    original_images = observations.ObservationCache.images
    original_observe = goals.GoalRunner._observe
    original_store = observations.ObservationCache.store_image
    original_store_joints = observations.ObservationCache.store_joint_state

    def store_image(self: Any, view: str, msg: Any) -> None:
        frames.setdefault(view, []).append(time.monotonic())
        original_store(self, view, msg)

    def store_joint_state(self: Any, msg: Any) -> None:
        frames.setdefault("joint_states", []).append(time.monotonic())
        original_store_joints(self, msg)

    def images(self: Any, max_age_s: float) -> Any:
        now, wall = time.monotonic(), time.time()
        with self._lock:
            entries = dict(self._images)
        taken["at"] = now
        taken["received"] = {v: now - e.received_s for v, e in entries.items()}
        taken["stamped"] = {v: wall - e.stamp_s for v, e in entries.items()}
        return original_images(self, max_age_s)

    def observe(self: Any, *args: Any, **kwargs: Any) -> Any:
        taken.clear()
        start = time.monotonic()
        observation = original_observe(self, *args, **kwargs)
        end = time.monotonic()
        if "at" in taken:
            later = end - taken["at"]
            samples.append({
                "observe_s": end - start,
                "since_receipt_s": {v: a + later for v, a in taken["received"].items()},
                "since_stamp_s": {v: a + later for v, a in taken["stamped"].items()},
            })
        return observation

    observations.ObservationCache.images = images  # type: ignore[method-assign]
    goals.GoalRunner._observe = observe  # type: ignore[method-assign]
    observations.ObservationCache.store_image = store_image  # type: ignore[method-assign]
    observations.ObservationCache.store_joint_state = (  # type: ignore[method-assign]
        store_joint_state
    )


def main() -> int:
    out = Path(sys.argv[1])
    samples: list[dict[str, Any]] = []
    frames: dict[str, list[float]] = {}
    _instrument(samples, frames)
    from sequence_ai_ros import node

    try:
        node.main([sys.argv[0], *sys.argv[2:]])
    finally:
        out.write_text(json.dumps({"requests": samples, "frames": frames}), encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
