"""The MuJoCo model of the DROID scene: robosuite's Panda and hand, a table, a cup and a block.

Composed with MuJoCo's `MjSpec` from the asset files robosuite ships (no robosuite Python is
imported: its dependencies are heavy and only its XML and meshes are wanted). No ROS here.
"""

from __future__ import annotations

import importlib.util
import logging
from dataclasses import dataclass
from pathlib import Path

import mujoco
import numpy as np

from sequence_ai_lab.robots.shared.arm import HOME
from sequence_ai_lab.robots.shared.render import IMAGE_SIZE, VIEWS, calibration
from sequence_ai_lab.robots.shared.scene import BLOCK_HALF, CUP_HEIGHT, CUP_RADIUS

CUP_MASS = 0.12  # kg: a ceramic espresso cup's weight, light enough for the hand's grip
BLOCK_MASS = 0.25
TABLE_HALF = np.array([0.6, 0.7, 0.02])
TABLE_CENTRE = np.array([0.35, 0.0, -TABLE_HALF[2]])  # top at z = 0, the robot's base frame
FRICTION = (1.0, 0.005, 0.0001)  # sliding, torsional, rolling: wood and ceramic, roughly

# The arm's joint impedance, tau = Kq (q_desired - q) - Kqd qdot, by name (sim_robot's
# `arm_gains`). On a Franka the torque interface compensates gravity itself, so the links here are
# gravity-compensated too (`gravcomp`): only these springs pull the arm towards its target, and
# it lags as a real one does (docs/sim.md, "The world", has the lag each gives).
ARM_GAINS: dict[str, tuple[np.ndarray, np.ndarray]] = {
    # franka_ros' joint impedance controller (franka_example_controllers' k_gains, d_gains): a
    # Franka driven from ROS, stiff enough to stop within a few centimetres of a hold.
    "franka_ros": (
        np.array([600.0, 600.0, 600.0, 600.0, 250.0, 150.0, 50.0]),
        np.array([50.0, 50.0, 50.0, 20.0, 20.0, 20.0, 10.0]),
    ),
    # Polymetis' default stiffness (franka_hardware.yaml's default_Kq), the controller DROID's
    # arm runs under: compliant, it lags by a few tenths of a second. Polymetis' default damping
    # (4, 6, 5, 5, 3, 2, 1) would leave this model ringing (damping ratios 0.3-0.5 on its inertia
    # at home, which lacks the real joints' friction): Kqd gives a ratio of 0.8 instead.
    "polymetis": (
        np.array([40.0, 30.0, 50.0, 25.0, 35.0, 25.0, 10.0]),
        np.array([8.5, 11.0, 11.5, 8.5, 5.0, 4.5, 2.5]),
    ),
}
# The rotor inertia a geared joint adds (MuJoCo's armature), the usual 0.1 kg·m² of Panda models.
ARMATURE = np.full(7, 0.1)
ARM_TORQUE_LIMITS = np.array([87.0, 87.0, 87.0, 87.0, 12.0, 12.0, 12.0])  # the Panda's
FINGER_STROKE = 0.04  # m per finger: the hand opens 8 cm
FINGER_FORCE = 70.0  # N: the Franka hand's continuous grasping force
# MuJoCo's warnings of a non-finite or huge state: with them it resets the whole state to the
# model's defaults (the arm jumps to its zero pose), unless the step is undone (Physics.step).
UNSTABLE_WARNINGS = (
    mujoco.mjtWarning.mjWARN_BADQPOS,
    mujoco.mjtWarning.mjWARN_BADQVEL,
    mujoco.mjtWarning.mjWARN_BADQACC,
)
_STEP_STATE = mujoco.mjtState.mjSTATE_INTEGRATION
# MuJoCo's own warnings go to the log, not to a MUJOCO_LOG.TXT in the working directory: the
# world reports an unstable step itself.
mujoco.set_mju_user_warning(logging.getLogger(__name__).warning)


