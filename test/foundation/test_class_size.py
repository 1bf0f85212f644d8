"""docs/architecture.md's size guide for the classes of every package (the client, the node, the
lab and the gateway), checked from the AST: a
guide of ``GUIDE_CODE_LINES`` code lines and ``GUIDE_ATTRIBUTES`` distinct ``self.`` attributes,
and a failure only at ``CEILING_FACTOR`` times it. Classes past the guide are printed, not failed.

Code lines are the class's source lines that are not blank, not only a comment and not part of
a docstring. An attribute is a name assigned as ``self.<name>`` anywhere in the class.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("sequence_ai", "sequence_ai_ros", "sequence_ai_lab", "sequence_ai_gateway")
DOC = ROOT / "docs" / "architecture.md"
GUIDE_CODE_LINES = 250
GUIDE_ATTRIBUTES = 16
CEILING_FACTOR = 2


def _docstring_lines(tree: ast.AST) -> set[int]:
    lines: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            body = node.body
            if (
                body and isinstance(body[0], ast.Expr)
                and isinstance(body[0].value, ast.Constant)
                and isinstance(body[0].value.value, str)
            ):
                end = body[0].end_lineno or body[0].lineno
                lines.update(range(body[0].lineno, end + 1))
    return lines


def code_lines(source: str, cls: ast.ClassDef, docstrings: set[int]) -> int:
    text = source.splitlines()
    end = cls.end_lineno or cls.lineno
    return sum(
        1 for number in range(cls.lineno, end + 1)
        if number not in docstrings
        and text[number - 1].strip()
        and not text[number - 1].strip().startswith("#")
    )


def attributes(cls: ast.ClassDef) -> set[str]:
    return {
        node.attr for node in ast.walk(cls)
        if isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Store)
        and isinstance(node.value, ast.Name) and node.value.id == "self"
    }


def every_class() -> Iterator[tuple[str, int, int]]:
    for package in PACKAGES:
        for path in sorted((ROOT / package).rglob("*.py")):
            relative = path.relative_to(ROOT)
            source = path.read_text(encoding="utf-8")
            tree = ast.parse(source)
            docstrings = _docstring_lines(tree)
            for node in ast.walk(tree):
                if isinstance(node, ast.ClassDef):
                    yield (
                        f"{relative.as_posix()}::{node.name}",
                        code_lines(source, node, docstrings),
                        len(attributes(node)),
                    )


@pytest.mark.slow  # over half a second of wall time
def test_no_class_is_twice_the_size_guide() -> None:
    classes = list(every_class())
    assert len(classes) > 50  # the walk found the packages
    past_guide = [
        f"{name}: {lines} code lines, {attrs} attributes"
        for name, lines, attrs in classes
        if lines > GUIDE_CODE_LINES or attrs > GUIDE_ATTRIBUTES
    ]
    print("past the size guide (look for a second responsibility):", past_guide)
    lines_max, attrs_max = CEILING_FACTOR * GUIDE_CODE_LINES, CEILING_FACTOR * GUIDE_ATTRIBUTES
    over = [
        f"{name}: {lines} code lines, {attrs} attributes"
        for name, lines, attrs in classes
        if lines > lines_max or attrs > attrs_max
    ]
    assert not over, (
        f"over {lines_max} code lines or {attrs_max} self. attributes: a class this size holds "
        f"more than one responsibility (docs/architecture.md, 'Size of a class'): {over}"
    )


def test_the_page_states_the_guide_this_test_checks() -> None:
    text = " ".join(DOC.read_text(encoding="utf-8").split())
    assert f"past {GUIDE_CODE_LINES} code lines or {GUIDE_ATTRIBUTES} `self.` attributes" in text
    ceiling = f"({CEILING_FACTOR * GUIDE_CODE_LINES} code lines or "
    assert f"{ceiling}{CEILING_FACTOR * GUIDE_ATTRIBUTES} attributes)" in text


@pytest.mark.parametrize(("source", "lines", "attrs"), [
    ('class A:\n    """Doc\n    string."""\n\n    # why\n    x = 1\n', 2, 0),
    ("class B:\n    def f(self):\n        self.a = self.b = 1\n        self.a += 1\n", 4, 2),
])
def test_the_counts_skip_docstrings_comments_and_blank_lines(
    source: str, lines: int, attrs: int
) -> None:
    tree = ast.parse(source)
    cls = tree.body[0]
    assert isinstance(cls, ast.ClassDef)
    assert (code_lines(source, cls, _docstring_lines(tree)), len(attributes(cls))) == (
        lines, attrs)
