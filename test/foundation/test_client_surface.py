"""The client's public surface: code outside ``sequence_ai/`` reaches it only through
``sequence_ai`` (and its public modules), and every exported name is documented.

The private subpackages (``sequence_ai._*``) may be renamed or refiled at any time; the node,
the gateway, the launch file, the benchmarks and the tests of other packages must not notice.
Only the client's own unit tests reach inside it.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator
from pathlib import Path

import pytest

import sequence_ai

ROOT = Path(__file__).resolve().parents[2]
OUTSIDE = ("sequence_ai_ros", "sequence_ai_lab", "sequence_ai_gateway", "launch", "bench", "test")
# The client's own unit tests: they test the implementation where it lives.
CLIENT_OWN_TESTS = (
    ROOT / "test" / "client",
    ROOT / "test" / "safety" / "test_reliability_client.py",
)
API_DOC = ROOT / "docs" / "client.md"
API_SECTION = "## The public API"


def _outside_modules() -> Iterator[Path]:
    for folder in OUTSIDE:
        for path in sorted((ROOT / folder).rglob("*.py")):
            if not any(path == own or own in path.parents for own in CLIENT_OWN_TESTS):
                yield path


def _private_imports(path: Path) -> Iterator[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names = [node.module] + [f"{node.module}.{alias.name}" for alias in node.names]
        else:
            continue
        private = [name for name in names if re.match(r"sequence_ai\._", name)]
        if private:
            yield f"line {node.lineno}: {private[0]}"


def test_the_scan_sees_the_node_and_the_benchmarks() -> None:
    scanned = {path.relative_to(ROOT).parts[0] for path in _outside_modules()}
    assert {"sequence_ai_ros", "bench", "test"} <= scanned


@pytest.mark.slow  # over half a second of wall time
def test_nothing_outside_the_client_imports_its_private_modules() -> None:
    found = {
        str(path.relative_to(ROOT)): hits
        for path in _outside_modules()
        if (hits := list(_private_imports(path)))
    }
    assert found == {}, (
        "modules outside sequence_ai/ import its private modules (export the name from "
        f"sequence_ai and document it in docs/client.md instead): {found}"
    )


def test_the_private_import_check_can_fail(tmp_path: Path) -> None:
    sample = tmp_path / "sample.py"
    lines = (
        "import sequence_ai",
        "from sequence_ai import Policy",
        "from sequence_ai.events import RunEvent",
        "from sequence_ai._run.status import RunStatus",
        "import sequence_ai._transport.transport",
        "from sequence_ai import _model",
    )
    sample.write_text("\n".join(lines) + "\n", encoding="utf-8")
    assert [hit.split(":")[0] for hit in _private_imports(sample)] == ["line 4", "line 5", "line 6"]


def test_every_exported_name_is_documented() -> None:
    text = API_DOC.read_text(encoding="utf-8")
    assert API_SECTION in text, f"{API_DOC.name} has no {API_SECTION!r} section"
    section = text.split(API_SECTION, 1)[1].split("\n## ", 1)[0]
    documented = set(re.findall(r"`([A-Za-z_][A-Za-z0-9_]*)", section))
    missing = [name for name in sequence_ai.__all__ if name not in documented]
    assert missing == [], f"exported but not in {API_DOC.name}'s {API_SECTION!r}: {missing}"


def test_the_client_top_level_holds_at_most_eight_modules() -> None:
    # The public modules; the implementation lives in the private subpackages.
    top = sorted(path.name for path in (ROOT / "sequence_ai").glob("*.py"))
    assert len(top) <= 8, top
    private = [path.name for path in (ROOT / "sequence_ai").iterdir() if path.is_dir()]
    assert all(
        name.startswith("_") or name == "recipes" for name in private if name != "__pycache__"
    )
