"""When an input is too old to act on: the error every stale, missing or invalid input raises,
and the one age rule of a camera. ROS-free, so the gate, the stop policy and the geometry can
name it without the observation cache."""

from __future__ import annotations


class StaleObservation(RuntimeError):
    """An input is missing, too old or invalid: the goal stops rather than send it."""


def check_camera_age(view: str, age_s: float | None, max_age_s: float) -> None:
    """The one freshness rule of a camera, for a request's frames and for the gate's check:
    StaleObservation when `view` has no frame (`age_s` None) or one older than `max_age_s`."""
    if age_s is None:
        raise StaleObservation(f"camera {view}: no image received yet")
    if age_s > max_age_s:
        raise StaleObservation(
            f"camera {view}: newest image is {age_s:.3f} s old; max_image_age_s is {max_age_s:.3f}"
        )