def robosuite_assets() -> Path:
    """The `models/assets` folder of the installed robosuite package (found, not imported)."""
    spec = importlib.util.find_spec("robosuite")
    if spec is None or not spec.submodule_search_locations:
        raise ModuleNotFoundError(
            "robosuite is not installed: the physics world needs its Panda assets "
            "(pip install --no-deps 'robosuite==1.5.2', see setup.py's extra 'sim')"
        )
    return Path(next(iter(spec.submodule_search_locations))) / "models" / "assets"


@dataclass(frozen=True)
class Indices:
    """Where the arm, the fingers and the objects live in qpos / qvel / ctrl / body arrays."""

    arm_qpos: np.ndarray
    arm_qvel: np.ndarray
    finger_qpos: np.ndarray  # finger_joint1 (0..0.04), finger_joint2 (-0.04..0)
    cup_qpos: int  # first of 7 (x, y, z, qw, qx, qy, qz)
    cup_qvel: int  # first of 6
    block_qpos: int
    block_qvel: int
    cup_body: int
    block_body: int
    hand_body: int
    left_finger_geoms: frozenset[int]  # the finger's mesh and its pad
    right_finger_geoms: frozenset[int]
    cup_geom: int


def build_model(timestep: float, gains: str = "franka_ros") -> tuple[mujoco.MjModel, Indices]:
    """Compile the scene at `timestep` seconds per physics step, the arm under `gains`."""
    if gains not in ARM_GAINS:
        raise ValueError(f"arm_gains: got {gains!r}, expected one of {', '.join(ARM_GAINS)}")
    kq, kqd = ARM_GAINS[gains]
    assets = robosuite_assets()
    arm = mujoco.MjSpec.from_file(str(assets / "robots" / "panda" / "robot.xml"))
    _mesh_inertias(arm, assets / "robots" / "panda" / "robot.xml")
    hand = mujoco.MjSpec.from_file(str(assets / "grippers" / "panda_gripper.xml"))
    # Robosuite's torque motors are replaced by the impedance below; the hand keeps its own
    # position actuators, at the Franka hand's force.
    for actuator in list(arm.actuators):
        arm.delete(actuator)
    for actuator in hand.actuators:
        actuator.forcerange = [-FINGER_FORCE, FINGER_FORCE]
    # Robosuite's sensors sit on the hand's site; nothing reads them here.
    for sensor in list(hand.sensors):
        hand.delete(sensor)
    flange = arm.body("right_hand")
    flange.add_frame().attach_body(hand.body("right_gripper"), "hand_", "")

    arm.option.timestep = timestep
    arm.option.gravity = [0.0, 0.0, -9.81]
    # Elliptic cones and a few more solver iterations keep a grasped cup from creeping out.
    arm.option.cone = mujoco.mjtCone.mjCONE_ELLIPTIC
    arm.option.impratio = 10.0
    # Every body of the arm and hand, the way the Franka's own gravity model covers the hand.
    for body in arm.bodies:
        body.gravcomp = 1.0
    for i in range(1, 8):
        joint = arm.joint(f"joint{i}")
        joint.armature = float(ARMATURE[i - 1])
        actuator = arm.add_actuator()
        actuator.name = f"arm_{i}"
        actuator.target = f"joint{i}"
        actuator.trntype = mujoco.mjtTrn.mjTRN_JOINT
        actuator.set_to_position(kp=float(kq[i - 1]), kv=float(kqd[i - 1]))
        actuator.forcelimited = mujoco.mjtLimited.mjLIMITED_TRUE
        limit = float(ARM_TORQUE_LIMITS[i - 1])
        actuator.forcerange = [-limit, limit]

    world = arm.worldbody
    world.add_light(pos=[0.4, 0.0, 2.0], dir=[0.0, 0.0, -1.0], diffuse=[0.8, 0.8, 0.8])
    world.add_geom(
        name="table",
        type=mujoco.mjtGeom.mjGEOM_BOX,
        size=TABLE_HALF.tolist(),
        pos=TABLE_CENTRE.tolist(),
        rgba=[0.69, 0.54, 0.38, 1.0],
        friction=list(FRICTION),
    )
    # The floor under the table, for the cameras only (the numpy renderer draws it too).
    world.add_geom(
        name="floor",
        type=mujoco.mjtGeom.mjGEOM_PLANE,
        size=[3.0, 3.0, 0.1],
        pos=[0.0, 0.0, -0.75],
        rgba=[0.36, 0.36, 0.38, 1.0],
        contype=0,
        conaffinity=0,
    )
    cup = world.add_body(name="cup", pos=[0.5, 0.2, CUP_HEIGHT / 2])
    cup.add_freejoint(name="cup_free")
    cup.add_geom(
        name="cup",
        type=mujoco.mjtGeom.mjGEOM_CYLINDER,
        size=[CUP_RADIUS, CUP_HEIGHT / 2, 0.0],
        mass=CUP_MASS,
        rgba=[0.78, 0.16, 0.16, 1.0],
        friction=list(FRICTION),
        condim=4,
    )
    block = world.add_body(name="block", pos=[0.5, -0.2, BLOCK_HALF[2]])
    block.add_freejoint(name="block_free")
    block.add_geom(
        name="block",
        type=mujoco.mjtGeom.mjGEOM_BOX,
        size=BLOCK_HALF.tolist(),
        mass=BLOCK_MASS,
        rgba=[0.16, 0.35, 0.67, 1.0],
        friction=list(FRICTION),
        condim=4,
    )
    _add_cameras(arm)
    model = arm.compile()

    def joint(name: str) -> int:
        return mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_JOINT, name)

    def body(name: str) -> int:
        return mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_BODY, name)

    arm_joints = [joint(f"joint{i}") for i in range(1, 8)]
    fingers = [joint("hand_finger_joint1"), joint("hand_finger_joint2")]

    def geoms_of(*bodies: str) -> frozenset[int]:
        ids = {body(name) for name in bodies}
        return frozenset(g for g in range(model.ngeom) if int(model.geom_bodyid[g]) in ids)

    indices = Indices(
        arm_qpos=model.jnt_qposadr[arm_joints].copy(),
        arm_qvel=model.jnt_dofadr[arm_joints].copy(),
        finger_qpos=model.jnt_qposadr[fingers].copy(),
        cup_qpos=int(model.jnt_qposadr[joint("cup_free")]),
        cup_qvel=int(model.jnt_dofadr[joint("cup_free")]),
        block_qpos=int(model.jnt_qposadr[joint("block_free")]),
        block_qvel=int(model.jnt_dofadr[joint("block_free")]),
        cup_body=body("cup"),
        block_body=body("block"),
        hand_body=body("hand_right_gripper"),
        left_finger_geoms=geoms_of("hand_leftfinger", "hand_finger_joint1_tip"),
        right_finger_geoms=geoms_of("hand_rightfinger", "hand_finger_joint2_tip"),
        cup_geom=mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_GEOM, "cup"),
    )
    return model, indices


