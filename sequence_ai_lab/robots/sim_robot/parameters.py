"""`sim_robot`'s parameters: one `Spec` table, declared and checked as the node's own are."""

from __future__ import annotations

from dataclasses import dataclass

from rcl_interfaces.msg import ParameterDescriptor, SetParametersResult
from rclpy.node import Node
from rclpy.parameter import Parameter

from sequence_ai_lab.robots.shared.arm import HOME, JOINT_NAMES
from sequence_ai_lab.robots.shared.render import IMAGE_SIZE, VIEWS
from sequence_ai_lab.robots.sim_robot.task import PICK, TASKS
from sequence_ai_lab.robots.sim_robot.trajectory import Replacement
from sequence_ai_lab.robots.sim_robot.world import PhysicsMode, TimeMode
from sequence_ai_ros.params.spec_table import Spec, constraints, declare_read_only, spec_problem

TRANSPORTS = ("raw", "compressed", "both")
# rendered: drawn from the arm's state (when it moved); premade: drawn once at start, so the
# frames cost only their publishing (the benchmarks' light feed: the load is the subscriber's).
CAMERA_FRAMES = ("rendered", "premade")
# numpy: drawn from the world's poses (cheap); mujoco: MuJoCo's renderer through EGL (the
# meshes, lit; slow on a CPU); auto: mujoco when one of its frames fits the camera budget.
RENDERERS = ("numpy", "mujoco", "auto")
ARM_GAINS = ("franka_ros", "polymetis")  # physics.py's ARM_GAINS (imported only with MuJoCo)

SPECS: dict[str, Spec] = {
    "physics": Spec(
        PhysicsMode.MUJOCO.value,
        "mujoco (the arm under joint impedance, the hand, a cup and a block, contacts) | "
        "kinematic (the arm exactly where its commands put it, within its limits; no objects)",
        choices=tuple(m.value for m in PhysicsMode),
    ),
    "arm_gains": Spec(
        "franka_ros",
        "the arm's joint impedance: franka_ros (franka_ros' joint impedance controller: stiff) | "
        "polymetis (Polymetis' default stiffness, DROID's: compliant, lags a few tenths of a s)",
        choices=ARM_GAINS,
    ),
    "physics_hz": Spec(500.0, "MuJoCo steps per second of world time", float_range=(500.0, 5000.0)),
    "control_period_s": Spec(
        1.0 / 15.0,
        "world time one command advances with time_mode frozen (s): DROID's 15 Hz",
        float_range=(0.001, 1.0),
    ),
    "render": Spec("numpy", "camera renderer: numpy | mujoco | auto", choices=RENDERERS),
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


# Live parameters: they apply while sim_robot runs (layout_seed and task from the next ~/reset).
LIVE_SPECS: dict[str, Spec] = {
    "time_mode": Spec(
        TimeMode.REALTIME.value,
        "realtime (the world follows the wall clock) | frozen (it advances control_period_s per "
        "command received)",
        choices=tuple(m.value for m in TimeMode),
    ),
    "layout_seed": Spec(
        0,
        "the layout of the next ~/reset; later resets take the next seeds",
        int_range=(0, 2**31 - 1),
    ),
    "task": Spec(PICK, "the task judged from the next ~/reset", choices=TASKS),
}


def declare_live(node: Node) -> dict[str, object]:
    """Declare LIVE_SPECS on `node` and return their values (a refused one raises ValueError)."""
    values = {
        name: node.declare_parameter(
            name,
            spec.default,
            ParameterDescriptor(
                name=name,
                description=spec.description,
                additional_constraints=constraints(spec),
                dynamic_typing=True,
            ),
        ).value
        for name, spec in LIVE_SPECS.items()
    }
    refused = [
        reason
        for name, spec in LIVE_SPECS.items()
        if (reason := spec_problem(name, spec, values[name])) is not None
    ]
    if refused:
        raise ValueError("; ".join(refused))
    return values


def check_live(parameters: list[Parameter]) -> SetParametersResult:
    """The verdict on a live change: refused with the reason when a value does not fit."""
    for parameter in parameters:
        spec = LIVE_SPECS.get(parameter.name)
        if spec is None:
            continue  # read-only ones are refused by rclpy itself
        reason = spec_problem(parameter.name, spec, parameter.value)
        if reason is not None:
            return SetParametersResult(successful=False, reason=reason)
    return SetParametersResult(successful=True)


@dataclass(frozen=True)
class SimConfig:
    """The simulator's parameters, checked."""

    physics: PhysicsMode
    arm_gains: str
    physics_hz: float
    control_period_s: float
    render: str
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
            "physics": PhysicsMode(values["physics"]),
        })  # fmt: skip
