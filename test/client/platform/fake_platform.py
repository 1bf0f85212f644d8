"""A small stand-in for the platform (a control plane over HTTP and a worker over pinned HTTPS)
for the client's protocol tests; the gateway's own platform is exercised end to end elsewhere."""

from __future__ import annotations

import http.server
import json
import ssl
import threading
from dataclasses import dataclass, field
from typing import Dict, Iterator, List, Optional, Tuple

from sequence_ai._platform import codec
from sequence_ai._transport.pinned_tls import fingerprint_of

ACTIONS = [[0.1 * c for c in range(8)] for _ in range(15)]


@dataclass
class Platform:
    """What the fake serves and saw. ``refusals`` are answered (status, body) in order, one a
    request, before anything else, for paths they name."""

    control_url: str = ""
    worker_url: str = ""
    fingerprint: str = ""
    secret: str = "direct-1"
    epoch: int = 1
    refusals: Dict[str, List[Tuple[int, Dict[str, object]]]] = field(default_factory=dict)
    seen: List[Tuple[str, Dict[str, str], object]] = field(default_factory=list)
    connects: int = 0

    def refuse(self, path: str, status: int, code: str, **extra: object) -> None:
        body: Dict[str, object] = {"detail": f"{code} here", "code": code,
                                   "request_id": "rq-fake", **extra}
        self.refusals.setdefault(path, []).append((status, body))

    def connect_body(self) -> Dict[str, object]:
        return {"worker_url": self.worker_url, "direct_secret": self.secret,
                "cert_fingerprint": self.fingerprint,
                "lease": {"epoch": self.epoch, "ttl_s": 60, "expires_at": "2099-01-01T00:00:00Z"},
                "hz": 15.0, "action_chunk_valid_len": 15, "action_chunk_replan_at": 8,
                "request_timeout_s": 10.0, "keepalive": {"every_s": 5.0, "seat_ttl_s": 30.0},
                "params": {}}


def _handler(platform: Platform) -> type:
    class Handler(http.server.BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, format: str, *args: object) -> None:  # noqa: A002
            pass

        def _send(self, status: int, body: object, media: str = "application/json") -> None:
            data = codec.pack(body) if media == codec.MEDIA_TYPE else json.dumps(body).encode()
            self.send_response(status)
            self.send_header("Content-Type", media)
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def _read(self) -> object:
            raw = self.rfile.read(int(self.headers.get("Content-Length", "0")))
            if self.headers.get("Content-Type", "").startswith(codec.MEDIA_TYPE):
                return codec.unpack(raw)
            return json.loads(raw) if raw else None

        def _serve(self, method: str) -> None:
            path = self.path.split("?")[0]
            body = self._read() if method == "POST" else None
            platform.seen.append((path, dict(self.headers), body))
            queued = platform.refusals.get(path)
            if queued:
                status, refusal = queued.pop(0)
                self._send(status, refusal)
                return
            if path == "/v1/act/connect":
                platform.connects += 1
                self._send(200, platform.connect_body())
            elif path == "/v1/act/ready":
                self._send(200, {"ready": True, "eta_s": 0.0})
            elif path in ("/v1/act/keepalive", "/v1/act/release") or "/label" in path:
                self._send(200, {"held": True})
            elif self.headers.get("Authorization") != f"Bearer {platform.secret}":
                self._send(401, {"detail": "stale secret", "code": "unauthenticated"})
            elif path == "/observe":
                self._send(200, {"through": 0}, codec.MEDIA_TYPE)
            elif path == "/act":
                self._send(200, {"outputs": {"actions": ACTIONS}, "perf": {}, "warnings": []},
                           codec.MEDIA_TYPE)
            elif path == "/act/episode_end":
                self._send(200, {"ended": True}, codec.MEDIA_TYPE)
            elif path == "/ping":
                self._send(200, {"ok": True})
            else:
                self._send(404, {"detail": f"no {path}", "code": "not_found"})

        def do_GET(self) -> None:  # noqa: N802 (http.server's name)
            self._serve("GET")

        def do_POST(self) -> None:  # noqa: N802
            self._serve("POST")

    return Handler


def serve(tls: Optional[Tuple[ssl.SSLContext, bytes]] = None) -> Iterator[Platform]:
    """Serve a fresh Platform: control plane on HTTP, worker on HTTPS when ``tls`` is given
    (the server context and the DER of its certificate)."""
    platform = Platform()
    servers = []
    for secure in (False, True):
        server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _handler(platform))
        if secure and tls is not None:
            server.socket = tls[0].wrap_socket(server.socket, server_side=True)
        servers.append(server)
        threading.Thread(target=server.serve_forever, args=(0.02,), daemon=True).start()
    platform.control_url = f"http://127.0.0.1:{servers[0].server_address[1]}"
    scheme = "https" if tls is not None else "http"
    platform.worker_url = f"{scheme}://127.0.0.1:{servers[1].server_address[1]}"
    platform.fingerprint = fingerprint_of(tls[1]) if tls is not None else "0" * 64
    try:
        yield platform
    finally:
        for server in servers:
            server.shutdown()
            server.server_close()
