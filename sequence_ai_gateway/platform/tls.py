"""The worker's self-signed certificate, made at start; clients pin its SHA-256 fingerprint."""

from __future__ import annotations

import datetime
import hashlib
import ipaddress
import os
from dataclasses import dataclass

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

# Long enough for any session; a worker's certificate dies with the worker anyway.
VALID_DAYS = 30


@dataclass(frozen=True)
class WorkerCertificate:
    cert_file: str
    key_file: str
    fingerprint: str  # lowercase hex SHA-256 of the DER certificate, as connect hands it out


def make_certificate(directory: str, host: str) -> WorkerCertificate:
    """A fresh key and a self-signed certificate for ``host`` written into ``directory``."""
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "sequence_ai local worker")])
    now = datetime.datetime.now(datetime.timezone.utc)
    names: list[x509.GeneralName] = [x509.DNSName("localhost")]
    try:
        names.append(x509.IPAddress(ipaddress.ip_address(host)))
    except ValueError:
        names.append(x509.DNSName(host))
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=VALID_DAYS))
        .add_extension(x509.SubjectAlternativeName(names), critical=False)
        .sign(key, hashes.SHA256())
    )
    os.makedirs(directory, exist_ok=True)
    cert_file = os.path.join(directory, "worker-cert.pem")
    key_file = os.path.join(directory, "worker-key.pem")
    with open(cert_file, "wb") as out:
        out.write(cert.public_bytes(serialization.Encoding.PEM))
    with open(key_file, "wb") as out:
        out.write(key.private_bytes(serialization.Encoding.PEM,
                                    serialization.PrivateFormat.PKCS8,
                                    serialization.NoEncryption()))
    der = cert.public_bytes(serialization.Encoding.DER)
    return WorkerCertificate(cert_file, key_file, hashlib.sha256(der).hexdigest())
