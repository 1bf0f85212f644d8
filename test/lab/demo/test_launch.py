"""droid.launch.py and the launcher read one launch (sequence_ai_ros.params.launch) and start the
same processes from it. `launch`/`launch_ros` are not installable here, so the launch file runs
against stand-in modules that record what it builds."""

from __future__ import annotations

import ast
import importlib.util
import sys
import types
from pathlib import Path
from typing import Any

import pytest
import yaml

from sequence_ai_gateway.models.catalogue import simulated_row
from sequence_ai_lab.demo import launcher
from sequence_ai_ros.params import launch as node_launch

ROOT = Path(__file__).resolve().parents[3]
LAUNCH_FILE = ROOT / "launch" / "droid.launch.py"
PORT, KEY = 18787, "per-launch-key"
SHARE, PREFIX = "/opt/share/sequence_ai_ros", "/opt"


class _Recorded:
    """Stands in for a launch / launch_ros class: keeps its arguments for the assertions."""

    def __init__(self, *args: object, **kwargs: object) -> None:
        self.args, self.kwargs = args, kwargs


def _stub_modules(arguments: dict[str, str]) -> dict[str, types.ModuleType]:
    """`launch` and `launch_ros` as far as droid.launch.py uses them."""

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
    modules["ament_index_python.packages"].get_package_share_directory = lambda package: SHARE
    modules["ament_index_python.packages"].get_package_prefix = lambda package: PREFIX
    return modules


@pytest.fixture
def fixed_port_and_key(monkeypatch: pytest.MonkeyPatch) -> None:
    """Both readers call node_launch.launch; a fixed port and key make their launches comparable."""
    monkeypatch.setattr(node_launch, "free_port", lambda host=node_launch.GATEWAY_HOST: PORT)
    monkeypatch.setattr(node_launch.secrets, "token_urlsafe", lambda nbytes=None: KEY)


def _description(monkeypatch: pytest.MonkeyPatch, arguments: dict[str, str]) -> list[Any]:
    for name, module in _stub_modules(arguments).items():
        monkeypatch.setitem(sys.modules, name, module)
    spec = importlib.util.spec_from_file_location("droid_launch", LAUNCH_FILE)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return list(module.generate_launch_description().args[0])


def _run_launch_file(monkeypatch: pytest.MonkeyPatch, **given: str) -> list[Any]:
    defaults = {name: a.default for name, a in node_launch.ARGUMENTS.items()}
    description = _description(monkeypatch, {**defaults, "params_file": "", **given})
    (opaque,) = [a for a in description if type(a).__name__ == "OpaqueFunction"]
    return opaque.kwargs["function"](object())


def _of(actions: list[Any], *kinds: str) -> list[Any]:
    return [a for a in actions if type(a).__name__ in kinds]


def _launch_processes(actions: list[Any]) -> list[tuple]:
    """(executable, node name, namespace, params files, parameters, command args, env) per
    process the launch file starts, in order."""
    found = []
    for action in _of(actions, "ExecuteProcess", "Node", "LifecycleNode"):
        kw = action.kwargs
        if type(action).__name__ == "ExecuteProcess":
            executable, *args = kw["cmd"]
            assert executable == f"{PREFIX}/lib/sequence_ai_ros/{Path(executable).name}"
            found.append((Path(executable).name, "", "", (), {}, tuple(args),
                          kw["additional_env"]))
            continue
        params = list(kw["parameters"])
        files = tuple(p for p in params if isinstance(p, str))
        # The files come first, then the launch's own parameters: a later entry wins.
        assert params[: len(files)] == list(files)
        overrides = params[len(files)] if len(params) > len(files) else {}
        found.append((kw["executable"], kw["name"], kw["namespace"], files, overrides, (),
                      kw["additional_env"]))
    return found


def _launcher_processes(specs: list[launcher.ProcessSpec], checkout: str) -> list[tuple]:
    """The same view of what the launcher starts, read back from its command lines; it found
    the package's files under `checkout` where the launch file finds them under SHARE."""
    found = []
    for spec in specs:
        args = list(spec.arguments)
        if "--ros-args" not in args:
            found.append((spec.executable, "", "", (), {}, tuple(args), spec.env))
            continue
        name = namespace = ""
        params: list[str] = []
        overrides = {}
        for flag, value in zip(args[1::2], args[2::2]):
            if flag == "-r" and value.startswith("__node:="):
                name = value.split(":=", 1)[1]
            elif flag == "-r" and value.startswith("__ns:=/"):
                namespace = value.split(":=/", 1)[1]
            elif flag == "--params-file":
                params.append(value.replace(checkout, SHARE, 1))
            elif flag == "-p":
                key, _, text = value.partition(":=")
                overrides[key] = text
        found.append((spec.executable, name, namespace, tuple(params), overrides, (), spec.env))
    return found


