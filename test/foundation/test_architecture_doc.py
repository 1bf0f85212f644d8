"""docs/architecture.md cannot drift from the node's tree: every module of `sequence_ai_ros/`
has a row in the page's module tables, every row names a module
that exists, and every room's `__init__.py` only says what the room holds."""

from __future__ import annotations

import ast
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "sequence_ai_ros"
PAGE = ROOT / "docs" / "architecture.md"
SECTION = "## The node, `sequence_ai_ros/`"


def node_section(text: str) -> str:
    start = text.index(SECTION)
    end = text.find("\n## ", start + len(SECTION))
    return text[start : end if end != -1 else len(text)]


def named_in_tables(section: str) -> set[str]:
    """The module paths (relative to the package) in the first cell of each table row."""
    named: set[str] = set()
    for line in section.splitlines():
        if not line.startswith("| `"):
            continue
        first_cell = line.split("|")[1]
        named.update(re.findall(r"`([\w/]+\.py)`", first_cell))
    return named


def shipped_modules() -> set[str]:
    return {
        path.relative_to(PACKAGE).as_posix()
        for path in PACKAGE.rglob("*.py")
        if path.name != "__init__.py"
    }


def test_every_node_module_has_a_row_and_every_row_a_module() -> None:
    named = named_in_tables(node_section(PAGE.read_text(encoding="utf-8")))
    modules = shipped_modules()
    assert len(modules) > 50  # the walk found the package
    assert not modules - named, f"missing from {PAGE.name}'s tables: {sorted(modules - named)}"
    assert not named - modules, f"rows of {PAGE.name} name no module: {sorted(named - modules)}"


def test_the_check_finds_a_missing_row() -> None:
    section = f"{SECTION}\n\n| module | holds |\n|---|---|\n| `node.py` | the node |\n"
    assert named_in_tables(section) == {"node.py"}
    assert "vlm_planner.py" in shipped_modules() - named_in_tables(section)


def test_the_top_level_holds_only_the_nodes_and_the_rooms() -> None:
    top = {p.name for p in PACKAGE.glob("*.py")}
    assert top == {"__init__.py", "node.py", "vlm_planner.py"}


def test_each_room_init_is_a_docstring_alone() -> None:
    for init in sorted(PACKAGE.glob("*/__init__.py")):
        body = ast.parse(init.read_text(encoding="utf-8")).body
        assert len(body) == 1 and isinstance(body[0], ast.Expr), (
            f"{init.relative_to(ROOT)}: a room's __init__ says what it holds and re-exports nothing"
        )
