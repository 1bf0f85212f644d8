"""droid.launch.py and the launcher that stands in for it agree on arguments and processes."""

from __future__ import annotations

import ast
import importlib.util
import sys
import types
from pathlib import Path

import pytest

from sequence_ai_ros import launcher

LAUNCH_FILE = Path(__file__).resolve().parents[2] / "launch" / "droid.launch.py"


def launch_arguments() -> dict[str, str]:
    """DeclareLaunchArgument(name, default_value=...) calls of the launch file, read statically.

    `launch`/`launch_ros` are not installable here, so the file is checked as source.
    """
    tree = ast.parse(LAUNCH_FILE.read_text(encoding="utf-8"))
    found = {}
    for call in ast.walk(tree):
        if (
            isinstance(call, ast.Call)
            and isinstance(call.func, ast.Name)
            and call.func.id == "DeclareLaunchArgument"
        ):
            name = ast.literal_eval(call.args[0])
            defaults = [k.value for k in call.keywords if k.arg == "default_value"]
            found[name] = ast.literal_eval(defaults[0])
    return found


def test_launch_file_declares_the_documented_arguments() -> None:
    assert launch_arguments() == {
        "model": "pi05-droid",
        "base_url": "",
        "namespace": "",
        "sim": "false",
        "autostart": "true",
    }


def test_launcher_takes_the_launch_file_arguments_with_the_same_defaults() -> None:
    values = launcher.parse_arguments([])
    assert {k: v for k, v in values.items() if k != "params_file"} == launch_arguments()


def test_launch_file_starts_the_console_scripts_the_launcher_runs() -> None:
    source = LAUNCH_FILE.read_text(encoding="utf-8")
    for executable in launcher.ENTRY_POINTS:
        assert f'"{executable}"' in source
    assert '"droid.yaml"' in source and "LifecycleNode" in source


@pytest.mark.parametrize(
    ("argument", "message"),
    [
        ("sim=true", "expected name:=value"),
        ("robot:=x", "expected one of"),
        ("autostart:=maybe", "expected true or false"),
    ],
)
def test_launcher_refuses_bad_arguments_naming_them(argument: str, message: str) -> None:
    with pytest.raises(launcher.LaunchError, match=message):
        launcher.parse_arguments([argument])


def test_real_robot_plan_is_the_node_alone_with_droid_yaml() -> None:
    (node,) = launcher.plan(launcher.parse_arguments(["model:=pi05-droid"]))
    assert node.executable == "sequence_ai_node"
    assert node.arguments[:3] == ["--ros-args", "-r", "__node:=sequence_ai"]
    params = node.arguments[node.arguments.index("--params-file") + 1]
    assert Path(params).name == "droid.yaml"
    assert "model:=pi05-droid" in node.arguments
    assert "SEQUENCES_API_KEY" not in node.env


def test_sim_plan_adds_the_arm_and_a_local_gateway_with_its_development_key() -> None:
    from sequence_ai_gateway import DEVELOPMENT_KEY

    specs = launcher.plan(launcher.parse_arguments(["sim:=true", "namespace:=robot2"]))
    assert [s.executable for s in specs] == ["sequence-ai-gateway", "sim_robot", "sequence_ai_node"]
    gateway, arm, node = specs
    assert gateway.arguments == ["--host", "127.0.0.1", "--port", "0"]
    assert "__ns:=/robot2" in arm.arguments and "__ns:=/robot2" in node.arguments
    assert node.env == {"SEQUENCES_API_KEY": DEVELOPMENT_KEY}


def test_sim_with_a_base_url_shares_that_gateway() -> None:
    url = "http://127.0.0.1:8787"
    specs = launcher.plan(launcher.parse_arguments(["sim:=true", f"base_url:={url}"]))
    assert [s.executable for s in specs] == ["sim_robot", "sequence_ai_node"]
    assert f"base_url:={url}" in specs[1].arguments


def test_node_path_in_a_namespace() -> None:
    assert launcher.node_path("") == "/sequence_ai"
    assert launcher.node_path("/robot2/") == "/robot2/sequence_ai"


class _Recorded:
    """Stands in for a launch / launch_ros class: keeps its arguments for the assertions."""

    def __init__(self, *args: object, **kwargs: object) -> None:
        self.args, self.kwargs = args, kwargs


