"""`python -m sequence_ai_lab.demo.launcher`: droid.launch.py's launch, for machines without launch.

    python -m sequence_ai_lab.demo.launcher sim:=true
    python -m sequence_ai_lab.demo.launcher sim:=true namespace:=robot2   # a second robot

Same arguments as the launch file (model, base_url, namespace, sim, autostart, controller,
params_file: one file instead of all the model's), and the same processes: both read
`sequence_ai_ros.params.launch`. Executables are the package's console-script entry points, run
with this interpreter; the node is configured (once a local gateway serves) and activated
through its lifecycle services when autostart is true. Ctrl+C stops every process it started,
the node first so it can hold the arm. Unlike `ros2 launch`, when one process exits or the node
fails to configure, the others are stopped too.
"""

from __future__ import annotations

import ctypes
import os
import signal
import subprocess
import sys
import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO

from sequence_ai_ros.params import launch as node_launch
from sequence_ai_ros.params.launch import GATEWAY_READY_PREFIX, Launch, LaunchArgumentError

# The console scripts of setup.py: the launcher runs exactly these functions.
ENTRY_POINTS = {
    "sequence_ai_node": "sequence_ai_ros.node:main",
    "sim_robot": "sequence_ai_lab.robots.sim_robot.robot:main",
    "sim_bimanual": "sequence_ai_lab.robots.sim_bimanual.bimanual:main",
    "sim_cartesian": "sequence_ai_lab.robots.sim_cartesian.cartesian:main",
    "sequence-ai-gateway": "sequence_ai_gateway.__main__:main",
}
# The launcher's own argument beyond the launch file's.
PARAMS_FILE_ARGUMENT = "params_file"
STOP_GRACE_S = 10.0
GATEWAY_TIMEOUT_S = 30.0
BRING_UP_TIMEOUT_S = 60.0


class LaunchError(RuntimeError):
    """A process could not be started or the node could not be brought up."""


def parse_arguments(argv: Sequence[str]) -> dict[str, str]:
    """`name:=value` pairs as `ros2 launch` takes them, over the launch file's defaults."""
    given: dict[str, str] = {}
    for item in argv:
        name, sep, value = item.partition(":=")
        if not sep:
            raise LaunchError(f"argument {item!r}: expected name:=value")
        given[name] = value
    params_file = given.pop(PARAMS_FILE_ARGUMENT, "")
    try:
        values = node_launch.arguments(given)
    except LaunchArgumentError as exc:
        raise LaunchError(str(exc)) from None
    values[PARAMS_FILE_ARGUMENT] = params_file
    return values


def params_files(launch: Launch, given: str = "") -> list[str]:
    """The node's parameters files in load order: `given` (params_file:=) alone, else the launch's
    (the robot's file, then the model's overlays), found as `default_params_file` finds them."""
    if given:
        return [given]
    try:
        return [str(node_launch.share_file(relative)) for relative in launch.params_files]
    except LaunchArgumentError as exc:
        raise LaunchError(str(exc)) from None


def default_params_file(controller: str = "forward") -> Path:
    """The controller's parameters file (config/droid.yaml for forward) of this checkout when
    run from source, else the installed share/ copy."""
    try:
        return node_launch.share_file(node_launch.PARAMS_FILES[controller])
    except LaunchArgumentError as exc:
        raise LaunchError(str(exc)) from None


def ros_arguments(
    name: str,
    namespace: str,
    params_files: Sequence[str] = (),
    overrides: Mapping[str, str] | None = None,
) -> list[str]:
    """`--ros-args` that start a node as launch_ros starts it: name, namespace, parameters (the
    files in order, a later file's value winning, then `overrides`)."""
    arguments = ["--ros-args", "-r", f"__node:={name}"]
    if namespace.strip("/"):
        arguments += ["-r", f"__ns:=/{namespace.strip('/')}"]
    for params_file in params_files:
        arguments += ["--params-file", params_file]
    for key, value in (overrides or {}).items():
        arguments += ["-p", f"{key}:={value}"]
    return arguments


# prctl's option: the signal a child gets when its parent dies (Linux).
PR_SET_PDEATHSIG = 1