def _mesh_inertias(arm: mujoco.MjSpec, path: Path) -> None:
    """Give each link the inertia of its collision mesh at robosuite's mass for it.

    Robosuite's links carry placeholder inertias (0.05-0.3 kg·m² about every axis, ten to thirty
    times a Panda link's): under a joint impedance that much inertia lags like a far heavier arm.
    The meshes' own inertia (MuJoCo computes it from the volume) has a Panda link's scale.
    """
    solid = mujoco.MjSpec.from_file(str(path))
    solid.compiler.inertiafromgeom = mujoco.mjtInertiaFromGeom.mjINERTIAFROMGEOM_TRUE
    solid.compiler.inertiagrouprange = [0, 0]  # the collision meshes, not the visual ones
    model = solid.compile()
    for i in range(1, 8):
        body = arm.body(f"link{i}")
        measured = model.body(f"link{i}")
        scale = body.mass / float(measured.mass[0])
        body.ipos = measured.ipos.tolist()
        body.iquat = measured.iquat.tolist()
        body.inertia = (measured.inertia * scale).tolist()


def _add_cameras(spec: mujoco.MjSpec) -> None:
    """The three DROID views at the numpy renderer's poses, for MuJoCo's own renderer."""
    spec.visual.global_.offwidth = IMAGE_SIZE[0]
    spec.visual.global_.offheight = IMAGE_SIZE[1]
    for view in VIEWS:
        cal = calibration(view)
        # MuJoCo's cameras look along their -z with y up; the optical frame looks along z, y down.
        axes = cal.pose[:3, :3] @ np.diag([1.0, -1.0, -1.0])
        quat = np.zeros(4)
        mujoco.mju_mat2Quat(quat, axes.flatten())
        # The flange (panda_link8) is link7's frame moved 0.107 m along its z axis.
        parent = spec.worldbody if cal.parent == "panda_link0" else spec.body("link7")
        offset = np.zeros(3) if cal.parent == "panda_link0" else np.array([0.0, 0.0, 0.107])
        parent.add_camera(
            name=view,
            pos=(cal.pose[:3, 3] + offset).tolist(),
            quat=quat.tolist(),
            fovy=float(np.degrees(2.0 * np.arctan(cal.height / 2.0 / cal.fy))),
        )


