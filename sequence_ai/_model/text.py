"""Instruction text: blank is blank even when made of invisible characters."""

from __future__ import annotations

import unicodedata

__all__ = ["is_blank"]

# Categories that print nothing: format (zero-width space, joiners, BOM), controls, separators,
# marks with no base, private use, unassigned, surrogates.
_INVISIBLE_CATEGORIES = frozenset(("Cf", "Cc", "Zs", "Zl", "Zp", "Mn", "Me", "Co", "Cn", "Cs"))
# Letters that render as blank space (Hangul fillers, the blank Braille pattern).
_BLANK_LETTERS = frozenset("\u115f\u1160\u3164\uffa0\u2800")


def is_blank(text: str) -> bool:
    """True when ``text`` shows nothing: empty, whitespace, or only invisible characters."""
    return not any(
        not char.isspace()
        and char not in _BLANK_LETTERS
        and unicodedata.category(char) not in _INVISIBLE_CATEGORIES
        for char in text
    )
