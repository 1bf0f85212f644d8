"""docs/architecture.md's client table lists every module of ``sequence_ai/`` by its path, so a
module added, moved or renamed without its row fails here."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
CLIENT = ROOT / "sequence_ai"
PAGE = ROOT / "docs" / "architecture.md"
SECTION = "## The client, `sequence_ai/`"
# A folder row covers its files (the recipes are documented in docs/client.md).
FOLDER_ROWS = ("recipes/",)


def _client_section() -> str:
    text = PAGE.read_text(encoding="utf-8")
    assert SECTION in text, f"{PAGE.name} has no {SECTION!r} section"
    return text.split(SECTION, 1)[1].split("\n## ", 1)[0]


def _listed(section: str) -> set[str]:
    """The paths in the first column of the section's table rows."""
    return set(re.findall(r"^\| `([^`]+)` \|", section, flags=re.MULTILINE))


def _modules() -> list[str]:
    paths = []
    for path in sorted(CLIENT.rglob("*.py")):
        relative = path.relative_to(CLIENT).as_posix()
        if any(relative.startswith(folder) for folder in FOLDER_ROWS):
            continue
        # A private subpackage's __init__ only names the folder; its heading row says what.
        if path.name == "__init__.py" and path.parent != CLIENT:
            continue
        paths.append(relative)
    return paths


def test_every_client_module_has_its_row() -> None:
    listed = _listed(_client_section())
    missing = [path for path in _modules() if path not in listed]
    assert missing == [], f"modules missing from {PAGE.name}'s client table: {missing}"


def test_every_row_names_a_module_that_exists() -> None:
    stale = sorted(path for path in _listed(_client_section()) if not (CLIENT / path).exists())
    assert stale == [], f"rows of {PAGE.name}'s client table with no module: {stale}"


def test_the_check_reads_table_rows_only() -> None:
    section = "| `a.py` | holds |\n| **`_x/`** — heading | |\ntext `b.py` in prose\n"
    assert _listed(section) == {"a.py"}
