"""The processes `droid.launch.py` starts, described once.

`launch/droid.launch.py` turns this into launch actions; where `ros2 launch` is missing,
`python -m sequence_ai_lab.demo.launcher` starts the same launch as subprocesses. Pure Python:
it imports neither launch nor rclpy.
"""

from __future__ import annotations

import os
import secrets
import socket
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

PACKAGE = "sequence_ai_ros"
NODE_NAME = "sequence_ai"
# The node's parameters file for each `controller` argument, relative to the package's share
# directory (or the checkout): the arm on forward command controllers, or on
# joint_trajectory_controller with chunks as timed trajectories (docs/node.md "Which controller?").
PARAMS_FILES = {
    "forward": "config/droid.yaml",
    "joint_trajectory": "config/droid_jtc.yaml",
}
PARAMS_FILE = PARAMS_FILES["forward"]


@dataclass(frozen=True)
class ModelRobot:
    """Where a model's node parameters come from, and which simulator plays its robot.

    A model on the DROID Franka reads the controller's file, then its overlay files (only what
    differs from pi05-droid's: its views, say); ROS merges several parameter files in order, the
    last one's value winning. A model of another robot names its own `base` file instead.
    """

    simulator: str = "sim_robot"
    base: str = ""  # empty: the controller's DROID file (PARAMS_FILES)
    overlays: tuple[str, ...] = ()

    def params_files(self, controller: str) -> tuple[str, ...]:
        return (self.base or PARAMS_FILES[controller], *self.overlays)


# Models that are not pi05-droid on the DROID Franka; any other model id (a fine-tuned one)
# runs with the controller's DROID file alone.
MODEL_ROBOTS = {
    "cosmos3-edge-policy-droid": ModelRobot(
        overlays=("config/cosmos3-edge-policy-droid.yaml",)
    ),
    "sim-bimanual-reach": ModelRobot("sim_bimanual", base="config/sim-bimanual-reach.yaml"),
    "sim-stateless-ee-delta": ModelRobot(
        "sim_cartesian", base="config/sim-stateless-ee-delta.yaml"
    ),
    "sim-ee-absolute-reach": ModelRobot("sim_cartesian", base="config/sim-ee-absolute-reach.yaml"),
}
DROID_ROBOT = ModelRobot()
GATEWAY_HOST = "127.0.0.1"
# The local gateway prints this line once it serves; the node is configured after it.
GATEWAY_READY_PREFIX = "SEQUENCES_BASE_URL="
# Where the gateway takes its accepted keys from (its --api-key flag would show the key in logs).
GATEWAY_KEYS_ENV = "SEQUENCES_GATEWAY_KEYS"
# A program that starts a sim:=true launch and talks to its gateway itself (make demo's VLM
# planner) chooses the launch's random key through this variable.
SIM_KEY_ENV = "SEQUENCE_AI_SIM_KEY"
# The Fast DDS profile every ROS process of the launch gets (docs/node.md "Large camera frames"):
# the default shared-memory segment is smaller than one camera frame. Humble's and Jazzy's
# Fast DDS (2.x) read the first variable, Fast DDS 3 the second; a profile the environment
# already names (say, the robot's camera drivers' own) is left alone.
DDS_PROFILE_FILE = "config/fastdds_large_frames.xml"
DDS_PROFILE_ENVS = ("FASTRTPS_DEFAULT_PROFILES_FILE", "FASTDDS_DEFAULT_PROFILES_FILE")
_TRUE = ("true", "1", "yes", "on")
_FALSE = ("false", "0", "no", "off")


class LaunchArgumentError(ValueError):
    """A launch argument that is unknown or has a value it cannot take."""


@dataclass(frozen=True)
class Argument:
    """One launch argument: its default and what it means."""

    default: str
    description: str


ARGUMENTS: dict[str, Argument] = {
    "model": Argument("pi05-droid", "catalogue model id"),
    "base_url": Argument(
        "",
        "API base URL; empty = SEQUENCES_BASE_URL or the hosted API (sim:=true: a local "
        "gateway of this launch's own)",
    ),
    "namespace": Argument("", "namespace of the node and its topics (one per robot)"),
    "sim": Argument(
        "false",
        "also start sim_robot and, when base_url is empty, a local gateway on a free port",
    ),
    "autostart": Argument("true", "configure and activate the node at start"),
    "controller": Argument(
        "forward",
        "the arm's controller: forward (forward_command_controller, one command per period: "
        "config/droid.yaml) | joint_trajectory (joint_trajectory_controller, each chunk one "
        "timed trajectory: config/droid_jtc.yaml)",
    ),
}
BOOLEAN_ARGUMENTS = ("sim", "autostart")


