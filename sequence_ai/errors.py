"""Typed errors: a controller reacts differently to each class, so the class is the contract."""

from __future__ import annotations

from typing import Mapping, Optional

__all__ = [
    "AuthError",
    "ChunkExhausted",
    "InvalidRequest",
    "InvalidResponse",
    "OutOfCredit",
    "PinMismatch",
    "RateLimited",
    "SequencesError",
    "Unavailable",
]


class SequencesError(Exception):
    """Base class of every error this client raises about the service or its answers.

    ``status`` is the HTTP status (None for local failures); ``body`` the raw response text.
    A platform answer's typed body adds ``code`` (what to switch on: "busy", "not_found", ...),
    ``request_id`` (quote it when asking about a failure), ``hint`` and ``details``.
    """

    def __init__(
        self,
        message: str,
        *,
        status: Optional[int] = None,
        body: Optional[str] = None,
        code: Optional[str] = None,
        request_id: Optional[str] = None,
        hint: Optional[str] = None,
        details: Optional[Mapping[str, object]] = None,
    ) -> None:
        super().__init__(message)
        self.message = message
        self.status = status
        self.body = body
        self.code = code
        self.request_id = request_id
        self.hint = hint
        self.details: Mapping[str, object] = dict(details or {})

    def __str__(self) -> str:
        return self.message

    def __repr__(self) -> str:
        # The body is left out: it can be large and is already summarised by the message.
        return f"{type(self).__name__}({self.message!r}, status={self.status!r})"


class AuthError(SequencesError):
    """No API key, or the gateway refused it (401). Stop: retrying cannot help."""


class OutOfCredit(SequencesError):
    """The account's balance is exhausted (402). Stop and hold the robot."""


class InvalidRequest(SequencesError):
    """The request was refused as malformed (4xx) or failed a local pre-send check. Fix it."""


class Unavailable(SequencesError):
    """The service cannot answer now: 503/504, 429, timeouts and unreachable gateways.

    Wait and retry only when ``warming`` is true (a cold model loading, about
    ``retry_after_s`` seconds to go) or it is ``RateLimited``; otherwise treat it as a stop.
    """

    def __init__(
        self,
        message: str,
        *,
        status: Optional[int] = None,
        body: Optional[str] = None,
        retry_after_s: Optional[float] = None,
        warming: bool = False,
        job_id: Optional[str] = None,
        code: Optional[str] = None,
        request_id: Optional[str] = None,
        hint: Optional[str] = None,
        details: Optional[Mapping[str, object]] = None,
    ) -> None:
        super().__init__(message, status=status, body=body, code=code, request_id=request_id,
                         hint=hint, details=details)
        self.retry_after_s = retry_after_s
        self.warming = warming
        self.job_id = job_id

    def __repr__(self) -> str:
        return (
            f"{type(self).__name__}({self.message!r}, status={self.status!r}, "
            f"warming={self.warming!r}, retry_after_s={self.retry_after_s!r})"
        )


class RateLimited(Unavailable):
    """Too many requests (429): wait ``retry_after_s`` seconds (None: not said), then retry.

    ``run``/``act``/``predict`` wait it out before the first action, like a warming model;
    once the arm moves it ends the run like any other error.
    """


class PinMismatch(SequencesError):
    """A deployment's worker presented a certificate other than the one connect pinned. Stop:
    the connection is refused rather than trusted, and retrying reaches the same worker."""


class ChunkExhausted(SequencesError):
    """``next_action()`` found no buffered step and was given no observation to fetch more."""


class InvalidResponse(SequencesError):
    """A response (usually an action chunk) failed a sanity check; none of it may be used."""
