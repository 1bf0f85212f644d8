"""The import graph of the packages: no cycles, and the layering of docs/architecture.md.

Built from the source (every import statement, including those inside functions and under
TYPE_CHECKING: a lazy or type-only import is still a dependency). Shipped code is what a robot
runs: the client, the node (its planner and action client among it) and the launch file; the
gateway, the lab (simulated robots, demo, evaluation, episode tools) and the test code are not
shipped and nothing shipped may import them.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("sequence_ai", "sequence_ai_gateway", "sequence_ai_ros", "sequence_ai_lab")
LAUNCH_FILE = ROOT / "launch" / "droid.launch.py"
LAUNCH_MODULE = "launch.droid"

CLIENT = "sequence_ai"
GATEWAY = "sequence_ai_gateway"
NODE = "sequence_ai_ros"
LAB = "sequence_ai_lab"
NOT_SHIPPED = (GATEWAY, LAB)
# The client's only hard dependency; numpy and Pillow only inside encode(), lazily.
# yaml: load_adapter reads a file with it, imported when called.
CLIENT_THIRD_PARTY = {"httpx", "msgpack", "numpy", "PIL", "yaml"}


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _sources() -> dict[str, Path]:
    found = {
        _module_name(path): path
        for package in PACKAGES
        for path in sorted((ROOT / package).rglob("*.py"))
    }
    found[LAUNCH_MODULE] = LAUNCH_FILE
    return found


SOURCES = _sources()
TEST_MODULES = {path.stem for path in (ROOT / "test").rglob("*.py")}


def _is_package(name: str) -> bool:
    return SOURCES.get(name, Path()).name == "__init__.py"


def _imports(name: str, path: Path) -> Iterator[str]:
    """Every module name `name` imports, absolute, as written or resolved."""
    tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
    package = name if _is_package(name) else name.rpartition(".")[0]
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield alias.name
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base_parts = package.split(".")
                base_parts = base_parts[: len(base_parts) - (node.level - 1)]
                base = ".".join(base_parts + ([node.module] if node.module else []))
            else:
                base = node.module or ""
            for alias in node.names:
                # `from pkg import submodule` depends on the submodule itself.
                candidate = f"{base}.{alias.name}"
                yield candidate if candidate in SOURCES else base


GRAPH: dict[str, set[str]] = {
    name: set(_imports(name, path)) for name, path in SOURCES.items()
}


def _within(name: str, prefix: str) -> bool:
    return name == prefix or name.startswith(prefix + ".")


def _shipped(name: str) -> bool:
    return name == LAUNCH_MODULE or _within(name, CLIENT) or _within(name, NODE)


def test_the_graph_covers_the_packages() -> None:
    assert f"{CLIENT}.policy" in GRAPH and f"{NODE}.node" in GRAPH and GATEWAY in GRAPH
    assert f"{LAB}.robots.sim_robot.robot" in GRAPH


def test_there_is_no_import_cycle() -> None:
    internal = {name: {t for t in targets if t in GRAPH} for name, targets in GRAPH.items()}
    state: dict[str, int] = {}
    stack: list[str] = []
    cycles: list[list[str]] = []

    def visit(name: str) -> None:
        state[name] = 1
        stack.append(name)
        for target in sorted(internal[name]):
            if state.get(target) == 1:
                cycles.append(stack[stack.index(target) :] + [target])
            elif target not in state:
                visit(target)
        stack.pop()
        state[name] = 2

    for name in sorted(internal):
        if name not in state:
            visit(name)
    assert not cycles, "import cycles:\n" + "\n".join(" -> ".join(c) for c in cycles)


@pytest.mark.parametrize("name", sorted(n for n in GRAPH if _shipped(n)))
def test_shipped_code_imports_no_gateway_lab_or_test_code(name: str) -> None:
    bad = sorted(
        target
        for target in GRAPH[name]
        if any(_within(target, p) for p in NOT_SHIPPED) or target.split(".")[0] in TEST_MODULES
    )
    assert not bad, f"{name} (shipped) imports {bad}"


@pytest.mark.parametrize("name", sorted(n for n in GRAPH if _within(n, CLIENT)))
def test_the_client_depends_on_httpx_and_msgpack_alone(name: str) -> None:
    import sys

    stdlib = sys.stdlib_module_names
    bad = sorted(
        target
        for target in GRAPH[name]
        if not _within(target, CLIENT)
        and target.split(".")[0] not in stdlib
        and target.split(".")[0] not in CLIENT_THIRD_PARTY
        and target != "__future__"
    )
    assert not bad, (
        f"{name} imports {bad}; the client may import only httpx and msgpack "
        "(+ numpy/PIL/yaml lazily)"
    )


@pytest.mark.parametrize("name", sorted(n for n in GRAPH if _within(n, GATEWAY)))
def test_the_gateway_depends_on_nothing_of_the_client_the_node_or_the_lab(name: str) -> None:
    bad = sorted(t for t in GRAPH[name] if any(_within(t, p) for p in (CLIENT, NODE, LAB)))
    assert not bad, f"{name} imports {bad}; the gateway is a separate service"


# The node's rooms by floor: a room imports only rooms on lower floors. The ground floor holds
# the plain values every room shares and imports no other room; the top level (node.py,
# vlm_planner.py) stands on every room.
FLOORS = {
    "core": 0,
    "geometry": 1,
    "plumbing": 1,
    "inputs": 2,
    "safety": 2,
    "commands": 3,
    "episodes": 3,
    "goals": 4,
    "params": 5,
    "bringup": 6,
}
TOP = max(FLOORS.values()) + 1


def _room(name: str) -> str:
    """The node's folder a module lives in; "" for the top level."""
    parts = name.split(".")
    return parts[1] if len(parts) > 2 or (len(parts) == 2 and _is_package(name)) else ""


NODE_ROOMS = sorted({_room(n) for n in GRAPH if _within(n, NODE)} - {""})
ROOM_ARROWS = sorted(
    (_room(name), _room(target), f"{name} -> {target}")
    for name, targets in GRAPH.items()
    if _within(name, NODE)
    for target in targets
    if target in GRAPH and _within(target, NODE) and _room(target) != _room(name)
)


def _floor(room: str) -> int:
    return TOP if room == "" else FLOORS[room]


def test_every_room_of_the_node_has_a_floor() -> None:
    assert NODE_ROOMS == sorted(FLOORS)


def test_no_room_imports_a_room_on_its_floor_or_above() -> None:
    up = [arrow for source, target, arrow in ROOM_ARROWS if _floor(target) >= _floor(source)]
    assert not up, "arrows up a floor:\n" + "\n".join(up)


def test_the_ground_floor_imports_no_other_room() -> None:
    bad = [arrow for source, _, arrow in ROOM_ARROWS if source == "core"]
    assert not bad, "the ground floor imports other rooms:\n" + "\n".join(bad)


def test_the_rooms_import_each_other_in_no_ring() -> None:
    reach = {room: {t for s, t, _ in ROOM_ARROWS if s == room} for room in ["", *FLOORS]}
    for _ in FLOORS:  # a ring passes each room at most once
        for seen in reach.values():
            seen |= {t for r in list(seen) for t in reach[r]}
    assert not [room for room, seen in reach.items() if room in seen]


def test_the_floor_check_can_fail() -> None:
    assert _floor("core") < _floor("safety") < _floor("goals") < _floor("")
    assert any(target == "core" for _, target, _ in ROOM_ARROWS)