class Physics:
    """One MuJoCo model and its state: the arm tracks position targets through its impedance."""

    def __init__(self, timestep: float, gains: str = "franka_ros") -> None:
        self.model, self.index = build_model(timestep, gains)
        self.data = mujoco.MjData(self.model)
        names = [self.model.actuator(i).name for i in range(self.model.nu)]
        self._arm_ctrl = np.array([names.index(f"arm_{i}") for i in range(1, 8)])
        self._finger_ctrl = np.array(
            [names.index("hand_gripper_finger_joint1"), names.index("hand_gripper_finger_joint2")]
        )

    @property
    def timestep(self) -> float:
        return float(self.model.opt.timestep)

    @property
    def time(self) -> float:
        return float(self.data.time)

    def reset(self, cup: np.ndarray, block: np.ndarray, q: np.ndarray = HOME) -> None:
        """Arm at `q` (at rest, hand open), cup and block at (x, y, yaw) on the table."""
        mujoco.mj_resetData(self.model, self.data)
        self.data.qpos[self.index.arm_qpos] = q
        self.data.qpos[self.index.finger_qpos] = (FINGER_STROKE, -FINGER_STROKE)
        self.place("cup", cup)
        self.place("block", block)
        self.command(q, 0.0)
        mujoco.mj_forward(self.model, self.data)

    def place(self, name: str, xy_yaw: np.ndarray, lift: float = 0.002) -> None:
        """Set an object upright at (x, y, yaw), `lift` above its resting height, at rest."""
        x, y, yaw = (float(v) for v in xy_yaw)
        height = CUP_HEIGHT / 2 if name == "cup" else float(BLOCK_HALF[2])
        qpos, qvel = self._free(name)
        upright_yaw = [np.cos(yaw / 2), 0.0, 0.0, np.sin(yaw / 2)]
        self.data.qpos[qpos : qpos + 7] = [x, y, height + lift, *upright_yaw]
        self.data.qvel[qvel : qvel + 6] = 0.0

    def move(self, name: str, offset: np.ndarray) -> None:
        """Shift an object by `offset` (m), set down upright at its new place, at rest."""
        qpos, _ = self._free(name)
        x, y = self.data.qpos[qpos : qpos + 2] + np.asarray(offset, dtype=float)[:2]
        w, z = self.data.qpos[qpos + 3], self.data.qpos[qpos + 6]
        yaw = 2.0 * np.arctan2(z, w)
        self.place(name, np.array([x, y, yaw]), lift=0.002 + max(0.0, float(offset[2])))
        mujoco.mj_forward(self.model, self.data)

    def _free(self, name: str) -> tuple[int, int]:
        if name == "cup":
            return self.index.cup_qpos, self.index.cup_qvel
        if name == "block":
            return self.index.block_qpos, self.index.block_qvel
        raise ValueError(f"object: got {name!r}, expected 'cup' or 'block'")

    def command(self, q_desired: np.ndarray, gripper: float) -> None:
        """Joint targets for the impedance (rad) and the hand (0 open .. 1 closed)."""
        self.data.ctrl[self._arm_ctrl] = q_desired
        opening = FINGER_STROKE * (1.0 - min(1.0, max(0.0, gripper)))
        self.data.ctrl[self._finger_ctrl] = (opening, -opening)

    def step(self, count: int = 1) -> str:
        """Run `count` physics steps: "" , or what MuJoCo declared unstable. Then the steps are
        undone (everything at rest where it was) instead of MuJoCo's reset of the whole state."""
        before = np.empty(mujoco.mj_stateSize(self.model, _STEP_STATE))
        mujoco.mj_getState(self.model, self.data, before, _STEP_STATE)
        mujoco.mj_step(self.model, self.data, nstep=count)
        warned = [w for w in UNSTABLE_WARNINGS if self.data.warning[w].number > 0]
        if not warned:
            return ""
        what = ", ".join(
            f"{w.name.removeprefix('mjWARN_')} at dof {self.data.warning[w].lastinfo}"
            for w in warned
        )
        for w in warned:
            self.data.warning[w].number = 0
        mujoco.mj_setState(self.model, self.data, before, _STEP_STATE)
        self.data.qvel[:] = 0.0
        mujoco.mj_forward(self.model, self.data)
        return f"MuJoCo declared the simulation unstable ({what})"

    @property
    def q(self) -> np.ndarray:
        return self.data.qpos[self.index.arm_qpos].copy()

    @property
    def qd(self) -> np.ndarray:
        return self.data.qvel[self.index.arm_qvel].copy()

    @property
    def gripper(self) -> float:
        """The hand's measured closing, 0 (8 cm open) .. 1 (fingers together)."""
        f1, f2 = self.data.qpos[self.index.finger_qpos]
        return float(min(1.0, max(0.0, 1.0 - (f1 - f2) / (2 * FINGER_STROKE))))

    def pose(self, name: str) -> np.ndarray:
        """4x4 pose of body `name` (cup, block, hand) in the base frame."""
        body = {"cup": self.index.cup_body, "block": self.index.block_body}.get(name)
        if body is None:
            body = self.index.hand_body if name == "hand" else -1
        if body < 0:
            raise ValueError(f"body: got {name!r}, expected 'cup', 'block' or 'hand'")
        pose = np.eye(4)
        pose[:3, :3] = self.data.xmat[body].reshape(3, 3)
        pose[:3, 3] = self.data.xpos[body]
        return pose

    def object_speed(self, name: str) -> float:
        _, qvel = self._free(name)
        return float(np.linalg.norm(self.data.qvel[qvel : qvel + 3]))

    def fingers_touch_cup(self) -> tuple[bool, bool]:
        """Whether each finger (with its pad) is in contact with the cup now."""
        cup = self.index.cup_geom
        touching: set[int] = set()
        count = self.data.ncon
        for g1, g2 in zip(self.data.contact.geom1[:count], self.data.contact.geom2[:count]):
            if g1 == cup:
                touching.add(int(g2))
            elif g2 == cup:
                touching.add(int(g1))
        return (
            bool(touching & self.index.left_finger_geoms),
            bool(touching & self.index.right_finger_geoms),
        )
