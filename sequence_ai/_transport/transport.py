"""HTTP transport: a pool of kept-alive connections, credentials, whole-request deadlines,
capped bodies, and the status → error mapping."""

from __future__ import annotations

import email.utils
import ipaddress
import json
import math
import os
import socket
import ssl
import threading
import time
from collections.abc import Mapping
from datetime import timezone
from typing import Any, Optional, Union
from urllib.parse import quote, urlsplit

import httpx

from ..errors import (
    AuthError,
    InvalidRequest,
    InvalidResponse,
    OutOfCredit,
    PinMismatch,
    RateLimited,
    SequencesError,
    Unavailable,
)
from .api_key import check_api_key, scrub_key
from .body import ACCEPT_ENCODING, MAX_BODY_BYTES, read_body
from .deadline import DeadlineWatch, Exchange
from .pinned_tls import CertificateRefused
from .pool_sockets import pooled_sockets, socket_serving
from .refusals import refusal

__all__ = [
    "DEFAULT_BASE_URL",
    "MAX_BODY_BYTES",
    "Transport",
    "check_base_url",
    "encode_json",
    "parse_retry_after",
    "query_path",
    "resolve_api_key",
    "resolve_base_url",
    "user_agent",
]

DEFAULT_BASE_URL = "https://api.generalsequences.com"
BASE_URL_ENV = "SEQUENCES_BASE_URL"
API_KEY_ENV = "SEQUENCES_API_KEY"

# A Policy has at most MAX_IN_FLIGHT requests of its run in flight, plus a catalogue or readiness
# call: the pool keeps that many idle connections for five minutes, so a run reconnects never
# between chunks. Connections are opened on demand: a run with N in flight opens N.
MAX_IN_FLIGHT = 8
# Whole-request timeout of a connection unless given.
DEFAULT_TIMEOUT_S = 30.0
KEEPALIVE_CONNECTIONS = MAX_IN_FLIGHT + 1
KEEPALIVE_EXPIRY_S = 300.0
MAX_MESSAGE_CHARS = 500
# The phase an httpx timeout names in the Unavailable it becomes.
_TIMEOUT_PHASES: dict[type[BaseException], str] = {
    httpx.ConnectTimeout: "connecting",
    httpx.ReadTimeout: "waiting for the response",
    httpx.WriteTimeout: "sending the request",
    httpx.PoolTimeout: "waiting for a free connection",
}

# What ``verify=`` accepts: on/off, a CA bundle path, or a ready SSL context.
VerifyArg = Union[bool, str, "os.PathLike[str]", ssl.SSLContext]


def user_agent() -> str:
    try:
        from importlib.metadata import PackageNotFoundError, version

        try:
            return f"sequence-ai-python/{version('sequence_ai_ros')}"
        except PackageNotFoundError:
            return "sequence-ai-python/dev"
    except ImportError:
        return "sequence-ai-python/dev"


def resolve_base_url(arg: Optional[str] = None) -> str:
    """Explicit argument, else ``SEQUENCES_BASE_URL``, else production; no trailing slash."""
    if arg is not None and not isinstance(arg, str):
        raise TypeError(f"base_url must be a str, got {type(arg).__name__}")
    url = (arg or os.environ.get(BASE_URL_ENV, "") or DEFAULT_BASE_URL).strip()
    return url.rstrip("/")


def resolve_api_key(arg: Optional[str] = None) -> Optional[str]:
    """Explicit argument, else ``SEQUENCES_API_KEY``; None when neither is set."""
    if arg is not None and not isinstance(arg, str):
        raise TypeError(f"api_key must be a str, got {type(arg).__name__}")
    key = (arg or os.environ.get(API_KEY_ENV, "")).strip()
    return key or None


