"""`python -m sequence_ai_ros.launcher`: what droid.launch.py starts, for machines without launch.

    python -m sequence_ai_ros.launcher sim:=true
    python -m sequence_ai_ros.launcher namespace:=robot2 sim:=true base_url:=http://127.0.0.1:8787

Same arguments as the launch file (model, base_url, namespace, sim, autostart) plus
`params_file`; the same executables (the package's console-script entry points, run with this
interpreter) with the same parameters file; the node configured and activated through its
lifecycle services when autostart is true. Ctrl+C stops every process it started, the node
first so it can hold the arm. Differences from the launch file: with sim:=true and no base_url
the local gateway gets an ephemeral port rather than 8787 (the node is given its URL), and when
one process exits or the node fails to configure, the others are stopped too.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

PACKAGE = "sequence_ai_ros"
NODE_NAME = "sequence_ai"
# The console scripts of setup.py: the launcher runs exactly these functions.
ENTRY_POINTS = {
    "sequence_ai_node": "sequence_ai_ros.node:main",
    "sim_robot": "sequence_ai_ros.sim_robot:main",
    "sequence-ai-gateway": "sequence_ai_gateway.__main__:main",
}
ARGUMENTS = {
    "model": "pi05-droid",
    "base_url": "",
    "namespace": "",
    "sim": "false",
    "autostart": "true",
    "params_file": "",
}
GATEWAY_URL_PREFIX = "SEQUENCES_BASE_URL="
STOP_GRACE_S = 10.0


class LaunchError(RuntimeError):
    """A process could not be started or the node could not be brought up."""


def parse_arguments(argv: Sequence[str]) -> dict[str, str]:
    """`name:=value` pairs as `ros2 launch` takes them, over the launch file's defaults."""
    values = dict(ARGUMENTS)
    for item in argv:
        name, sep, value = item.partition(":=")
        if not sep:
            raise LaunchError(f"argument {item!r}: expected name:=value")
        if name not in ARGUMENTS:
            raise LaunchError(f"argument {name!r}: expected one of {', '.join(sorted(ARGUMENTS))}")
        values[name] = value
    for flag in ("sim", "autostart"):
        if values[flag].strip().lower() not in ("true", "false", "1", "0", "yes", "no"):
            raise LaunchError(f"argument {flag}:={values[flag]}: expected true or false")
    return values


def is_true(text: str) -> bool:
    return text.strip().lower() in ("true", "1", "yes", "on")


def default_params_file() -> Path:
    """config/droid.yaml of this checkout when run from source, else the installed share/ copy."""
    source = Path(__file__).resolve().parents[1] / "config" / "droid.yaml"
    if source.is_file():
        return source
    try:
        from ament_index_python.packages import get_package_share_directory
    except ImportError as exc:
        raise LaunchError("no config/droid.yaml next to the package and no ament index") from exc
    return Path(get_package_share_directory(PACKAGE)) / "config" / "droid.yaml"


def node_path(namespace: str, name: str = NODE_NAME) -> str:
    """Fully qualified name of a node in `namespace` ('' = root)."""
    namespace = namespace.strip("/")
    return f"/{namespace}/{name}" if namespace else f"/{name}"


@dataclass
class ProcessSpec:
    """One process to start: its executable name, arguments and extra environment."""

    name: str
    executable: str
    arguments: list[str] = field(default_factory=list)
    env: dict[str, str] = field(default_factory=dict)
    command_line: list[str] | None = None  # a whole command instead of an entry point

    def command(self) -> list[str]:
        if self.command_line is not None:
            return list(self.command_line)
        module, _, function = ENTRY_POINTS[self.executable].partition(":")
        # Exactly what the console script does, with this interpreter and its sys.path.
        bootstrap = f"import sys; from {module} import {function}; sys.exit({function}())"
        return [sys.executable, "-c", bootstrap, *self.arguments]


def ros_arguments(
    name: str,
    namespace: str,
    params_file: str | None = None,
    overrides: dict[str, str] | None = None,
) -> list[str]:
    arguments = ["--ros-args", "-r", f"__node:={name}"]
    if namespace.strip("/"):
        arguments += ["-r", f"__ns:=/{namespace.strip('/')}"]
    if params_file:
        arguments += ["--params-file", params_file]
    for key, value in (overrides or {}).items():
        arguments += ["-p", f"{key}:={value}"]
    return arguments