def _stub_modules(arguments: dict[str, str]) -> dict[str, types.ModuleType]:
    """`launch` and `launch_ros` as far as droid.launch.py uses them (neither installs here)."""

    class LaunchConfiguration(_Recorded):
        def perform(self, context: object) -> str:
            return arguments[str(self.args[0])]

    names = {
        "launch.action": ["Action"],
        "launch.actions": [
            "DeclareLaunchArgument", "EmitEvent", "ExecuteProcess", "OpaqueFunction",
            "RegisterEventHandler",
        ],
        "launch.event_handlers": ["OnProcessIO"],
        "launch.events": [],
        "launch.events.process": ["ProcessIO"],
        "launch.launch_context": ["LaunchContext"],
        "launch.launch_description": ["LaunchDescription"],
        "launch.substitutions": [],
        "launch_ros.actions": ["LifecycleNode", "Node"],
        "launch_ros.event_handlers": ["OnStateTransition"],
        "launch_ros.events.lifecycle": ["ChangeState"],
        "ament_index_python.packages": [],
    }  # fmt: skip
    modules = {}
    for module_name, classes in names.items():
        module = types.ModuleType(module_name)
        for class_name in classes:
            setattr(module, class_name, type(class_name, (_Recorded,), {}))
        modules[module_name] = module
    for parent in ("launch", "launch_ros", "launch_ros.events", "ament_index_python"):
        modules[parent] = types.ModuleType(parent)
    modules["launch.substitutions"].LaunchConfiguration = LaunchConfiguration
    modules["launch.events"].matches_action = lambda action: ("matches", action)
    modules["ament_index_python.packages"].get_package_share_directory = lambda package: (
        f"/opt/share/{package}"
    )
    modules["ament_index_python.packages"].get_package_prefix = lambda package: "/opt"
    return modules


def _run_launch_file(monkeypatch: pytest.MonkeyPatch, **given: str) -> list[_Recorded]:
    arguments = {**launch_arguments(), **given}
    for name, module in _stub_modules(arguments).items():
        monkeypatch.setitem(sys.modules, name, module)
    spec = importlib.util.spec_from_file_location("droid_launch", LAUNCH_FILE)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    description = module.generate_launch_description()
    (opaque,) = [a for a in description.args[0] if type(a).__name__ == "OpaqueFunction"]
    return opaque.kwargs["function"](object())


def _of(actions: list[_Recorded], kind: str) -> list[_Recorded]:
    return [a for a in actions if type(a).__name__ == kind]


def test_launch_file_real_robot_starts_the_lifecycle_node_and_autostarts_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    actions = _run_launch_file(monkeypatch, namespace="robot2")
    (node,) = _of(actions, "LifecycleNode")
    assert node.kwargs["executable"] == "sequence_ai_node"
    assert (node.kwargs["name"], node.kwargs["namespace"]) == ("sequence_ai", "robot2")
    assert node.kwargs["parameters"] == [
        "/opt/share/sequence_ai_ros/config/droid.yaml",
        {"model": "pi05-droid"},
    ]
    assert node.kwargs["additional_env"] == {}
    assert not _of(actions, "Node") and not _of(actions, "ExecuteProcess")
    (configure,) = _of(actions, "EmitEvent")
    (activate_when_inactive,) = _of(actions, "RegisterEventHandler")
    assert configure.kwargs["event"].kwargs["transition_id"] == 1  # configure
    handler = activate_when_inactive.args[0]
    assert handler.kwargs["start_state"] == "configuring"
    assert handler.kwargs["goal_state"] == "inactive"


def test_launch_file_sim_starts_gateway_and_arm_and_configures_once_serving(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from sequence_ai_gateway import DEVELOPMENT_KEY

    actions = _run_launch_file(monkeypatch, sim="true")
    (gateway,) = _of(actions, "ExecuteProcess")
    assert gateway.kwargs["cmd"][0] == "/opt/lib/sequence_ai_ros/sequence-ai-gateway"
    assert gateway.kwargs["cmd"][1:] == ["--host", "127.0.0.1", "--port", "8787"]
    (arm,) = _of(actions, "Node")
    assert arm.kwargs["executable"] == "sim_robot"
    (node,) = _of(actions, "LifecycleNode")
    assert node.kwargs["parameters"][1] == {
        "model": "pi05-droid",
        "base_url": "http://127.0.0.1:8787",
    }
    assert node.kwargs["additional_env"] == {"SEQUENCES_API_KEY": DEVELOPMENT_KEY}
    # No configure before the gateway serves: it comes from the gateway's output.
    assert not _of(actions, "EmitEvent")
    on_output = [
        h.args[0] for h in _of(actions, "RegisterEventHandler")
        if type(h.args[0]).__name__ == "OnProcessIO"
    ]  # fmt: skip
    (serving,) = on_output
    when = serving.kwargs["on_stdout"]
    assert when(types.SimpleNamespace(text=b"INFO: Started server process")) is None
    (configure,) = when(types.SimpleNamespace(text=b"SEQUENCES_BASE_URL=http://127.0.0.1:8787\n"))
    assert configure.kwargs["event"].kwargs["transition_id"] == 1


def test_launch_file_without_autostart_leaves_the_node_unconfigured(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    actions = _run_launch_file(monkeypatch, autostart="false", sim="true")
    assert not _of(actions, "EmitEvent") and not _of(actions, "RegisterEventHandler")