def _is_loopback(host: str) -> bool:
    if host.lower() in ("localhost", "localhost.localdomain") or host.lower().endswith(
        ".localhost"
    ):
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def check_base_url(url: str, *, allow_insecure: bool = False) -> str:
    """Refuse URLs that would send the API key somewhere unsafe or nowhere at all."""
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ValueError(
            f"base_url is {url!r}; expected an http(s) URL such as {DEFAULT_BASE_URL!r}"
        )
    if parts.scheme == "http" and not allow_insecure and not _is_loopback(parts.hostname):
        # Plain http off this machine would put the bearer key on the network in clear text.
        raise ValueError(
            f"base_url is {url!r}: plain http:// is only allowed to a loopback host "
            "(127.0.0.1, ::1, localhost); use https:// or pass allow_insecure=True"
        )
    return url


def _ssl_context(verify: VerifyArg) -> Union[bool, ssl.SSLContext]:
    if isinstance(verify, (bool, ssl.SSLContext)):
        return verify
    if isinstance(verify, (str, os.PathLike)):
        path = os.fspath(verify)
        if not os.path.isfile(path):
            raise ValueError(f"verify is {path!r}; expected True, False or a CA bundle file path")
        # httpx deprecates a bare path; a context built from the bundle is the supported form.
        return ssl.create_default_context(cafile=path)
    raise TypeError(
        f"verify is {verify!r}; expected True, False, a CA bundle path or an ssl.SSLContext"
    )


def parse_retry_after(value: Optional[str], *, now: Optional[float] = None) -> Optional[float]:
    """``Retry-After`` as seconds from now: delta-seconds or an HTTP-date (RFC 9110)."""
    if value is None:
        return None
    text = value.strip()
    if not text:
        return None
    try:
        seconds = float(text)
    except ValueError:
        try:
            when = email.utils.parsedate_to_datetime(text)
        except (TypeError, ValueError, IndexError):
            return None
        if when is None:
            return None
        if when.tzinfo is None:
            when = when.replace(tzinfo=timezone.utc)
        seconds = when.timestamp() - (now if now is not None else time.time())
    if not math.isfinite(seconds):
        return None
    return max(0.0, seconds)


def query_path(path: str, params: Optional[Mapping[str, Any]]) -> str:
    """``path?k=v&...`` with ``/`` left literal in values, as the Sequences wire has it (§1.2):
    ``?model=accounts/sequences/models/pi05-droid``, never ``accounts%2Fsequences%2F...``."""
    if not params:
        return path
    pairs = [f"{quote(str(k), safe='')}={quote(str(v), safe='/')}" for k, v in params.items()]
    return f"{path}{'&' if '?' in path else '?'}{'&'.join(pairs)}"


def encode_json(body: Any) -> bytes:
    """A request body as compact JSON bytes; NaN or infinity is refused (JSON cannot carry it)."""
    try:
        return json.dumps(body, allow_nan=False, separators=(",", ":")).encode("utf-8")
    except ValueError:
        raise ValueError(
            "the request body contains NaN or infinity, which JSON cannot carry; expected "
            "finite numbers"
        ) from None


def _decode_error(response: httpx.Response, text: str) -> tuple[str, dict[str, Any]]:
    """Human message and Unavailable extras from a FastAPI-shaped ``{"detail": ...}`` body."""
    extras: dict[str, Any] = {"retry_after_s": None, "warming": False, "job_id": None}
    try:
        parsed = json.loads(text) if text else None
    except ValueError:
        parsed = None
    detail: Any = parsed.get("detail") if isinstance(parsed, dict) else None
    if not detail:
        detail = text.strip() or response.reason_phrase or "no detail"
    if isinstance(detail, dict):
        extras["warming"] = detail.get("status") == "warming_up"
        retry = detail.get("retry_after_s")
        if isinstance(retry, (int, float)) and not isinstance(retry, bool) and math.isfinite(retry):
            extras["retry_after_s"] = max(0.0, float(retry))
        job = detail.get("warming_job_id")
        extras["job_id"] = str(job) if job is not None else None
        message = detail.get("message") or detail.get("detail") or json.dumps(detail)
    elif isinstance(detail, str):
        message = detail
    else:
        message = json.dumps(detail)
    if extras["retry_after_s"] is None:
        extras["retry_after_s"] = parse_retry_after(response.headers.get("retry-after"))
    message = str(message)
    # A proxy's HTML error page can be kilobytes; the full text stays in ``body``.
    if len(message) > MAX_MESSAGE_CHARS:
        message = message[:MAX_MESSAGE_CHARS] + "..."
    return message, extras


