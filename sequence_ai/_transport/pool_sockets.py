"""The sockets under an ``httpx.Client``'s pool, for ending a blocked exchange by shutting
its socket down (closing an httpx pool leaves a blocked read blocked).

Neither httpx nor httpcore offers them, so this reads their pool's internals
(``_transport._pool.connections[i]._connection._network_stream`` and the pool's queue of
requests, ``_pool._requests[i].request/.connection``, the same in httpcore 0.14 and 1.x); a
test checks the paths still exist, so an httpx/httpcore upgrade that moves them fails there.
"""

from __future__ import annotations

import socket
from collections.abc import Mapping
from typing import Optional

import httpx

__all__ = ["pooled_sockets", "socket_serving"]


def _pool(client: httpx.Client) -> object:
    return getattr(getattr(client, "_transport", None), "_pool", None)


def _socket_of(connection: object) -> Optional[socket.socket]:
    stream = getattr(getattr(connection, "_connection", None), "_network_stream", None)
    get_extra_info = getattr(stream, "get_extra_info", None)
    sock = get_extra_info("socket") if get_extra_info is not None else None
    return sock if isinstance(sock, socket.socket) else None


def pooled_sockets(client: httpx.Client) -> list[socket.socket]:
    """The sockets of the pool's open connections."""
    found = (_socket_of(c) for c in list(getattr(_pool(client), "connections", None) or []))
    return [sock for sock in found if sock is not None]


def socket_serving(
    client: httpx.Client, extensions: Mapping[str, object]
) -> Optional[socket.socket]:
    """The socket of the connection serving the request whose ``extensions`` these are (httpx
    hands its request's extensions dict on to httpcore's request as is)."""
    for queued in list(getattr(_pool(client), "_requests", None) or []):
        if getattr(getattr(queued, "request", None), "extensions", None) is extensions:
            return _socket_of(getattr(queued, "connection", None))
    return None