@dataclass(frozen=True)
class Process:
    """One process of the launch.

    A ROS node (`node_name` set) is started with the package's `executable` in the launch's
    namespace, reading the launch's parameters files (in order) when `params_file` and then
    `parameters`; any other process (the gateway) gets `arguments` on its command line.
    """

    label: str
    executable: str
    node_name: str = ""
    lifecycle: bool = False
    params_file: bool = False
    parameters: dict[str, str] = field(default_factory=dict)
    arguments: tuple[str, ...] = ()
    env: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class Launch:
    """The processes to start, in start order, and whether to bring the node up."""

    namespace: str
    processes: tuple[Process, ...]
    autostart: bool
    # The node's parameters files (relative to the share directory), in the order they load:
    # the robot's file (by the controller argument), then the model's overlays.
    params_files: tuple[str, ...] = (PARAMS_FILE,)

    @property
    def gateway(self) -> Process | None:
        """The local gateway, if the launch starts one: configure waits until it serves."""
        return next((p for p in self.processes if not p.node_name), None)

    @property
    def node(self) -> Process:
        return next(p for p in self.processes if p.node_name == NODE_NAME)

    @property
    def node_path(self) -> str:
        return node_path(self.namespace)


def is_true(name: str, text: str) -> bool:
    """A boolean launch argument; anything but true/false (and their usual spellings) is refused."""
    value = text.strip().lower()
    if value in _TRUE:
        return True
    if value in _FALSE:
        return False
    raise LaunchArgumentError(f"argument {name}:={text}: expected true or false")


def arguments(given: Mapping[str, str]) -> dict[str, str]:
    """Every argument's value: `given` over the defaults; an unknown name is refused."""
    unknown = sorted(set(given) - set(ARGUMENTS))
    if unknown:
        raise LaunchArgumentError(
            f"argument {unknown[0]!r}: expected one of {', '.join(sorted(ARGUMENTS))}"
        )
    values = {name: argument.default for name, argument in ARGUMENTS.items()}
    values.update(given)
    for name in BOOLEAN_ARGUMENTS:
        is_true(name, values[name])
    if values["controller"] not in PARAMS_FILES:
        raise LaunchArgumentError(
            f"argument controller:={values['controller']}: expected "
            f"{' or '.join(PARAMS_FILES)}"
        )
    return values


def model_robot(model: str) -> ModelRobot:
    """The parameter files and simulator of `model` (the DROID Franka's for a model not listed)."""
    return MODEL_ROBOTS.get(model, DROID_ROBOT)


def node_path(namespace: str, name: str = NODE_NAME) -> str:
    """Fully qualified name of a node in `namespace` ('' = root)."""
    namespace = namespace.strip("/")
    return f"/{namespace}/{name}" if namespace else f"/{name}"


def share_file(relative: str) -> Path:
    """A file of the package: this checkout's when run from source, else the installed one."""
    source = Path(__file__).resolve().parents[2] / relative
    if source.is_file():
        return source
    try:
        from ament_index_python.packages import get_package_share_directory
    except ImportError as exc:
        raise LaunchArgumentError(
            f"{relative}: not next to the package and no ament index"
        ) from exc
    return Path(get_package_share_directory(PACKAGE)) / relative


def dds_profile_env(environ: Mapping[str, str] | None = None) -> dict[str, str]:
    """Environment giving a ROS process the large-frames transport; {} if `environ` (default:
    this process's) already names a Fast DDS profile."""
    environ = os.environ if environ is None else environ
    if any(environ.get(name) for name in DDS_PROFILE_ENVS):
        return {}
    profile = str(share_file(DDS_PROFILE_FILE))
    return {name: profile for name in DDS_PROFILE_ENVS}


def free_port(host: str = GATEWAY_HOST) -> int:
    """A TCP port nothing listens on now, for this launch's own gateway."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind((host, 0))
        return int(probe.getsockname()[1])


def launch_for(
    given: Mapping[str, str], *, gateway_port: int | None = None, api_key: str | None = None
) -> Launch:
    """The processes for these launch arguments.

    With sim:=true and no base_url, the launch gets a gateway of its own on a free port (so a
    second robot's launch never collides with the first's) and a random key that only this
    gateway and this node know; a real key never reaches the simulation.
    """
    values = arguments(given)
    namespace = values["namespace"].strip("/")
    base_url = values["base_url"]
    processes: list[Process] = []
    transport = dds_profile_env()
    node_env: dict[str, str] = dict(transport)
    if is_true("sim", values["sim"]):
        if not base_url:
            port = free_port() if gateway_port is None else gateway_port
            key = api_key or os.environ.get(SIM_KEY_ENV) or secrets.token_urlsafe(24)
            base_url = f"http://{GATEWAY_HOST}:{port}"
            # In the environment, not on the command line: launch prints a failed process's
            # command line, and the environment stays out of logs and `ps`.
            processes.append(
                Process(
                    "gateway",
                    "sequence-ai-gateway",
                    arguments=("--host", GATEWAY_HOST, "--port", str(port)),
                    env={GATEWAY_KEYS_ENV: key},
                )
            )
            node_env["SEQUENCES_API_KEY"] = key
        simulator = model_robot(values["model"]).simulator
        processes.append(
            Process(simulator, simulator, node_name=simulator, env=dict(transport))
        )
    parameters = {"model": values["model"]}
    if base_url:
        parameters["base_url"] = base_url
    processes.append(
        Process(
            "node",
            "sequence_ai_node",
            node_name=NODE_NAME,
            lifecycle=True,
            params_file=True,
            parameters=parameters,
            env=node_env,
        )
    )
    return Launch(
        namespace,
        tuple(processes),
        is_true("autostart", values["autostart"]),
        model_robot(values["model"]).params_files(values["controller"]),
    )