CASES = [
    {},
    {"model": "cosmos3-edge-policy-droid", "namespace": "left_arm"},
    {"sim": "true"},
    {"sim": "true", "namespace": "robot2"},
    {"sim": "true", "base_url": "http://127.0.0.1:8787"},
    {"sim": "yes", "autostart": "false"},
    {"controller": "joint_trajectory"},
    {"sim": "true", "controller": "joint_trajectory"},
    {"sim": "true", "model": "cosmos3-edge-policy-droid"},
    {"model": "cosmos3-edge-policy-droid", "controller": "joint_trajectory"},
    {"sim": "true", "model": "sim-bimanual-reach"},
    {"sim": "true", "model": "sim-stateless-ee-delta"},
    {"sim": "true", "model": "sim-ee-absolute-reach", "namespace": "cartesian"},
    {"model": "cosmos3-edge-policy-droid", "params_file": "/robot/cosmos3_recording.yaml"},
]


@pytest.mark.usefixtures("fixed_port_and_key")
@pytest.mark.parametrize("given", CASES, ids=lambda g: " ".join(f"{k}:={v}" for k, v in g.items()))
def test_launch_file_and_launcher_start_the_same_plan(
    monkeypatch: pytest.MonkeyPatch, given: dict[str, str]
) -> None:
    actions = _run_launch_file(monkeypatch, **given)
    values = launcher.parse_arguments([f"{k}:={v}" for k, v in given.items()])
    given_file = values.pop(launcher.PARAMS_FILE_ARGUMENT)
    launch = node_launch.launch_for(values)
    files = [given_file] if given_file else [f"/checkout/{f}" for f in launch.params_files]
    specs = launcher.specs_for(launch, files)
    assert _launch_processes(actions) == _launcher_processes(specs, "/checkout")
    # The launcher waits for the gateway to serve before it configures; so does the launch file.
    gateways = _of(actions, "ExecuteProcess")
    assert [s.ready_prefix for s in specs if s.ready_prefix] == [
        node_launch.GATEWAY_READY_PREFIX
    ] * len(gateways)