def plan(values: dict[str, str]) -> list[ProcessSpec]:
    """The processes droid.launch.py would start for these arguments, in start order.

    A local gateway (sim and no base_url) comes first so its URL is known before the node starts;
    the node's base_url is then filled in by `Launcher.start`.
    """
    namespace = values["namespace"]
    params_file = values["params_file"] or str(default_params_file())
    specs: list[ProcessSpec] = []
    node_overrides = {"model": values["model"]}
    if values["base_url"]:
        node_overrides["base_url"] = values["base_url"]
    node_env: dict[str, str] = {}
    if is_true(values["sim"]):
        if not values["base_url"]:
            from sequence_ai_gateway import DEVELOPMENT_KEY

            specs.append(
                ProcessSpec(
                    "gateway", "sequence-ai-gateway", ["--host", "127.0.0.1", "--port", "0"]
                )
            )
            # The local gateway's development key: a real key never goes to the simulation.
            node_env["SEQUENCES_API_KEY"] = DEVELOPMENT_KEY
        specs.append(ProcessSpec("sim_robot", "sim_robot", ros_arguments("sim_robot", namespace)))
    specs.append(
        ProcessSpec(
            "node",
            "sequence_ai_node",
            ros_arguments(NODE_NAME, namespace, params_file, node_overrides),
            node_env,
        )
    )
    return specs


class _Running:
    """A started process and the thread that copies its output."""

    def __init__(
        self,
        spec: ProcessSpec,
        popen: subprocess.Popen[str],
        sink: IO[str] | None,
        on_line: Callable[[str], None] | None,
    ) -> None:
        self.spec = spec
        self.popen = popen
        self._sink = sink
        self._on_line = on_line
        self._thread = threading.Thread(target=self._copy, name=f"output-{spec.name}", daemon=True)
        self._thread.start()

    def _copy(self) -> None:
        assert self.popen.stdout is not None
        for line in self.popen.stdout:
            if self._on_line is not None:
                self._on_line(line)
            if self._sink is not None:
                self._sink.write(
                    line if self._sink is not sys.stdout else f"[{self.spec.name}] {line}"
                )
                self._sink.flush()

    def join(self) -> None:
        self._thread.join(timeout=2.0)


class Launcher:
    """Starts the planned processes (each in its own session) and stops them by pid."""

    def __init__(
        self,
        specs: list[ProcessSpec],
        *,
        log_dir: Path | None = None,
        env: dict[str, str] | None = None,
    ) -> None:
        self.specs = specs
        self.log_dir = log_dir
        self.env = dict(os.environ if env is None else env)
        self.running: list[_Running] = []
        self._logs: list[IO[str]] = []
        self.base_url: str | None = None

    def pids(self) -> dict[str, int]:
        return {run.spec.name: run.popen.pid for run in self.running}

    def start(self, gateway_timeout_s: float = 30.0) -> None:
        """Start every planned process in order."""
        for spec in self.specs:
            self.start_one(spec, gateway_timeout_s)

    def start_one(self, spec: ProcessSpec, gateway_timeout_s: float = 30.0) -> None:
        """Start one process; a local gateway's URL becomes the node's base_url."""
        if spec.executable == "sequence_ai_node" and self.base_url:
            spec.arguments += ["-p", f"base_url:={self.base_url}"]
        if spec.executable == "sequence-ai-gateway":
            self._start_gateway(spec, gateway_timeout_s)
        else:
            self._start(spec)

    def _start(self, spec: ProcessSpec, on_line: Callable[[str], None] | None = None) -> None:
        sink: IO[str] | None = sys.stdout
        if self.log_dir is not None:
            self.log_dir.mkdir(parents=True, exist_ok=True)
            sink = open(self.log_dir / f"{spec.name}.log", "w", encoding="utf-8")  # noqa: SIM115
            self._logs.append(sink)
        env = {**self.env, **spec.env, "PYTHONUNBUFFERED": "1"}
        popen = subprocess.Popen(
            spec.command(),
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            text=True,
            env=env,
            # Own session: a terminal's Ctrl+C reaches only us, and we stop children in order.
            start_new_session=True,
        )
        self.running.append(_Running(spec, popen, sink, on_line))

    def _start_gateway(self, spec: ProcessSpec, timeout_s: float) -> None:
        found = threading.Event()

        def watch(line: str) -> None:
            if line.startswith(GATEWAY_URL_PREFIX) and not found.is_set():
                self.base_url = line[len(GATEWAY_URL_PREFIX) :].strip()
                found.set()

        self._start(spec, watch)
        popen = self.running[-1].popen
        deadline = time.monotonic() + timeout_s
        while not found.wait(0.1):
            if popen.poll() is not None or time.monotonic() > deadline:
                raise LaunchError(
                    f"the local gateway did not report its URL within {timeout_s:g} s "
                    f"(exit code {popen.poll()})"
                )

    def exited(self) -> list[tuple[str, int]]:
        """(name, exit code) of every started process that has ended."""
        return [
            (run.spec.name, code) for run in self.running if (code := run.popen.poll()) is not None
        ]

    def stop(self, grace_s: float = STOP_GRACE_S) -> dict[str, int | None]:
        """Stop in reverse start order (node first, gateway last): SIGINT, then SIGTERM, SIGKILL.

        Returns each process's exit code. Only our own pids are ever signalled.
        """
        codes: dict[str, int | None] = {}
        for run in reversed(self.running):
            popen = run.popen
            for sig, wait_s in (
                (signal.SIGINT, grace_s),
                (signal.SIGTERM, 5.0),
                (signal.SIGKILL, 5.0),
            ):
                if popen.poll() is not None:
                    break
                try:
                    os.kill(popen.pid, sig)
                except ProcessLookupError:
                    break
                try:
                    popen.wait(timeout=wait_s)
                except subprocess.TimeoutExpired:
                    continue
            codes[run.spec.name] = popen.poll()
            run.join()
        for log in self._logs:
            log.close()
        self._logs = []
        return codes


