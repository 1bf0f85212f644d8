"""The simulated world of `sim_robot`: the commanded arm, its physics, the trial and its task.

No ROS: the node owns the clock and the topics and calls in here under its lock; tests drive it
directly. The arm's command interfaces (position targets, velocities with their timeout, the
gripper) are `SimArm`'s, as in the kinematic simulator: there it *is* the arm, here it is the
desired state the joint impedance of `physics.py` tracks.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from enum import Enum

import numpy as np

from sequence_ai_lab.robots.shared.arm import HOME, SimArm
from sequence_ai_lab.robots.shared.scene import (
    BLOCK_HALF,
    CUP_HEIGHT,
    MAX_LIFT_M,
    WORKSPACE_X,
    WORKSPACE_Y,
    Layout,
    layout,
)
from sequence_ai_lab.robots.sim_robot.task import PICK, TASKS, Measurement, Quantity, TaskJudge

# Objects placed by a reset or a perturbation fall 2 mm and settle for this long (world time not
# counted in the trial) before the trial starts.
SETTLE_S = 0.3
# The trial's judge and the commanded arm are updated at least this often while the physics
# runs at its own, finer step.
MAX_SLICE_S = 0.01
# Perturbations waiting for their time: a trial's evaluation schedules one or two; the bound keeps
# a client from growing the list each step scans without limit.
MAX_PENDING = 100


class PhysicsMode(str, Enum):
    MUJOCO = "mujoco"
    KINEMATIC = "kinematic"


class TimeMode(str, Enum):
    REALTIME = "realtime"  # the world follows the wall clock
    FROZEN = "frozen"  # the world advances one control period per command received


@dataclass(frozen=True)
class WorldOptions:
    """How the world is built and run; checked on construction."""

    physics: PhysicsMode = PhysicsMode.MUJOCO
    physics_hz: float = 500.0
    arm_gains: str = "franka_ros"  # physics.py's ARM_GAINS: franka_ros | polymetis
    layout_seed: int = 0
    task: str = PICK
    time_mode: TimeMode = TimeMode.REALTIME
    control_period_s: float = 1.0 / 15.0  # DROID's control rate: a frozen world's step per command
    initial_q: tuple[float, ...] = tuple(HOME.tolist())
    velocity_timeout_s: float = 0.2

    def __post_init__(self) -> None:
        if not self.physics_hz >= 500.0:
            raise ValueError(f"physics_hz: got {self.physics_hz}, expected >= 500 Hz")
        if self.layout_seed < 0:
            raise ValueError(f"layout_seed: got {self.layout_seed}, expected an integer >= 0")
        if self.task not in TASKS:
            raise ValueError(f"task: got {self.task!r}, expected one of {TASKS}")
        if not 0.0 < self.control_period_s <= 1.0:
            raise ValueError(
                f"control_period_s: got {self.control_period_s}, expected a period in (0, 1] s"
            )
        if len(self.initial_q) != 7:
            raise ValueError(f"initial_q: got {len(self.initial_q)} values, expected 7")


@dataclass(frozen=True)
class TrialState:
    """What ~/task_state publishes."""

    task: str
    seed: int
    trial: int
    trial_s: float
    success: bool
    success_s: float  # NaN until the first success
    quantities: dict[str, float] = field(default_factory=dict)
    fault: str = ""  # why the trial is void ("": it is not)


@dataclass
class _Perturbation:
    name: str
    offset: np.ndarray
    at_s: float


class World:
    """The arm (kinematic or under MuJoCo physics), the objects and the running trial.

    Not thread-safe: the owner serialises calls (sim_robot holds its lock around them).
    """

    def __init__(self, options: WorldOptions) -> None:
        self.options = options
        self.arm = SimArm(
            q=np.array(options.initial_q), velocity_timeout_s=options.velocity_timeout_s
        )
        self.physics = None
        if options.physics is PhysicsMode.MUJOCO:
            # MuJoCo only when asked: the kinematic arm runs without it.
            try:
                from sequence_ai_lab.robots.sim_robot.physics import Physics
            except ModuleNotFoundError as err:
                raise ModuleNotFoundError(
                    f"physics='mujoco' needs {err.name}: pip install 'mujoco>=3.17' (setup.py's "
                    "`sim` extra), or run with physics 'kinematic'"
                ) from err
            self.physics = Physics(1.0 / options.physics_hz, options.arm_gains)
        self.time_s = 0.0  # world time: trials, perturbations and frozen time count in it
        self.trial = 0
        self.task = options.task
        self.next_task = options.task
        self.next_seed = options.layout_seed
        self.layout: Layout = layout(options.layout_seed)
        self._trial_start_s = 0.0
        self._judge = TaskJudge(self.task)
        self._pending: list[_Perturbation] = []
        self._carry_s = 0.0  # world time owed to the physics: less than one step
        # Why the trial is void ("": it is not): the physics went unstable. The physics then
        # stands still (the arm held where it was) until the next reset.
        self.fault = ""
        self.reset()

    # ----- trials -----

    def reset(self) -> Layout:
        """Start the next trial: the next seed's layout, the arm at home, the hand open."""
        self.layout = layout(self.next_seed)
        self.next_seed += 1
        self.task = self.next_task
        self.arm = SimArm(
            q=np.array(self.options.initial_q), velocity_timeout_s=self.options.velocity_timeout_s
        )
        if self.physics is not None:
            self.physics.reset(np.array(self.layout.cup), np.array(self.layout.block), self.arm.q)
        self.trial += 1
        self._trial_start_s = self.time_s
        self._judge = TaskJudge(self.task)
        self._pending = []
        self.fault = ""
        if self.physics is not None:
            self._step_physics(round(SETTLE_S / self.physics.timestep))
        return self.layout

    def _step_physics(self, steps: int) -> bool:
        """Step the physics; False if it went unstable: then the trial is void (its fault)."""
        assert self.physics is not None
        unstable = self.physics.step(steps)
        if unstable:
            self.fault = (
                f"{unstable} at {self.trial_s:.3f} s of trial {self.trial}: the trial is void, the "
                "world stands still (the arm held where it was) until ~/reset"
            )
        return not unstable

    @property
    def trial_s(self) -> float:
        return self.time_s - self._trial_start_s

    def perturb(self, name: str, offset: np.ndarray, at_s: float) -> str:
        """Move `name` by `offset` at trial time `at_s` (now if past); says what was done."""
        if self.physics is None:
            raise ValueError("perturb: the kinematic arm has no objects (physics: kinematic)")
        offset = np.asarray(offset, dtype=float)
        if name not in ("cup", "block"):
            raise ValueError(f"object: got {name!r}, expected 'cup' or 'block'")
        if offset.shape != (3,) or not np.all(np.isfinite(offset)):
            raise ValueError(f"offset: got {offset.tolist()}, expected 3 finite values (m)")
        if not 0.0 <= offset[2] <= MAX_LIFT_M:
            raise ValueError(
                f"offset: got z {offset[2]:g} m, expected 0 to {MAX_LIFT_M:g} m (the object is set "
                f"down at most {MAX_LIFT_M:g} m above the table)"
            )
        if not math.isfinite(at_s):
            raise ValueError(f"at_s: got {at_s}, expected a finite time (s)")
        x, y = self.physics.pose(name)[:2, 3] + offset[:2]
        if not (WORKSPACE_X[0] <= x <= WORKSPACE_X[1] and WORKSPACE_Y[0] <= y <= WORKSPACE_Y[1]):
            raise ValueError(
                f"offset: got {offset.tolist()}, which sets the {name} at x {x:.3f} m, y {y:.3f} m;"
                f" expected a place on the table's workspace, x in [{WORKSPACE_X[0]:g}, "
                f"{WORKSPACE_X[1]:g}] m and y in [{WORKSPACE_Y[0]:g}, {WORKSPACE_Y[1]:g}] m"
            )
        if at_s <= self.trial_s:
            self.physics.move(name, offset)
            return f"{name} moved by {offset.tolist()} at {self.trial_s:.3f} s"
        if len(self._pending) >= MAX_PENDING:
            raise ValueError(
                f"perturb: {len(self._pending)} perturbations already pending, expected at most "
                f"{MAX_PENDING} per trial (a ~/reset clears them)"
            )
        self._pending.append(_Perturbation(name, offset, at_s))
        return f"{name} will move by {offset.tolist()} at {at_s:.3f} s of trial {self.trial}"

    # ----- time -----

    def advance(self, dt: float, drive: Callable[[float], None] | None = None) -> None:
        """Run the world `dt` seconds on: in slices of at most MAX_SLICE_S, each begun by
        `drive(world time)` (the trajectory player's sample), the arm's command, the physics."""
        remaining = max(0.0, dt)
        while remaining > 1e-12:
            slice_s = min(MAX_SLICE_S, remaining)
            remaining -= slice_s
            if drive is not None:
                drive(self.time_s)
            self.arm.step(slice_s)
            self.time_s += slice_s
            if self.physics is not None and not self.fault:
                self._carry_s += slice_s
                steps = int(self._carry_s / self.physics.timestep + 1e-9)
                self._carry_s -= steps * self.physics.timestep
                self.physics.command(self.arm.q, self.arm.gripper)
                if not self._step_physics(steps):
                    continue
                self._apply_due_perturbations()
                self._judge.update(self.trial_s, self.measure())

    def tick(self, elapsed_s: float, drive: Callable[[float], None] | None = None) -> None:
        """The wall clock moved `elapsed_s`: a realtime world follows it, a frozen one waits."""
        if self.options.time_mode is TimeMode.REALTIME:
            self.advance(elapsed_s, drive)

    def command_received(self, drive: Callable[[float], None] | None = None) -> None:
        """A command arrived: a frozen world advances one control period, a realtime one waits."""
        if self.options.time_mode is TimeMode.FROZEN:
            self.advance(self.options.control_period_s, drive)

    def set_time_mode(self, mode: TimeMode) -> None:
        """Realtime or frozen from now on (the world's time and state carry over)."""
        self.options = replace(self.options, time_mode=mode)

    def _apply_due_perturbations(self) -> None:
        if not self._pending or self.physics is None:
            return
        due = [p for p in self._pending if p.at_s <= self.trial_s]
        self._pending = [p for p in self._pending if p.at_s > self.trial_s]
        for perturbation in due:
            # Checked against the workspace when scheduled; the object may have been moved
            # since, so its new place is kept on the workspace.
            x, y = self.physics.pose(perturbation.name)[:2, 3] + perturbation.offset[:2]
            offset = perturbation.offset.copy()
            offset[0] += float(np.clip(x, *WORKSPACE_X)) - x
            offset[1] += float(np.clip(y, *WORKSPACE_Y)) - y
            self.physics.move(perturbation.name, offset)

    # ----- what is measured -----

    @property
    def q(self) -> np.ndarray:
        return self.arm.q.copy() if self.physics is None else self.physics.q

    @property
    def qd(self) -> np.ndarray:
        return self.arm.qd.copy() if self.physics is None else self.physics.qd

    @property
    def gripper(self) -> float:
        return self.arm.gripper if self.physics is None else self.physics.gripper

    def object_poses(self) -> dict[str, np.ndarray] | None:
        """4x4 poses of the cup and the block (None for the kinematic arm's fixed scene)."""
        if self.physics is None:
            return None
        return {"cup": self.physics.pose("cup"), "block": self.physics.pose("block")}

    def measure(self) -> Measurement:
        """The scene's quantities now (MuJoCo physics only)."""
        if self.physics is None:
            raise ValueError("measure: the kinematic arm has no objects (physics: kinematic)")
        cup, block = self.physics.pose("cup"), self.physics.pose("block")
        axis = cup[:3, 2]
        # The lower end of the cup's axis: its bottom when upright, the lower rim's centre if not.
        bottom_z = float(cup[2, 3] - abs(axis[2]) * CUP_HEIGHT / 2)
        in_block = block[:3, :3].T @ (cup[:3, 3] - block[:3, 3])
        left, right = self.physics.fingers_touch_cup()
        return Measurement(
            cup_bottom_z=bottom_z,
            cup_axis_z=float(axis[2]),
            cup_speed=self.physics.object_speed("cup"),
            cup_in_block=(float(in_block[0]), float(in_block[1])),
            cup_block_distance=float(np.linalg.norm(cup[:2, 3] - block[:2, 3])),
            block_top_z=float(block[2, 3] + BLOCK_HALF[2]),
            block_half_xy=(float(BLOCK_HALF[0]), float(BLOCK_HALF[1])),
            grasped=left and right,
        )

    def state(self) -> TrialState:
        """The trial's state for ~/task_state."""
        quantities = {}
        if self.physics is not None:
            quantities = self.measure().quantities()
            quantities[Quantity.FAULT.value] = float(bool(self.fault))
        success_s = self._judge.success_s
        return TrialState(
            task=self.task,
            seed=self.layout.seed,
            trial=self.trial,
            trial_s=self.trial_s,
            success=self._judge.success,
            success_s=math.nan if success_s is None else success_s,
            quantities=quantities,
            fault=self.fault,
        )
