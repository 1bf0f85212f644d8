"""docs/gateway.md cannot drift from the gateway's tree: every module of `sequence_ai_gateway/`
has a row in "Where things are", every row names a module that exists, the top level keeps only
the command line and the plug-in interface, and a room's `__init__.py` only says what it holds."""

from __future__ import annotations

import ast
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "sequence_ai_gateway"
PAGE = ROOT / "docs" / "gateway.md"
SECTION = "## Where things are"


def section(text: str) -> str:
    start = text.index(SECTION)
    end = text.find("\n## ", start + len(SECTION))
    return text[start : end if end != -1 else len(text)]


def named_in_table(text: str) -> set[str]:
    """The module paths (relative to the package) in the first cell of each table row."""
    named: set[str] = set()
    for line in text.splitlines():
        if line.startswith("| `"):
            named.update(re.findall(r"`([\w/]+\.py)`", line.split("|")[1]))
    return named


def modules() -> set[str]:
    return {
        path.relative_to(PACKAGE).as_posix()
        for path in PACKAGE.rglob("*.py")
        if path.name != "__init__.py"
    }


def test_every_gateway_module_has_a_row_and_every_row_a_module() -> None:
    named = named_in_table(section(PAGE.read_text(encoding="utf-8")))
    found = modules()
    assert len(found) > 20  # the walk found the package
    assert not found - named, f"missing from {PAGE.name}'s table: {sorted(found - named)}"
    assert not named - found, f"rows of {PAGE.name} name no module: {sorted(named - found)}"


def test_the_check_finds_a_missing_row() -> None:
    text = f"{SECTION}\n\n| Module | What it holds |\n|---|---|\n| `__main__.py` | the CLI |\n"
    assert named_in_table(section(text)) == {"__main__.py"}
    assert "http/app.py" in modules() - named_in_table(text)


def test_the_top_level_holds_only_the_command_line_and_the_plug_in_interface() -> None:
    assert {p.name for p in PACKAGE.glob("*.py")} == {"__init__.py", "__main__.py", "policies.py"}


def test_each_room_init_is_a_docstring_alone() -> None:
    for init in sorted(PACKAGE.glob("*/**/__init__.py")):
        body = ast.parse(init.read_text(encoding="utf-8")).body
        assert len(body) == 1 and isinstance(body[0], ast.Expr), (
            f"{init.relative_to(ROOT)}: a room's __init__ says what it holds and re-exports nothing"
        )
