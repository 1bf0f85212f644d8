"""The class-size rule of docs/architecture.md, checked from the AST: no class of the shipped
client or node (``sequence_ai/``, ``sequence_ai_ros/`` outside ``sim/`` and ``demo/``) over
``MAX_CODE_LINES`` code lines or ``MAX_ATTRIBUTES`` distinct ``self.`` attributes.

Code lines are the class's source lines that are not blank, not only a comment and not part of
a docstring. An attribute is a name assigned as ``self.<name>`` anywhere in the class.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SHIPPED = ("sequence_ai", "sequence_ai_ros")
NOT_SHIPPED = ("sim", "demo")
MAX_CODE_LINES = 250
MAX_ATTRIBUTES = 16


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


def shipped_classes() -> Iterator[tuple[str, int, int]]:
    for package in SHIPPED:
        for path in sorted((ROOT / package).rglob("*.py")):
            relative = path.relative_to(ROOT)
            if any(part in NOT_SHIPPED for part in relative.parts[1:]):
                continue
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


def test_no_shipped_class_is_over_the_size_rule() -> None:
    classes = list(shipped_classes())
    assert len(classes) > 50  # the walk found the packages
    over = [
        f"{name}: {lines} code lines, {attrs} attributes"
        for name, lines, attrs in classes
        if lines > MAX_CODE_LINES or attrs > MAX_ATTRIBUTES
    ]
    assert not over, (
        f"over {MAX_CODE_LINES} code lines or {MAX_ATTRIBUTES} self. attributes (split the "
        f"class, docs/architecture.md): {over}"
    )


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
