"""``Connection``: where the service is and how to reach it, one frozen value.

Every entry point (``connect``, ``models``, ``chat``, ``train`` and the other training calls)
takes ``connection=``; the same settings as keywords (``api_key=``, ``base_url=``, ...) stay
accepted by each, and become a ``Connection`` here.
"""

from __future__ import annotations

import difflib
from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from typing import Optional, Union

from .transport import DEFAULT_TIMEOUT_S, Transport, VerifyArg

__all__ = ["PROTOCOLS", "Connection", "ConnectionSetting", "connection_of"]

# "shared-model": POST /v1/act to a catalogue model (the default). "deployment": a deployment of
# the account over the platform's protocol (connect, a pinned worker, msgpack; docs/client.md).
PROTOCOLS = ("shared-model", "deployment")

# What one connection keyword may hold (the field types of Connection).
ConnectionSetting = Union[None, str, bool, float, VerifyArg]


@dataclass(frozen=True)
class Connection:
    """Key, base URL, whole-request timeout and TLS settings of the calls made with it.

    ``api_key``/``base_url`` None: ``$SEQUENCES_API_KEY``/``$SEQUENCES_BASE_URL``, else
    production. Checked when a call opens its transport; the key never appears in a repr.
    """

    api_key: Optional[str] = field(default=None, repr=False)
    base_url: Optional[str] = None
    timeout_s: float = DEFAULT_TIMEOUT_S
    verify: VerifyArg = True
    allow_insecure: bool = False
    # Chosen explicitly, never guessed from a failure.
    protocol: str = "shared-model"

    def __post_init__(self) -> None:
        for name in ("api_key", "base_url"):
            value = getattr(self, name)
            if value is not None and not isinstance(value, str):
                raise TypeError(f"{name} is {value!r}; expected a string or None")
        if not isinstance(self.allow_insecure, bool):
            raise TypeError(f"allow_insecure is {self.allow_insecure!r}; expected True or False")
        if self.protocol not in PROTOCOLS:
            raise ValueError(f"protocol is {self.protocol!r}; expected one of {PROTOCOLS}")

    def transport(self, *, keyed: bool = True) -> Transport:
        """A new transport with these settings (``keyed=False``: the key is optional)."""
        return Transport(
            base_url=self.base_url,
            api_key=self.api_key,
            timeout_s=self.timeout_s,
            verify=self.verify,
            allow_insecure=self.allow_insecure,
            require_key=keyed,
        )

    def __repr__(self) -> str:
        key = "set" if self.api_key else "none"
        return (
            f"Connection(base_url={self.base_url!r}, api_key={key}, timeout_s={self.timeout_s!r}, "
            f"allow_insecure={self.allow_insecure!r}, protocol={self.protocol!r})"
        )


SETTINGS = tuple(item.name for item in fields(Connection))


def connection_of(
    connection: Optional[Connection], settings: Mapping[str, ConnectionSetting], method: str
) -> Connection:
    """The ``Connection`` of one call: ``connection=`` or the keywords of its fields, not both.

    A keyword that is not a connection setting is the caller's typo: a TypeError naming the
    setting it resembles.
    """
    for key in settings:
        if key not in SETTINGS:
            close = difflib.get_close_matches(key, SETTINGS, n=1, cutoff=0.6)
            hint = f"; did you mean {close[0]!r}?" if close else ""
            raise TypeError(f"{method}() got an unexpected keyword argument {key!r}{hint}")
    if connection is None:
        return Connection(**settings)  # type: ignore[arg-type]  # each key checked above
    if not isinstance(connection, Connection):
        raise TypeError(f"connection is {connection!r}; expected a sequence_ai.Connection")
    if settings:
        raise TypeError(
            f"{method}() got connection= and {', '.join(sorted(settings))}=; pass the settings "
            "in the Connection (dataclasses.replace(connection, ...) changes one)"
        )
    return connection
