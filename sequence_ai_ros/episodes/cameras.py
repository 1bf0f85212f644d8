"""`record_cameras_hz`: the raw camera frames at a decimated rate, beside the JPEGs the model
saw, taken on a thread of their own while a recorded goal runs."""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping

from sequence_ai_ros.episodes.episode import Episode

CAMERA_THREAD = "sequence_ai-episode-cameras"
CAMERA = "camera"


class CameraSampler:
    """Every 1/`rate_hz` s, the newest frame of each camera (once each) into the episode, on
    `camera/<view>`, as the camera published it. `_stop` ends the thread; `_last` is the
    thread's own."""

    def __init__(
        self, episode: Episode, frames: Callable[[], Mapping[str, object]], rate_hz: float
    ) -> None:
        self._episode = episode
        self._frames = frames
        self._period_s = 1.0 / rate_hz
        self._stop = threading.Event()
        self._last: dict[str, object] = {}
        self._thread = threading.Thread(target=self._sample, name=CAMERA_THREAD, daemon=True)
        self._thread.start()

    def stop(self) -> None:
        """Never waits (it is called on the driving thread): the thread ends by itself, and
        a sample taken meanwhile is not put."""
        self._stop.set()

    def _sample(self) -> None:
        while not self._stop.wait(self._period_s):
            frames = self._frames()
            if self._stop.is_set():
                return
            for view, msg in frames.items():
                if self._last.get(view) is msg:
                    continue  # no newer frame since the last sample
                self._last[view] = msg
                self._episode.put(f"{CAMERA}/{view}", msg)