def _die_with(parent: int) -> Callable[[], None] | None:
    """A child's setup making it get SIGTERM when `parent` dies, however (a `kill -9` leaves no
    gateway, world or node behind to race the next run); None off Linux."""
    if not sys.platform.startswith("linux"):
        return None
    libc = ctypes.CDLL(None, use_errno=True)

    def setup() -> None:
        libc.prctl(PR_SET_PDEATHSIG, signal.SIGTERM)
        if os.getppid() != parent:
            os._exit(1)  # the parent died before prctl: nothing would signal this child

    return setup


@dataclass
class ProcessSpec:
    """One process to start: a label, its console script and arguments, extra environment."""

    name: str
    executable: str
    arguments: list[str] = field(default_factory=list)
    env: dict[str, str] = field(default_factory=dict)
    command_line: list[str] | None = None  # a whole command instead of an entry point
    # A line the process prints once it serves; start() waits for it before going on.
    ready_prefix: str = ""

    def command(self) -> list[str]:
        if self.command_line is not None:
            return list(self.command_line)
        module, _, function = ENTRY_POINTS[self.executable].partition(":")
        # Exactly what the console script does, with this interpreter and its sys.path.
        bootstrap = f"import sys; from {module} import {function}; sys.exit({function}())"
        return [sys.executable, "-c", bootstrap, *self.arguments]


def specs_for(launch: Launch, params_files: Sequence[str]) -> list[ProcessSpec]:
    """The launch's processes as command lines, in start order; the node reads `params_files`."""
    specs = []
    for process in launch.processes:
        if process.node_name:
            arguments = ros_arguments(
                process.node_name,
                launch.namespace,
                params_files if process.params_file else (),
                process.parameters,
            )
        else:
            arguments = list(process.arguments)
        ready = GATEWAY_READY_PREFIX if process is launch.gateway else ""
        specs.append(
            ProcessSpec(process.label, process.executable, arguments, dict(process.env),
                        ready_prefix=ready)
        )
    return specs


class _Running:
    """A started process and the thread that copies its output."""

    def __init__(
        self,
        spec: ProcessSpec,
        popen: subprocess.Popen[str],
        sink: IO[str] | None,
        on_line: Callable[[str], None],
        on_end: Callable[[], None],
    ) -> None:
        self.spec = spec
        self.popen = popen
        self._sink = sink
        self._on_line = on_line
        self._on_end = on_end
        self.output_ended = threading.Event()
        self._thread = threading.Thread(target=self._copy, name=f"output-{spec.name}", daemon=True)
        self._thread.start()

    def _copy(self) -> None:
        assert self.popen.stdout is not None
        for line in self.popen.stdout:
            self._on_line(line)
            if self._sink is not None:
                self._sink.write(
                    line if self._sink is not sys.stdout else f"[{self.spec.name}] {line}"
                )
                self._sink.flush()
        # Output ends when the process exits: that wakes whoever waits on the processes.
        self.output_ended.set()
        self._on_end()

    def join(self) -> None:
        self._thread.join(timeout=2.0)


