"""The worker's certificate is accepted by its pinned SHA-256 and by nothing else."""

from __future__ import annotations

import http.server
import ssl
import threading
from typing import Iterator, Tuple

import httpx
import pytest

from sequence_ai._transport.pinned_tls import (
    CertificateRefused,
    fingerprint_of,
    normalize_fingerprint,
    pinned_context,
)

trustme = pytest.importorskip("trustme")


class _Hello(http.server.BaseHTTPRequestHandler):
    def do_GET(self) -> None:  # noqa: N802 (http.server's name)
        self.send_response(200)
        self.send_header("Content-Length", "2")
        self.end_headers()
        self.wfile.write(b"ok")

    def log_message(self, format: str, *args: object) -> None:  # noqa: A002
        pass


@pytest.fixture(scope="module")
def worker() -> Iterator[Tuple[str, str]]:
    """An HTTPS server with a self-signed certificate, and that certificate's pin."""
    ca = trustme.CA()
    cert = ca.issue_cert("127.0.0.1")
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    cert.configure_cert(context)
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Hello)
    server.socket = context.wrap_socket(server.socket, server_side=True)
    thread = threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True)
    thread.start()
    der = ssl.PEM_cert_to_DER_cert(cert.cert_chain_pems[0].bytes().decode())
    try:
        yield f"https://127.0.0.1:{server.server_address[1]}", fingerprint_of(der)
    finally:
        server.shutdown()
        server.server_close()


def test_pinned_certificate_is_accepted(worker: Tuple[str, str]) -> None:
    url, pin = worker
    colons = ":".join(pin[i:i + 2] for i in range(0, 64, 2)).upper()
    with httpx.Client(verify=pinned_context(colons)) as client:
        assert client.get(url + "/ping").text == "ok"


def test_other_certificate_is_refused(worker: Tuple[str, str]) -> None:
    url, pin = worker
    other = ("0" if pin[0] != "0" else "1") + pin[1:]
    with httpx.Client(verify=pinned_context(other)) as client:
        with pytest.raises(httpx.ConnectError) as caught:
            client.get(url + "/ping")
    chain = []
    exc: BaseException | None = caught.value
    while exc is not None:
        chain.append(exc)
        exc = exc.__cause__ or exc.__context__
    assert any(isinstance(e, CertificateRefused) for e in chain)


@pytest.mark.parametrize("bad", [None, "", "abc", "g" * 64, 123])
def test_malformed_pin_is_refused_before_any_socket(bad: object) -> None:
    with pytest.raises(CertificateRefused, match="cert_fingerprint"):
        normalize_fingerprint(bad)