def _typed_body(data: bytes) -> Optional[Mapping[str, Any]]:
    """The platform's typed error body (``code`` beside ``detail``), or None for another."""
    try:
        parsed = json.loads(data) if data else None
    except ValueError:
        return None
    if isinstance(parsed, dict) and isinstance(parsed.get("code"), str):
        return parsed
    return None


def _pin_refused(exc: BaseException) -> bool:
    """Whether the pinned check refused the peer's certificate somewhere under ``exc``."""
    seen: Optional[BaseException] = exc
    for _ in range(8):
        if seen is None:
            return False
        if isinstance(seen, CertificateRefused):
            return True
        seen = seen.__cause__ or seen.__context__
    return False


class Transport:
    """One ``httpx.Client`` (a pool of kept-alive connections) to the gateway; maps statuses to
    typed errors and counts the connections it opens (each one a TCP/TLS handshake).

    ``require_key=False`` is for the key-optional calls (catalogue, health): the
    ``Authorization`` header is then omitted, never sent empty.
    """

    def __init__(
        self,
        *,
        base_url: Optional[str] = None,
        api_key: Optional[str] = None,
        timeout_s: float = DEFAULT_TIMEOUT_S,
        verify: VerifyArg = True,
        allow_insecure: bool = False,
        require_key: bool = True,
        headers: Optional[Mapping[str, str]] = None,
    ) -> None:
        self._base_url = check_base_url(resolve_base_url(base_url), allow_insecure=allow_insecure)
        key = resolve_api_key(api_key)
        if key is not None:
            check_api_key(key)
        if require_key and key is None:
            raise AuthError(
                f"no API key: pass api_key= or set {API_KEY_ENV} "
                "(keys are issued at https://app.generalsequences.com)"
            )
        if (
            isinstance(timeout_s, bool)
            or not isinstance(timeout_s, (int, float))
            or not math.isfinite(timeout_s)
            or timeout_s <= 0
        ):
            raise ValueError(f"timeout_s is {timeout_s!r}; expected a positive number of seconds")
        self._timeout_s = float(timeout_s)
        # Kept only to scrub it from error text; never printed, never in repr.
        self._secret = key
        own = {"Content-Type": "application/json", "User-Agent": user_agent(),
               "Accept-Encoding": ACCEPT_ENCODING}
        if key is not None:
            own["Authorization"] = f"Bearer {key}"
        own.update(headers or {})
        self._client = httpx.Client(
            base_url=self._base_url,
            headers=own,
            timeout=httpx.Timeout(self._timeout_s),
            limits=httpx.Limits(
                max_keepalive_connections=KEEPALIVE_CONNECTIONS,
                keepalive_expiry=KEEPALIVE_EXPIRY_S,
            ),
            verify=_ssl_context(verify),
            follow_redirects=False,
        )
        # Set by close() from any thread; a call racing it fails as "closed" either way.
        self._closed = False
        # Written by whichever thread's request opened a connection, under _count_lock.
        # Lock order: a leaf (nothing is taken under it).
        self._count_lock = threading.Lock()
        self._connections_opened = 0
        self._watch = DeadlineWatch(self._socket_of)

    @property
    def base_url(self) -> str:
        return self._base_url

    @property
    def has_key(self) -> bool:
        return self._secret is not None

    @property
    def timeout_s(self) -> float:
        return self._timeout_s

    @property
    def closed(self) -> bool:
        return self._closed

    @property
    def connections_opened(self) -> int:
        """Connections opened so far (handshakes); a kept-alive connection counts once."""
        with self._count_lock:
            return self._connections_opened

    def _trace(self, event: str, info: Mapping[str, Any]) -> None:
        # httpcore's trace extension (0.14 and 1.x): one connect per new pooled connection.
        if event.endswith(("connect_tcp.complete", "connect_unix_socket.complete")):
            with self._count_lock:
                self._connections_opened += 1

    def __repr__(self) -> str:
        state = "closed" if self._closed else "open"
        key = "set" if self.has_key else "none"
        return f"Transport(base_url={self._base_url!r}, api_key={key}, {state})"

    def __enter__(self) -> Transport:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def close(self) -> None:
        """Close the connection pool; idempotent."""
        if not self._closed:
            self._closed = True
            try:
                self._client.close()
            except RuntimeError:
                # httpx < 0.25 (Ubuntu 22.04 ships 0.22) refuses to close a pool while a request
                # is in flight on another thread; abort() has already ended that request.
                pass

    def abort(self) -> None:
        """Close, first waking any thread blocked reading a response on this transport."""
        # Closing an httpx pool leaves a blocked read blocked; shutting its socket down ends it.
        for sock in self._pooled_sockets():
            try:
                sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                continue
        self.close()

    def _socket_of(self, extensions: Mapping[str, object]) -> Optional[socket.socket]:
        return socket_serving(self._client, extensions)

    def _pooled_sockets(self) -> list[socket.socket]:
        return pooled_sockets(self._client)

    def get(
        self,
        path: str,
        *,
        params: Optional[Mapping[str, Any]] = None,
        timeout: Optional[float] = None,
        exchange: Optional[Exchange] = None,
    ) -> Any:
        """``GET path``; returns the parsed JSON body or raises a ``SequencesError``."""
        return self._request("GET", path, params=params, timeout=timeout, exchange=exchange)

    def post(
        self,
        path: str,
        body: Any,
        *,
        timeout: Optional[float] = None,
        exchange: Optional[Exchange] = None,
    ) -> Any:
        """``POST path`` with a JSON body (an object, or bytes from ``encode_json``); returns the
        parsed JSON or raises. ``exchange.abort()`` ends the request early from any thread."""
        return self._request("POST", path, body=body, timeout=timeout, exchange=exchange)

    def send_bytes(
        self,
        method: str,
        path: str,
        content: bytes,
        *,
        content_type: str,
        headers: Mapping[str, str],
        timeout: Optional[float] = None,
        exchange: Optional[Exchange] = None,
    ) -> tuple[bytes, str]:
        """``method path`` with a body of ``content_type``; the 2xx body as bytes and its
        media type (a deployment's worker answers msgpack), or the typed error."""
        response, data = self._exchange(method, path, body=content, timeout=timeout,
                                        exchange=exchange,
                                        headers={"Content-Type": content_type, **headers})
        if not 200 <= response.status_code < 300:
            self._unwrap(method, path, response, data)
        return data, response.headers.get("content-type", "")

    def delete(self, path: str, *, timeout: Optional[float] = None) -> Any:
        return self._request("DELETE", path, timeout=timeout)

    def _scrub(self, text: str) -> str:
        return scrub_key(text, self._secret)

    def _request(
        self,
        method: str,
        path: str,
        *,
        params: Optional[Mapping[str, Any]] = None,
        body: Any = None,
        timeout: Optional[float] = None,
        exchange: Optional[Exchange] = None,
    ) -> Any:
        response, data = self._exchange(method, path, params=params, body=body, timeout=timeout,
                                        exchange=exchange)
        return self._unwrap(method, path, response, data)

    def _exchange(
        self,
        method: str,
        path: str,
        *,
        params: Optional[Mapping[str, Any]] = None,
        body: Any = None,
        timeout: Optional[float] = None,
        exchange: Optional[Exchange] = None,
        headers: Optional[Mapping[str, str]] = None,
    ) -> tuple[httpx.Response, bytes]:
        if self._closed:
            raise SequencesError(
                f"{method} {path}: this connection is closed; create a new client to reconnect"
            )
        applied = self._timeout_s if timeout is None else float(timeout)
        if not math.isfinite(applied) or applied <= 0:
            raise ValueError(f"timeout is {timeout!r}; expected a positive number of seconds")
        try:
            content = body if body is None or isinstance(body, bytes) else encode_json(body)
        except ValueError as exc:
            raise ValueError(f"{method} {path}: {exc}") from None
        # ``applied`` bounds the whole exchange: httpx's own timeouts bound each phase
        # (connect, send, every read), the watch shuts the socket down at the deadline
        # whatever the phase (headers a byte at a time, endless interim responses), and the
        # body is read against the deadline too.
        deadline = time.monotonic() + applied
        exchange = exchange if exchange is not None else Exchange()
        headers_in = False
        try:
            # httpx's params= would percent-encode the slashes of a model id.
            request = self._client.build_request(
                method, query_path(path, params), content=content, headers=headers,
                timeout=httpx.Timeout(applied),
            )
            request.extensions["trace"] = self._trace
            with self._watch.watching(exchange, deadline, request.extensions) as live:
                if not live:
                    raise SequencesError(f"{method} {path}: abandoned before it was sent")
                response = self._client.send(request, stream=True)
                headers_in = True
                try:
                    data = read_body(response, f"{method} {path}",
                                     f"{method} {self._base_url}{path}", deadline, applied)
                finally:
                    response.close()
        except (httpx.HTTPError, RuntimeError) as exc:
            ended = exchange.ended
            if ended == "deadline":
                ended = "reading the response body" if headers_in else "before the headers ended"
            self._raise_failure(method, path, applied, exc, ended)
        return response, data

    def _raise_failure(
        self, method: str, path: str, applied: float, exc: BaseException, ended: Optional[str]
    ) -> None:
        """The typed error for an exchange that failed in transit; ``ended`` says why the
        watch ended it: abandoned, or the phase its deadline passed in."""
        if ended == "abandoned":
            raise SequencesError(f"{method} {path}: abandoned when its run ended") from None
        if ended is not None or isinstance(exc, httpx.TimeoutException):
            phase = ended if ended is not None else _TIMEOUT_PHASES.get(type(exc), "in transit")
            raise Unavailable(
                f"{method} {self._base_url}{path} timed out after {applied:g}s ({phase})"
            ) from None
        if _pin_refused(exc):
            raise PinMismatch(
                f"{self._base_url} presented a certificate other than the pinned one "
                f"({method} {path}); the connection was refused"
            ) from None
        if isinstance(exc, httpx.HTTPError):
            detail = self._scrub(str(exc)) or type(exc).__name__
            raise Unavailable(
                f"could not reach {self._base_url} ({method} {path}): {detail}"
            ) from None
        # httpx raises RuntimeError when close() raced this call from another thread.
        if self._client.is_closed:
            raise SequencesError(
                f"{method} {path}: the connection was closed during the call"
            ) from None
        raise exc

    def _unwrap(self, method: str, path: str, response: httpx.Response, data: bytes) -> Any:
        status = response.status_code
        text = self._scrub(data.decode(response.encoding or "utf-8", errors="replace"))
        if 200 <= status < 300:
            if status == 204 or not data:
                return None
            try:
                return json.loads(data)
            except ValueError:
                raise InvalidResponse(
                    f"{method} {path} answered {status} with a body that is not JSON: "
                    f"{text[:120]!r}",
                    status=status,
                    body=text,
                ) from None
        typed = _typed_body(data)
        if typed is not None:
            raise refusal(f"{method} {path}", status, text, response.headers, typed)
        message, extras = _decode_error(response, text)
        message = self._scrub(message)
        body = text
        text = f"{method} {path} failed with {status}: {message}"
        if status == 401:
            raise AuthError(text, status=status, body=body)
        if status == 402:
            raise OutOfCredit(text, status=status, body=body)
        if status == 429:
            raise RateLimited(text, status=status, body=body,
                              retry_after_s=extras["retry_after_s"])
        if status in (503, 504):
            raise Unavailable(text, status=status, body=body, **extras)
        if 400 <= status < 500:
            raise InvalidRequest(text, status=status, body=body)
        if 300 <= status < 400:
            where = response.headers.get("location")
            text += f" (redirect to {where!r} not followed)" if where else ""
        raise SequencesError(text, status=status, body=body)
