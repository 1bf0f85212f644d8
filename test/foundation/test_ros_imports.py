"""What ships to a robot imports no gateway, simulator, demo or test code, and has no cycle."""

from __future__ import annotations

from shipped_imports import ROOT, imports_of, module_name, shipped_ros_files

FORBIDDEN = ("sequence_ai_gateway", "sequence_ai_ros.sim", "sequence_ai_ros.demo", "bench")


def _test_modules() -> set[str]:
    """Names test code is imported by (test/ and its folders are on sys.path)."""
    return {path.stem for path in (ROOT / "test").rglob("*.py")}


def test_shipped_ros_modules_import_no_gateway_simulator_demo_or_test_code() -> None:
    tests = _test_modules()
    offenders = {}
    for path in shipped_ros_files():
        bad = {
            name
            for name in imports_of(path)
            if name.split(".")[0] in tests
            or any(name == f or name.startswith(f + ".") for f in FORBIDDEN)
        }
        if bad:
            offenders[str(path.relative_to(ROOT))] = sorted(bad)
    assert not offenders


def test_the_node_package_has_no_import_cycle() -> None:
    files = {module_name(p): p for p in shipped_ros_files() if p.parent.name != "launch"}
    graph = {
        name: {i for i in imports_of(path) if i in files and i != name}
        for name, path in files.items()
    }
    done: set[str] = set()

    def visit(name: str, path: tuple[str, ...]) -> None:
        assert name not in path, "import cycle: " + " -> ".join((*path, name))
        if name in done:
            return
        for target in sorted(graph[name]):
            visit(target, (*path, name))
        done.add(name)

    for name in sorted(graph):
        visit(name, ())
    assert "sequence_ai_ros.node" in graph and "sequence_ai_ros.goals" in graph
