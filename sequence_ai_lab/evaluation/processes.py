"""`evaluate --sim`: the local gateway, the simulated world and the node, started as `make demo`
starts them (the launch through the demo's launcher), the node left unconfigured for the
evaluator to bring up with each condition; stopped, node first, at the end."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from sequence_ai_lab.demo.launcher import Launcher, params_files, specs_for
from sequence_ai_ros.params.launch import launch_for


@dataclass
class SimProcesses:
    """The started processes and the ROS names the evaluator talks to."""

    launcher: Launcher
    node_path: str
    world_path: str
    base_url: str

    def pids(self) -> dict[str, int]:
        return self.launcher.pids()

    def exited(self) -> list[tuple[str, int]]:
        return self.launcher.exited()

    def stop(self) -> dict[str, int | None]:
        return self.launcher.stop()


def start(model: str, namespace: str, log_dir: Path) -> SimProcesses:
    """Start the gateway, the model's simulator and the node (unconfigured); their logs go to
    `log_dir`."""
    launch = launch_for({"model": model, "namespace": namespace, "sim": "true",
                         "autostart": "false"})
    launcher = Launcher(specs_for(launch, params_files(launch)), log_dir=log_dir)
    try:
        launcher.start()
    except Exception:
        launcher.stop()
        raise
    simulator = next(p for p in launch.processes if p.node_name and p is not launch.node)
    world_path = launch.node_path.rsplit("/", 1)[0] + "/" + simulator.node_name
    return SimProcesses(launcher, launch.node_path, world_path,
                        launch.node.parameters.get("base_url", ""))
