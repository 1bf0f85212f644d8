"""A worker's TLS checked against the SHA-256 fingerprint connect handed out, not against a CA.

Workers present self-signed certificates; the pin is the whole trust decision, so a missing or
malformed fingerprint refuses the connection rather than falling back to CA trust. The check runs
at every handshake (``sslsocket_class``/``sslobject_class``), so each pooled connection is held to
it, whichever httpx version opens it.
"""

from __future__ import annotations

import hashlib
import ssl
from typing import Optional

__all__ = ["CertificateRefused", "normalize_fingerprint", "pinned_context", "fingerprint_of"]


class CertificateRefused(ssl.SSLCertVerificationError):
    """The worker's certificate is not the one pinned (or there is no pin)."""


def fingerprint_of(der: bytes) -> str:
    """The pin of a DER certificate: lowercase hex SHA-256."""
    return hashlib.sha256(der).hexdigest()


def normalize_fingerprint(value: object) -> str:
    """``value`` as 64 lowercase hex digits (colons and spaces, as openssl prints it, dropped)."""
    if not isinstance(value, str):
        raise CertificateRefused(f"cert_fingerprint is {value!r}; expected a SHA-256 hex digest")
    cleaned = value.strip().replace(":", "").replace(" ", "").lower()
    if len(cleaned) != 64 or any(c not in "0123456789abcdef" for c in cleaned):
        raise CertificateRefused(f"cert_fingerprint is {value!r}; expected 64 hex digits (SHA-256)")
    return cleaned


def _check(pin: Optional[str], der: Optional[bytes]) -> None:
    if pin is None or der is None or fingerprint_of(der) != pin:
        raise CertificateRefused("the worker's certificate does not match the pinned fingerprint")


class _PinnedSocket(ssl.SSLSocket):
    def do_handshake(self, block: bool = False) -> None:
        super().do_handshake(block)
        try:
            _check(getattr(self.context, "pin", None), self.getpeercert(binary_form=True))
        except CertificateRefused:
            self.close()
            raise


class _PinnedObject(ssl.SSLObject):
    def do_handshake(self) -> None:
        super().do_handshake()
        _check(getattr(self.context, "pin", None), self.getpeercert(binary_form=True))


class _PinnedContext(ssl.SSLContext):
    pin: Optional[str] = None
    sslsocket_class = _PinnedSocket
    sslobject_class = _PinnedObject


def pinned_context(fingerprint: object) -> ssl.SSLContext:
    """An SSLContext that accepts exactly the certificate whose SHA-256 is ``fingerprint``."""
    context = _PinnedContext(ssl.PROTOCOL_TLS_CLIENT)
    context.pin = normalize_fingerprint(fingerprint)
    # The pin replaces name and CA checks: workers are addressed by IP with self-signed certs.
    context.check_hostname = False
    context.verify_mode = ssl.CERT_NONE
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    return context
