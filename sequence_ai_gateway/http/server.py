"""Running the app under uvicorn: socket binding, TLS, connection counting, stop/kill/restart."""

from __future__ import annotations

import asyncio
import ipaddress
import logging
import os
import shutil
import socket
import tempfile
import threading
from dataclasses import dataclass
from typing import Any, List, Optional

import uvicorn
from uvicorn.protocols.http.h11_impl import H11Protocol

from sequence_ai_gateway.http.app import create_app
from sequence_ai_gateway.http.responses import InjectedReset
from sequence_ai_gateway.service.state import Gateway

# Requests still running when a stop is asked get this long before they are cancelled.
GRACEFUL_STOP_S = 2


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


@dataclass(frozen=True)
class TlsFiles:
    directory: str
    ca_bundle: str
    cert_chain: str
    private_key: str


def make_tls_files(host: str, directory: Optional[str] = None) -> TlsFiles:
    """A throw-away CA and a server certificate for ``host`` (plus the loopback names).

    Files already in ``directory`` are reused, so a restarted gateway keeps its CA bundle.
    """
    import trustme

    directory = directory or tempfile.mkdtemp(prefix="sequence-ai-gateway-tls-")
    os.makedirs(directory, exist_ok=True)
    files = TlsFiles(
        directory=directory,
        ca_bundle=os.path.join(directory, "ca.pem"),
        cert_chain=os.path.join(directory, "server-chain.pem"),
        private_key=os.path.join(directory, "server-key.pem"),
    )
    if all(os.path.exists(p) for p in (files.ca_bundle, files.cert_chain, files.private_key)):
        return files
    ca = trustme.CA(organization_name="sequence_ai local gateway")
    names = sorted({host, "127.0.0.1", "localhost", "::1"})
    leaf = ca.issue_cert(*names)
    ca.cert_pem.write_to_path(files.ca_bundle)
    leaf.private_key_pem.write_to_path(files.private_key)
    with open(files.cert_chain, "wb") as out:
        for blob in leaf.cert_chain_pems:
            out.write(blob.bytes())
    return files


class _QuietInjectedReset(logging.Filter):
    """The ``reset`` fault raises on purpose; its traceback is noise in the server log."""

    def filter(self, record: logging.LogRecord) -> bool:
        exc = record.exc_info[1] if record.exc_info else None
        return not isinstance(exc, InjectedReset)


class _Server(uvicorn.Server):
    """Releases stalled requests as soon as a signal asks the server to exit."""

    def __init__(self, config: uvicorn.Config, gateway: Gateway) -> None:
        super().__init__(config)
        self._gateway = gateway

    def handle_exit(self, sig: int, frame: Any) -> None:
        self._gateway.stop()
        if self.should_exit:
            # A terminal's Ctrl-C, then launch's forwarded SIGINT and its SIGTERM: uvicorn would
            # force the exit on the second, cancelling requests mid-response (an ASGI traceback).
            # The shutdown under way is bounded: stalled requests were just released.
            return
        super().handle_exit(sig, frame)


def _peer(transport: Any) -> Any:
    peer = transport.get_extra_info("peername")
    return tuple(peer[:2]) if peer else None


def _counting_protocol(gateway: Gateway) -> type:
    class CountingH11Protocol(H11Protocol):
        def connection_made(self, transport: Any) -> None:  # type: ignore[override]
            gateway.connection_opened(_peer(transport))
            # The raw-socket faults write to this connection's transport directly.
            gateway.faults.links.opened(_peer(transport), transport)
            super().connection_made(transport)

        def connection_lost(self, exc: Optional[Exception]) -> None:
            gateway.connection_closed(_peer(self.transport))
            gateway.faults.links.closed(_peer(self.transport))
            super().connection_lost(exc)

    return CountingH11Protocol


def bind_socket(host: str, port: int) -> socket.socket:
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    # proto=IPPROTO_TCP: asyncio sets TCP_NODELAY only on sockets that say they are TCP, and
    # without it each response after a connection's first waits ~40 ms for a delayed ACK.
    sock = socket.socket(family, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    # Reusing the address lets restart() bind the same port while old connections linger.
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host, port))
        sock.listen(128)
    except OSError:
        sock.close()
        raise
    sock.set_inheritable(True)
    return sock


