"""Response bodies decoded under a cap: the cap bounds decoded bytes as they are decoded, so a
few hundred compressed bytes cannot become gigabytes in memory."""

from __future__ import annotations

import zlib
from collections.abc import Iterable, Iterator
from typing import Optional

__all__ = ["ACCEPT_ENCODING", "BodyTooLarge", "UnsupportedCoding", "decoded_pieces"]

# The codings asked for, and the only ones decoded; one coding at most per response.
ACCEPT_ENCODING = "gzip, deflate"
_WBITS = {"gzip": 16 + zlib.MAX_WBITS, "x-gzip": 16 + zlib.MAX_WBITS, "deflate": zlib.MAX_WBITS}


class BodyTooLarge(Exception):
    """More than the cap was decoded."""


class UnsupportedCoding(Exception):
    """The Content-Encoding is stacked or not one of ``ACCEPT_ENCODING``."""


def codings(header: Optional[str]) -> list[str]:
    """The content codings of a ``Content-Encoding`` value, identity dropped."""
    if not header:
        return []
    found = [c.strip().lower() for c in header.split(",")]
    return [c for c in found if c not in ("", "identity")]


def _inflater(coding: str) -> zlib._Decompress:
    if coding == "deflate":
        # RFC 9110's deflate is zlib-wrapped; +32 also takes a gzip header.
        return zlib.decompressobj(zlib.MAX_WBITS | 32)
    return zlib.decompressobj(_WBITS[coding])


def decoded_pieces(raw: Iterable[bytes], header: Optional[str], cap: int) -> Iterator[bytes]:
    """The decoded body piece by piece, never more than ``cap + 1`` bytes decoded in all.

    Raises ``UnsupportedCoding`` before reading for a stacked or unknown coding, and
    ``BodyTooLarge`` once more than ``cap`` bytes would be decoded.
    """
    found = codings(header)
    if len(found) > 1 or (found and found[0] not in _WBITS):
        raise UnsupportedCoding(header)
    if not found:
        yield from raw
        return
    inflater = _inflater(found[0])
    budget = cap + 1
    for piece in raw:
        data = piece
        while data:
            out = inflater.decompress(data, budget)
            budget -= len(out)
            if budget <= 0:
                raise BodyTooLarge
            if out:
                yield out
            data = inflater.unconsumed_tail
    tail = inflater.flush(budget)
    if len(tail) >= budget:
        raise BodyTooLarge
    if tail:
        yield tail
