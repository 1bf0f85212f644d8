"""`sim_robot`'s parameters: one `Spec` table, declared and checked as the node's own are."""

from __future__ import annotations

from dataclasses import dataclass

from rclpy.node import Node

from sequence_ai_ros.params.spec_table import Spec, declare_read_only
from sequence_ai_ros.sim.arm import HOME, JOINT_NAMES
from sequence_ai_ros.sim.render import IMAGE_SIZE, VIEWS
from sequence_ai_ros.sim.trajectory import Replacement

TRANSPORTS = ("raw", "compressed", "both")
# rendered: drawn from the arm's state (when it moved); premade: drawn once at start, so the
# frames cost only their publishing (the benchmarks' light feed: the load is the subscriber's).
CAMERA_FRAMES = ("rendered", "premade")

SPECS: dict[str, Spec] = {
    "rate_hz": Spec(
        100.0, "joint_states rate and integration rate (Hz)", float_range=(1.0, 1000.0)
    ),
    "image_width": Spec(IMAGE_SIZE[0], "camera image width (px)", int_range=(1, 7680)),
    "image_height": Spec(IMAGE_SIZE[1], "camera image height (px)", int_range=(1, 4320)),
    "fps": Spec(
        15.0, "camera frame rate (Hz), 15..30 like DROID's cameras", float_range=(0.1, 60.0)
    ),
    "image_transport": Spec("raw", "raw | compressed | both", choices=TRANSPORTS),
    "views": Spec(list(VIEWS), "camera views to publish", choices=VIEWS),
    "camera_frames": Spec(
        "rendered",
        "rendered (from the arm's state) | premade (drawn once: a light feed for benchmarks)",
        choices=CAMERA_FRAMES,
    ),
    "initial_positions": Spec(
        HOME.tolist(), f"start pose, {len(JOINT_NAMES)} joints (rad)"
    ),
    "initial_gripper": Spec(
        0.0, "start gripper, 0 open .. 1 closed", float_range=(0.0, 1.0)
    ),
    "velocity_timeout_s": Spec(
        0.2, "hold once velocities are this old (s)", float_range=(0.0, 60.0)
    ),
    "jpeg_quality": Spec(90, "quality of the compressed images", int_range=(1, 100)),
    "render_scale": Spec(
        4, "render at 1/scale of the image size, then upscale", int_range=(1, 64)
    ),
    "trajectory_replacement": Spec(
        Replacement.RESTART.value,
        "restart (Humble's joint_trajectory_controller: a new trajectory takes over at once, "
        "from the measured state) | splice (it takes over at its start time: ROS 1, later "
        "ros2_controllers)",
        choices=tuple(r.value for r in Replacement),
    ),
    "allow_nonzero_velocity_at_trajectory_end": Spec(
        True, "accept trajectories ending with a velocity (Humble's default; Jazzy's is false)"
    ),
}


@dataclass(frozen=True)
class SimConfig:
    """The simulator's parameters, checked."""

    rate_hz: float
    image_width: int
    image_height: int
    fps: float
    image_transport: str
    views: tuple[str, ...]
    camera_frames: str
    initial_positions: tuple[float, ...]
    initial_gripper: float
    velocity_timeout_s: float
    jpeg_quality: int
    render_scale: int
    trajectory_replacement: Replacement
    allow_nonzero_velocity_at_trajectory_end: bool

    @classmethod
    def declare(cls, node: Node) -> SimConfig:
        """Declare the table on `node` (read-only) and check it; a refused value raises
        ValueError naming the parameter, the value and what it accepts."""
        values = declare_read_only(node, SPECS)
        initial = tuple(values["initial_positions"])
        if len(initial) != len(JOINT_NAMES):
            raise ValueError(
                f"initial_positions={list(initial)!r} is refused; expected "
                f"{len(JOINT_NAMES)} joint positions"
            )
        return cls(**{
            **values,
            "views": tuple(values["views"]),
            "initial_positions": initial,
            "trajectory_replacement": Replacement(values["trajectory_replacement"]),
        })  # fmt: skip