class GatewayServer:
    """One gateway served over HTTP(S) on one port; ``start`` runs it in a background thread."""

    def __init__(
        self,
        gateway: Gateway,
        *,
        host: str = "127.0.0.1",
        port: int = 0,
        tls: bool = False,
        tls_dir: Optional[str] = None,
        log_level: str = "warning",
    ) -> None:
        self.gateway = gateway
        self.host = host
        self.log_level = log_level
        self.tls: Optional[TlsFiles] = make_tls_files(host, tls_dir) if tls else None
        self._own_tls_dir = tls and tls_dir is None
        self.app = create_app(gateway)
        try:
            self._sock: Optional[socket.socket] = bind_socket(host, port)
        except OSError:
            self._sock = None
            self.cleanup()
            raise
        self.port: int = self._sock.getsockname()[1]
        self._server: Optional[_Server] = None
        self._thread: Optional[threading.Thread] = None
        self._loop: Optional[asyncio.AbstractEventLoop] = None
        self._failure: List[BaseException] = []
        error_log = logging.getLogger("uvicorn.error")
        if not any(isinstance(f, _QuietInjectedReset) for f in error_log.filters):
            error_log.addFilter(_QuietInjectedReset())

    @property
    def url(self) -> str:
        scheme = "https" if self.tls else "http"
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"{scheme}://{host}:{self.port}"

    @property
    def ca_bundle(self) -> Optional[str]:
        return self.tls.ca_bundle if self.tls else None

    def _config(self) -> uvicorn.Config:
        return uvicorn.Config(
            self.app,
            http=_counting_protocol(self.gateway),
            ws="none",
            lifespan="off",
            log_level=self.log_level,
            timeout_graceful_shutdown=GRACEFUL_STOP_S,
            ssl_certfile=self.tls.cert_chain if self.tls else None,
            ssl_keyfile=self.tls.private_key if self.tls else None,
        )

    def _socket(self) -> socket.socket:
        if self._sock is None:
            self._sock = bind_socket(self.host, self.port)
        return self._sock

    def serve_forever(self) -> None:
        """Serve in the calling (main) thread until SIGINT/SIGTERM."""
        server = _Server(self._config(), self.gateway)
        self._server = server
        try:
            server.run(sockets=[self._socket()])
        finally:
            self._sock = None
            self.cleanup()

    def start(self, timeout_s: float = 30.0) -> None:
        """Serve in a background thread; returns once the server accepts connections."""
        server = _Server(self._config(), self.gateway)
        sock = self._socket()
        self._server = server
        self._failure = []
        self.gateway.stopping = False

        def run() -> None:
            loop = asyncio.new_event_loop()
            self._loop = loop
            try:
                loop.run_until_complete(server.serve(sockets=[sock]))
            except BaseException as exc:  # reported by start(); the thread must not die silently
                self._failure.append(exc)
            finally:
                _cancel_leftovers(loop)
                loop.run_until_complete(loop.shutdown_asyncgens())
                loop.run_until_complete(loop.shutdown_default_executor())
                loop.close()

        self._thread = threading.Thread(target=run, name=f"gateway:{self.port}", daemon=True)
        self._thread.start()
        done = threading.Event()
        while not done.wait(0.01):
            if server.started:
                break
            if not self._thread.is_alive():
                raise RuntimeError(f"gateway on port {self.port} failed to start: {self._failure}")
            timeout_s -= 0.01
            if timeout_s <= 0:
                raise RuntimeError(f"gateway on port {self.port} did not start in time")

    def _join(self) -> None:
        if self._thread is not None:
            self._thread.join(timeout=GRACEFUL_STOP_S + 10)
            self._thread = None
        self._sock = None  # uvicorn closed it during shutdown

    def stop(self) -> None:
        """Stop serving: release stalled requests, give running ones a moment, then cancel."""
        self.gateway.stop()
        if self._server is not None:
            self._server.should_exit = True
        self._join()

    def kill(self) -> None:
        """Stop abruptly: every open connection is dropped without a response."""
        server, loop = self._server, self._loop
        if server is None or loop is None or loop.is_closed():
            self.gateway.stop()
            self._join()
            return

        def abort() -> None:
            for connection in list(server.server_state.connections):
                transport = getattr(connection, "transport", None)
                if transport is not None:
                    transport.abort()
            # Released only now: a stalled request must not answer before its connection drops.
            self.gateway.stop()
            server.force_exit = True
            server.should_exit = True

        try:
            loop.call_soon_threadsafe(abort)
        except RuntimeError:  # the loop closed meanwhile: nothing left to abort
            self.gateway.stop()
        self._join()

    def restart(self) -> None:
        """Serve again on the same port after ``kill``/``stop``, as a freshly started process."""
        self.gateway.reset_after_restart()
        self.start()

    def cleanup(self) -> None:
        if self.tls is not None and self._own_tls_dir:
            shutil.rmtree(self.tls.directory, ignore_errors=True)
        if self._sock is not None:
            self._sock.close()
            self._sock = None


def _cancel_leftovers(loop: asyncio.AbstractEventLoop) -> None:
    # Model workers and held requests outlive uvicorn's shutdown; cancel them with the loop.
    pending = [t for t in asyncio.all_tasks(loop) if not t.done()]
    for task in pending:
        task.cancel()
    if pending:
        loop.run_until_complete(asyncio.gather(*pending, return_exceptions=True))