class Launcher:
    """Starts the planned processes (each in its own session) and stops them by pid.

    `start`/`stop` run on the caller's thread; each process's output thread only signals
    `_changed` (a process ended or printed its ready line), which `wait_*` block on.
    """

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
        self._changed = threading.Condition()

    def pids(self) -> dict[str, int]:
        return {run.spec.name: run.popen.pid for run in self.running}

    def start(self, ready_timeout_s: float = GATEWAY_TIMEOUT_S) -> None:
        """Start every planned process in order, waiting for each ready line."""
        for spec in self.specs:
            self.start_one(spec, ready_timeout_s)

    def start_one(self, spec: ProcessSpec, ready_timeout_s: float = GATEWAY_TIMEOUT_S) -> None:
        ready = threading.Event()

        def watch(line: str) -> None:
            if spec.ready_prefix and line.startswith(spec.ready_prefix):
                ready.set()
                self._notify()

        self._start(spec, watch)
        if not spec.ready_prefix:
            return
        run = self.running[-1]
        with self._changed:
            self._changed.wait_for(
                lambda: ready.is_set() or run.output_ended.is_set(), ready_timeout_s
            )
        if not ready.is_set():
            raise LaunchError(
                f"{spec.name} did not report that it serves within {ready_timeout_s:g} s "
                f"(exit code {run.popen.poll()})"
            )

    def _notify(self) -> None:
        with self._changed:
            self._changed.notify_all()

    def _start(self, spec: ProcessSpec, on_line: Callable[[str], None]) -> None:
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
            preexec_fn=_die_with(os.getpid()),
        )
        self.running.append(_Running(spec, popen, sink, on_line, self._notify))

    def exited(self) -> list[tuple[str, int]]:
        """(name, exit code) of every started process that has ended."""
        return [
            (run.spec.name, code) for run in self.running if (code := run.popen.poll()) is not None
        ]

    def wait_exit(self, timeout_s: float | None = None) -> list[tuple[str, int]]:
        """Block until a started process ends (or `timeout_s`); the ones that have ended."""
        with self._changed:
            self._changed.wait_for(
                lambda: any(run.output_ended.is_set() for run in self.running), timeout_s
            )
        for run in self.running:
            if run.output_ended.is_set():
                # Output ends just before the exit status is there.
                run.popen.wait(timeout=5.0)
        return self.exited()

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


def bring_up(target: str, timeout_s: float = BRING_UP_TIMEOUT_S) -> None:
    """Configure, then activate, the lifecycle node `target` from a short-lived planner."""
    from sequence_ai_lab.demo.planner import Planner, PlannerError

    planner = Planner("sequence_ai_launcher")
    try:
        lifecycle = planner.lifecycle(target)
        for transition in ("configure", "activate"):
            if not lifecycle.transition(transition, timeout_s):
                raise LaunchError(f"{transition} of {target} failed: see the node's log")
            print(f"launcher: {target} {transition}d", flush=True)
    except PlannerError as exc:
        raise LaunchError(str(exc)) from None
    finally:
        planner.close()


def _stopping(_signum: int, _frame: object) -> None:
    print("launcher: already stopping every process", flush=True)


def main(argv: Sequence[str] | None = None) -> int:
    arguments = list(sys.argv[1:] if argv is None else argv)
    if any(a in ("-h", "--help") for a in arguments):
        print(__doc__)
        return 0
    try:
        values = parse_arguments(arguments)
        given_file = values.pop(PARAMS_FILE_ARGUMENT)
        launch = node_launch.launch_for(values)
        launcher = Launcher(specs_for(launch, params_files(launch, given_file)))
    except (LaunchError, LaunchArgumentError) as exc:
        print(f"launcher: {exc}", file=sys.stderr)
        return 2
    # Ctrl+C and SIGTERM both end the wait below; children are then stopped in order. SIGINT
    # too is set here: a process started in the background by a script inherits it ignored.
    for signum in (signal.SIGINT, signal.SIGTERM):
        signal.signal(signum, signal.default_int_handler)
    code = 0
    try:
        launcher.start()
        print(f"launcher: started {launcher.pids()}", flush=True)
        if launch.autostart:
            bring_up(launch.node_path)
        name, exit_code = launcher.wait_exit()[0]
        print(f"launcher: {name} exited with {exit_code}; stopping the rest", flush=True)
        code = 1
    except KeyboardInterrupt:
        pass
    except LaunchError as exc:
        print(f"launcher: {exc}", file=sys.stderr)
        code = 1
    finally:
        # Stopping is bounded (SIGINT, SIGTERM, SIGKILL per child): a second Ctrl-C must not
        # interrupt it and leave children running.
        for signum in (signal.SIGINT, signal.SIGTERM):
            signal.signal(signum, _stopping)
        codes = launcher.stop()
        print(f"launcher: stopped {codes}", flush=True)
    # Exiting: interpreter shutdown puts the default handlers back (a signal then kills the
    # process, status -2 or -15) — but leaves an ignored signal ignored.
    for signum in (signal.SIGINT, signal.SIGTERM):
        signal.signal(signum, signal.SIG_IGN)
    return code


if __name__ == "__main__":
    sys.exit(main())
