"""Response bodies decoded under a cap: the cap bounds decoded bytes as they are decoded, so a
few hundred compressed bytes cannot become gigabytes in memory."""

from __future__ import annotations

import time
import zlib
from collections.abc import Iterable, Iterator
from typing import Optional

import httpx

from ..errors import InvalidResponse, Unavailable

__all__ = ["ACCEPT_ENCODING", "MAX_BODY_BYTES", "decoded_pieces", "read_body"]

# Largest response body read. Served chunks are 3 kB (pi05, 15 rows) to 5 kB (cosmos3, 32 rows)
# and the catalogue about 1.2 kB a model: 2 MiB leaves 400x room (and space for a world
# prediction payload), while a body at the cap parses in a fraction of a second where an
# uncapped 200,000-row chunk took 5 s and 410 MB.
MAX_BODY_BYTES = 2 * 1024 * 1024

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


def _too_large(what: str, status: int, size: str) -> InvalidResponse:
    return InvalidResponse(
        f"{what} answered {status} with a body of {size}; expected at most "
        f"{MAX_BODY_BYTES} bytes (an action chunk is a few kB)",
        status=status,
    )


def read_body(
    response: httpx.Response, what: str, where: str, deadline: float, applied: float
) -> bytes:
    """The whole decoded body of ``response`` (``what``: "POST /v1/act", ``where``: with the
    base URL), refused past ``MAX_BODY_BYTES`` decoded or once ``deadline`` passed."""
    status = response.status_code
    declared = response.headers.get("content-length", "")
    if declared.isdigit() and int(declared) > MAX_BODY_BYTES:
        raise _too_large(what, status, f"{declared} bytes")
    pieces: list[bytes] = []
    size = 0
    encoding = response.headers.get("content-encoding")
    try:
        # Decoded here, not by httpx: it decodes each raw read in full before any cap.
        for piece in decoded_pieces(response.iter_raw(), encoding, MAX_BODY_BYTES):
            size += len(piece)
            if size > MAX_BODY_BYTES:
                raise BodyTooLarge
            pieces.append(piece)
            if time.monotonic() > deadline:
                raise Unavailable(
                    f"{where} timed out after {applied:g}s (reading the response body, "
                    f"{size} bytes so far)"
                )
    except BodyTooLarge:
        raise _too_large(what, status, "more") from None
    except UnsupportedCoding:
        raise InvalidResponse(
            f"{what} answered {status} with Content-Encoding {encoding!r:.80}; expected one of "
            f"{ACCEPT_ENCODING} or none (stacked codings are refused)",
            status=status,
        ) from None
    except zlib.error as exc:
        raise InvalidResponse(
            f"{what} answered {status} with a body that does not decode as "
            f"{encoding!r:.40}: {exc}",
            status=status,
        ) from None
    return b"".join(pieces)
