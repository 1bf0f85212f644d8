"""What the shipped ROS code imports, read from its source (an AST walk, nothing is imported)."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = "sequence_ai_ros"
# What ships to a robot: the node's package without the simulator and the demo, and the launch
# file. (sim/ and demo/ are installed too, but only `sim:=true` and development use them.)
NOT_SHIPPED = ("sim", "demo")


def shipped_ros_files() -> list[Path]:
    package = ROOT / PACKAGE
    files = [
        path
        for path in sorted(package.rglob("*.py"))
        if path.relative_to(package).parts[0] not in NOT_SHIPPED
    ]
    return files + sorted((ROOT / "launch").glob("*.launch.py"))


def module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def imports_of(path: Path) -> set[str]:
    """Absolute names of every module `path` imports, at any depth of its code."""
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    package = module_name(path).rpartition(".")[0]
    if path.name == "__init__.py":
        package = module_name(path)
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[: len(package.split(".")) - node.level + 1]
                module = ".".join(base + ([node.module] if node.module else []))
            else:
                module = node.module or ""
            found.add(module)
            # `from package import module` imports that module too.
            found.update(f"{module}.{alias.name}" for alias in node.names)
    return found


def top_level(name: str) -> str:
    return name.split(".")[0]
