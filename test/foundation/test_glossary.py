"""The glossary of docs/architecture.md is the code's vocabulary: no module, class or function of
what ships (the client, the node) is named with a synonym the glossary forbids (its "never in a
name" column), checked from the AST."""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator, Mapping
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PAGE = ROOT / "docs" / "architecture.md"
SHIPPED = ("sequence_ai", "sequence_ai_ros")
# Names kept although they use a forbidden synonym, and why.
KEPT = {
    "ImageFrame": "the published client's public type (sequence_ai.ImageFrame): a rename breaks "
    "its users",
}


def glossary(text: str) -> dict[str, tuple[str, ...]]:
    """Each word of the glossary table and the names it never takes (its last column)."""
    section = text.split("\n## Glossary\n", 1)[1].split("\n## ", 1)[0]
    words: dict[str, tuple[str, ...]] = {}
    for line in section.splitlines():
        cells = line.split("|")[1:-1]
        if len(cells) != 4 or cells[0].strip() in ("word", "---"):
            continue
        words[cells[0].strip()] = tuple(re.findall(r"`(\w+)`", cells[3]))
    return words


def tokens(name: str) -> tuple[str, ...]:
    """The words of a snake_case or CamelCase name, lower case, a plural's `s` dropped."""
    spaced = re.sub(r"([A-Z]+)([A-Z][a-z])", r"\1_\2", name)
    spaced = re.sub(r"([a-z0-9])([A-Z])", r"\1_\2", spaced)
    return tuple(
        word.lower().removesuffix("s") if len(word) > 3 else word.lower()
        for word in spaced.split("_") if word
    )


def _contains(name: tuple[str, ...], fragment: tuple[str, ...]) -> bool:
    size = len(fragment)
    return any(name[i : i + size] == fragment for i in range(len(name) - size + 1))


def shipped_names() -> Iterator[tuple[str, str]]:
    """(module path, name) of every module, class and function of the shipped packages."""
    for package in SHIPPED:
        for path in sorted((ROOT / package).rglob("*.py")):
            where = path.relative_to(ROOT).as_posix()
            yield where, path.stem
            for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
                if isinstance(node, (ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
                    yield where, node.name


def forbidden_uses(
    names: Iterator[tuple[str, str]], words: Mapping[str, tuple[str, ...]]
) -> list[str]:
    found = []
    for where, name in names:
        split = tokens(name)
        for word, never in words.items():
            for synonym in never:
                if _contains(split, tokens(synonym)):
                    found.append(f"{where}: {name} says {synonym!r} for {word!r}")
    return found


WORDS = glossary(PAGE.read_text(encoding="utf-8"))


def test_every_glossary_word_lists_what_no_name_may_say_instead() -> None:
    assert len(WORDS) >= 13  # the table was found
    bare = sorted(word for word, never in WORDS.items() if not never)
    assert not bare, f"glossary words of {PAGE.name} with no forbidden synonym: {bare}"


@pytest.mark.slow  # over half a second of wall time
def test_no_shipped_name_uses_a_synonym_the_glossary_forbids() -> None:
    names = list(shipped_names())
    assert len(names) > 500  # the walk found the packages
    found = forbidden_uses((n for n in names if n[1] not in KEPT), WORDS)
    assert not found, f"rename to the glossary's word (docs/architecture.md): {found}"
    present = {name for _, name in names}
    stale = sorted(set(KEPT) - present)
    assert not stale, f"KEPT names no longer in the code: {stale}"


def test_the_check_finds_a_synonym_inside_a_name() -> None:
    words = {"image": ("camera_frame", "photo")}
    names = iter([("a.py", "CameraFramesCache"), ("b.py", "frame_of_camera"), ("c.py", "photos")])
    assert forbidden_uses(names, words) == [
        "a.py: CameraFramesCache says 'camera_frame' for 'image'",
        "c.py: photos says 'photo' for 'image'",
    ]


def test_names_split_into_words() -> None:
    assert tokens("ImageFrame") == ("image", "frame")
    assert tokens("_current_frames") == ("current", "frame")
    assert tokens("HTTPServerError") == ("http", "server", "error")