def test_a_params_file_argument_replaces_all_the_models_files(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # e.g. a copy of config/droid.yaml with `record: goals`.
    actions = _run_launch_file(monkeypatch, params_file="/robot/droid_recording.yaml")
    (node,) = _of(actions, "LifecycleNode")
    assert node.kwargs["parameters"] == ["/robot/droid_recording.yaml", {"model": "pi05-droid"}]
    (node,) = _of(_run_launch_file(monkeypatch), "LifecycleNode")
    assert node.kwargs["parameters"] == [f"{SHARE}/config/droid.yaml", {"model": "pi05-droid"}]
    cosmos3 = "cosmos3-edge-policy-droid"
    (node,) = _of(_run_launch_file(monkeypatch, model=cosmos3), "LifecycleNode")
    assert node.kwargs["parameters"] == [
        f"{SHARE}/config/droid.yaml", f"{SHARE}/config/{cosmos3}.yaml", {"model": cosmos3},
    ]
    actions = _run_launch_file(monkeypatch, model=cosmos3, params_file="/robot/cosmos3.yaml")
    (node,) = _of(actions, "LifecycleNode")
    assert node.kwargs["parameters"] == ["/robot/cosmos3.yaml", {"model": cosmos3}]


def test_the_launcher_passes_every_file_in_order_or_the_given_one_alone() -> None:
    cosmos3 = "cosmos3-edge-policy-droid"
    launch = node_launch.launch_for({"model": cosmos3})
    node_args = launcher.specs_for(launch, launcher.params_files(launch))[-1].arguments
    files = [v for f, v in zip(node_args, node_args[1:]) if f == "--params-file"]
    assert files == [
        str(ROOT / "config" / "droid.yaml"), str(ROOT / "config" / f"{cosmos3}.yaml"),
    ]
    assert launcher.params_files(launch, "/robot/mine.yaml") == ["/robot/mine.yaml"]


def test_launch_file_declares_the_plans_arguments(monkeypatch: pytest.MonkeyPatch) -> None:
    declared = {
        a.args[0]: a.kwargs["default_value"]
        for a in _description(monkeypatch, {})
        if type(a).__name__ == "DeclareLaunchArgument"
    }
    assert declared == {n: a.default for n, a in node_launch.ARGUMENTS.items()} | {
        "params_file": ""
    }
    assert declared == {
        "model": "pi05-droid", "base_url": "", "namespace": "", "sim": "false",
        "autostart": "true", "controller": "forward", "params_file": "",
    }  # fmt: skip


def test_launcher_runs_the_console_scripts_of_setup_py() -> None:
    tree = ast.parse((ROOT / "setup.py").read_text(encoding="utf-8"))
    scripts = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and " = " in node.value:
            name, _, target = node.value.partition(" = ")
            scripts[name.strip()] = target.strip()
    for executable, target in launcher.ENTRY_POINTS.items():
        assert scripts[executable] == target


@pytest.mark.parametrize(
    ("argument", "message"),
    [
        ("sim=true", "expected name:=value"),
        ("robot:=x", "expected one of"),
        ("autostart:=maybe", "expected true or false"),
        ("controller:=velocity", "controller:=velocity: expected forward or joint_trajectory"),
    ],
)
def test_launcher_refuses_bad_arguments_naming_them(argument: str, message: str) -> None:
    with pytest.raises(launcher.LaunchError, match=message):
        launcher.parse_arguments([argument])


def test_real_robot_plan_is_the_node_alone_with_droid_yaml() -> None:
    launch = node_launch.launch_for({"model": "pi05-droid"})
    assert [p.label for p in launch.processes] == ["node"]
    assert launch.node.params_file and launch.node.lifecycle
    assert launch.node.parameters == {"model": "pi05-droid"}
    assert launch.node.env == node_launch.dds_profile_env() and launch.gateway is None
    assert launch.autostart


def test_each_sim_launch_gets_a_gateway_of_its_own_and_tells_its_node() -> None:
    first = node_launch.launch_for({"sim": "true"})
    second = node_launch.launch_for({"sim": "true", "namespace": "robot2"})
    assert [p.label for p in second.processes] == ["gateway", "sim_robot", "node"]
    urls = []
    for launch in (first, second):
        assert launch.gateway is not None
        port = launch.gateway.arguments[launch.gateway.arguments.index("--port") + 1]
        assert launch.node.parameters["base_url"] == f"http://127.0.0.1:{port}"
        key = launch.node.env["SEQUENCES_API_KEY"]
        # The key goes to the gateway in its environment, never on a command line.
        assert launch.gateway.env == {node_launch.GATEWAY_KEYS_ENV: key}
        assert key not in launch.gateway.arguments and len(key) >= 24
        urls.append(launch.node.parameters["base_url"])
    assert urls[0] != urls[1]
    assert first.node.env != second.node.env
    assert second.namespace == "robot2" and second.node_path == "/robot2/sequence_ai"


def test_sim_with_a_base_url_shares_that_service() -> None:
    launch = node_launch.launch_for({"sim": "true", "base_url": "http://127.0.0.1:8787"})
    assert [p.label for p in launch.processes] == ["sim_robot", "node"]
    assert launch.node.parameters["base_url"] == "http://127.0.0.1:8787"
    # Its key is the caller's SEQUENCES_API_KEY, inherited from the environment.
    assert launch.node.env == node_launch.dds_profile_env()


def test_the_controller_argument_chooses_the_nodes_parameters_file() -> None:
    assert node_launch.launch_for({}).params_files == ("config/droid.yaml",)
    jtc = node_launch.launch_for({"controller": "joint_trajectory", "sim": "true"})
    assert jtc.params_files == ("config/droid_jtc.yaml",)
    # The same processes either way: sim_robot serves both controllers' topics.
    assert [p.label for p in jtc.processes] == ["gateway", "sim_robot", "node"]


@pytest.mark.parametrize(("model", "simulator"), [
    ("sim-bimanual-reach", "sim_bimanual"),
    ("sim-stateless-ee-delta", "sim_cartesian"),
    ("sim-ee-absolute-reach", "sim_cartesian"),
])
def test_a_model_of_another_robot_brings_its_own_file_and_simulator(
    model: str, simulator: str
) -> None:
    launch = node_launch.launch_for({"model": model, "sim": "true"})
    assert launch.params_files == (f"config/{model}.yaml",)
    assert [p.label for p in launch.processes] == ["gateway", simulator, "node"]
    assert launch.node.parameters["model"] == model
    assert node_launch.share_file(launch.params_files[0]).is_file()


@pytest.mark.parametrize("controller", ["forward", "joint_trajectory"])
def test_a_droid_model_loads_its_overlay_after_the_controllers_file(controller: str) -> None:
    base = node_launch.PARAMS_FILES[controller]
    launch = node_launch.launch_for(
        {"model": "cosmos3-edge-policy-droid", "controller": controller}
    )
    assert launch.params_files == (base, "config/cosmos3-edge-policy-droid.yaml")
    assert all(node_launch.share_file(f).is_file() for f in launch.params_files)
    assert node_launch.launch_for({"sim": "true", "model": "cosmos3-edge-policy-droid"}).processes[
        1
    ].label == "sim_robot"
    # pi05-droid and a model the table does not know (a fine-tuned one) get the DROID file alone.
    for model in ("pi05-droid", "accounts/sequences/models/ftjob-0123"):
        given = {"model": model, "controller": controller}
        assert node_launch.launch_for(given).params_files == (base,)


def _merged(files: tuple[str, ...]) -> dict[str, Any]:
    """The node's parameters from `files` loaded in order, as ROS merges them (a later file's
    key wins)."""
    merged: dict[str, Any] = {}
    for relative in files:
        document = yaml.safe_load(node_launch.share_file(relative).read_text(encoding="utf-8"))
        merged.update(document["/**/sequence_ai"]["ros__parameters"])
    return merged


@pytest.mark.parametrize(
    "model", ["pi05-droid", "cosmos3-edge-policy-droid", "sim-bimanual-reach",
              "sim-stateless-ee-delta", "sim-ee-absolute-reach"]
)
def test_a_models_files_name_its_catalogue_views_on_the_simulators_topics(model: str) -> None:
    row = simulated_row(model)
    params = _merged(node_launch.launch_for({"model": model}).params_files)
    assert params["model"] == model
    assert params["camera_views"] == row["camera_views"]
    assert params["camera_topics"] == [f"cameras/{v}/image_raw" for v in row["camera_views"]]
    assert params["camera_transports"] == ["raw"] * len(row["camera_views"])


def test_the_cosmos3_overlay_carries_only_what_differs_from_droid_yaml() -> None:
    droid = _merged(("config/droid.yaml",))
    overlay = _merged(("config/cosmos3-edge-policy-droid.yaml",))
    assert set(overlay) <= set(droid)
    assert all(overlay[key] != droid[key] for key in overlay)


def test_node_path_in_a_namespace() -> None:
    assert node_launch.node_path("") == "/sequence_ai"
    assert node_launch.node_path("/robot2/") == "/robot2/sequence_ai"


@pytest.mark.usefixtures("fixed_port_and_key")
def test_launch_file_configures_once_the_gateway_serves_then_activates(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    actions = _run_launch_file(monkeypatch, sim="true")
    (node,) = _of(actions, "LifecycleNode")
    # No configure before the gateway serves: it comes from the gateway's output.
    assert not _of(actions, "EmitEvent")
    handlers = [h.args[0] for h in _of(actions, "RegisterEventHandler")]
    (serving,) = [h for h in handlers if type(h).__name__ == "OnProcessIO"]
    (activate,) = [h for h in handlers if type(h).__name__ == "OnStateTransition"]
    when = serving.kwargs["on_stdout"]
    assert when(types.SimpleNamespace(text=b"INFO: Started server process")) is None
    (configure,) = when(types.SimpleNamespace(text=f"SEQUENCES_BASE_URL=http://127.0.0.1:{PORT}\n"
                                              .encode()))
    assert configure.kwargs["event"].kwargs["transition_id"] == 1  # configure
    assert (activate.kwargs["start_state"], activate.kwargs["goal_state"]) == (
        "configuring", "inactive",
    )
    assert activate.kwargs["target_lifecycle_node"] is node


def test_launch_file_real_robot_configures_at_once(monkeypatch: pytest.MonkeyPatch) -> None:
    actions = _run_launch_file(monkeypatch)
    (configure,) = _of(actions, "EmitEvent")
    assert configure.kwargs["event"].kwargs["transition_id"] == 1


def test_launch_file_without_autostart_leaves_the_node_unconfigured(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    actions = _run_launch_file(monkeypatch, autostart="false", sim="true")
    assert not _of(actions, "EmitEvent") and not _of(actions, "RegisterEventHandler")
