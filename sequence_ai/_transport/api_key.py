"""API key hygiene: a key a header cannot carry is refused before it is used, and error text
is scrubbed of the key in every form it can be printed in."""

from __future__ import annotations

import json
from typing import Optional

__all__ = ["check_api_key", "scrub_key"]

REDACTED = "<api key>"


def check_api_key(key: str) -> None:
    """Refuse a key with a character an HTTP header cannot carry; the message names the
    problem and where, never the key."""
    for index, char in enumerate(key):
        if not 0x21 <= ord(char) <= 0x7E:
            what = {"\n": "a newline", "\r": "a carriage return", "\0": "a NUL",
                    " ": "a space", "\t": "a tab"}.get(char, f"the character U+{ord(char):04X}")
            raise ValueError(
                f"the API key has {what} at position {index} (of {len(key)} characters); "
                "expected one line of printable ASCII with no spaces, as issued "
                "(a key file must hold the key alone)"
            )


def _forms(key: str) -> list[str]:
    """How the key can appear in text: raw, and as repr, JSON and bytes-repr escape it."""
    forms = {
        key,
        repr(key)[1:-1],
        json.dumps(key)[1:-1],
        repr(key.encode("utf-8", "replace"))[2:-1],
        key.encode("unicode_escape").decode("ascii"),
    }
    # Longest first: a form that contains another is replaced whole.
    return sorted((f for f in forms if f), key=len, reverse=True)


def scrub_key(text: str, key: Optional[str]) -> str:
    """``text`` with every printable form of ``key`` replaced by ``<api key>``."""
    if not key:
        return text
    for form in _forms(key):
        if form in text:
            text = text.replace(form, REDACTED)
    return text