def change_state(
    node: Any, target: str, transition: str, timeout_s: float = 60.0, *, executor: Any = None
) -> None:
    """Ask lifecycle node `target` (fully qualified) to make `transition` ('configure', ...).

    With `executor`, this spins it until the answer comes; without, another thread must already
    be spinning `node`.
    """
    from lifecycle_msgs.msg import Transition
    from lifecycle_msgs.srv import ChangeState

    ids = {
        "configure": Transition.TRANSITION_CONFIGURE,
        "activate": Transition.TRANSITION_ACTIVATE,
        "deactivate": Transition.TRANSITION_DEACTIVATE,
        "cleanup": Transition.TRANSITION_CLEANUP,
    }
    client = node.create_client(ChangeState, f"{target}/change_state")
    try:
        if not client.wait_for_service(timeout_sec=timeout_s):
            raise LaunchError(f"{target}/change_state did not appear within {timeout_s:g} s")
        future = client.call_async(ChangeState.Request(transition=Transition(id=ids[transition])))
        deadline = time.monotonic() + timeout_s
        while not future.done() and time.monotonic() < deadline:
            if executor is None:
                time.sleep(0.02)
            else:
                executor.spin_once(timeout_sec=0.05)
        if not future.done():
            raise LaunchError(f"{transition} of {target} did not answer within {timeout_s:g} s")
        if not future.result().success:
            raise LaunchError(f"{transition} of {target} failed: see the node's log")
    finally:
        node.destroy_client(client)


def bring_up(target: str, timeout_s: float = 60.0) -> None:
    """Configure, then activate, the lifecycle node `target` from a short-lived helper node."""
    import rclpy
    from rclpy.context import Context
    from rclpy.executors import SingleThreadedExecutor

    context = Context()
    # No arguments: the launcher's own `name:=value` words are not ROS remappings.
    rclpy.init(args=[], context=context)
    node = rclpy.create_node("sequence_ai_launcher", context=context)
    executor = SingleThreadedExecutor(context=context)
    executor.add_node(node)
    try:
        for transition in ("configure", "activate"):
            change_state(node, target, transition, timeout_s, executor=executor)
            print(f"launcher: {target} {transition}d", flush=True)
    finally:
        executor.shutdown()
        node.destroy_node()
        rclpy.shutdown(context=context)


def main(argv: Sequence[str] | None = None) -> int:
    arguments = list(sys.argv[1:] if argv is None else argv)
    if any(a in ("-h", "--help") for a in arguments):
        print(__doc__)
        return 0
    try:
        values = parse_arguments(arguments)
        launcher = Launcher(plan(values))
    except LaunchError as exc:
        print(f"launcher: {exc}", file=sys.stderr)
        return 2
    # Ctrl+C and SIGTERM both end the wait below; children are then stopped in order.
    signal.signal(signal.SIGTERM, signal.default_int_handler)
    code = 0
    try:
        launcher.start()
        print(f"launcher: started {launcher.pids()}", flush=True)
        if is_true(values["autostart"]):
            bring_up(node_path(values["namespace"]))
        while not launcher.exited():
            time.sleep(0.2)
        name, exit_code = launcher.exited()[0]
        print(f"launcher: {name} exited with {exit_code}; stopping the rest", flush=True)
        code = 1
    except KeyboardInterrupt:
        pass
    except LaunchError as exc:
        print(f"launcher: {exc}", file=sys.stderr)
        code = 1
    finally:
        codes = launcher.stop()
        print(f"launcher: stopped {codes}", flush=True)
    return code


if __name__ == "__main__":
    sys.exit(main())
