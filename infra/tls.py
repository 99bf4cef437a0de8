"""HTTPS for the local gateway: the certificate and key named in settings, or a self-signed pair for local use.

With ``FERRYMQ_TLS_CERT_FILE`` and ``FERRYMQ_TLS_KEY_FILE`` the gateway serves those.  With ``FERRYMQ_TLS=1``
and no paths it serves a self-signed certificate kept in ``<data dir>/tls/`` (directory 0700, both files
0600), made on first use and again when it nears expiry or no longer names the host the gateway listens on.
Clients trust it by pointing at the certificate, e.g. boto3's ``verify=<data dir>/tls/cert.pem`` or the AWS
CLI's ``--ca-bundle``.
"""

from __future__ import annotations

import datetime
import fcntl
import ipaddress
import os
import socket
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from ferrymq.private_files import private_dir, write_private
from ferrymq.settings import Settings

CERT_NAME = "cert.pem"
KEY_NAME = "key.pem"
LOCK_NAME = ".lock"
VALID_DAYS = 365
# A certificate this close to expiry is replaced at start-up rather than left to lapse while serving.
RENEW_DAYS = 30
_WILDCARDS = ("0.0.0.0", "::", "")


class TlsConfigError(ValueError):
    """The TLS settings are inconsistent (one of certificate and key without the other)."""


def self_signed_dir(settings: Settings) -> Path:
    return settings.data_dir / "tls"


def tls_files(settings: Settings) -> tuple[Path, Path] | None:
    """(certificate, key) the gateway should serve, or None for plain HTTP."""
    cert, key = settings.tls_cert_file, settings.tls_key_file
    if cert is not None or key is not None:
        if cert is None or key is None:
            raise TlsConfigError("FERRYMQ_TLS_CERT_FILE and FERRYMQ_TLS_KEY_FILE must be given together")
        return cert, key
    if settings.tls:
        return ensure_self_signed(self_signed_dir(settings), local_names(settings.host))
    return None


def local_names(host: str) -> list[str]:
    """The names a local client may reach the gateway by: loopback, this machine's name, the listening host."""
    names = ["localhost", "127.0.0.1", "::1", socket.gethostname()]
    if host not in _WILDCARDS and host not in names:
        names.append(host)
    return names


def ensure_self_signed(directory: Path, names: list[str], *, now: datetime.datetime | None = None) -> tuple[Path, Path]:
    """A self-signed certificate for ``names`` in ``directory``, reused while it is current.

    Looked at and made under an exclusive lock on the directory: several gateway processes of one port start at
    once, and each must serve the one pair the others serve (and that clients are told to trust), never a key
    written by one beside a certificate written by another."""
    now = now or datetime.datetime.now(datetime.UTC)
    cert_path, key_path = directory / CERT_NAME, directory / KEY_NAME
    private_dir(directory)
    lock = os.open(directory / LOCK_NAME, os.O_WRONLY | os.O_CREAT, 0o600)
    try:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if _still_good(cert_path, key_path, names, now):
            return cert_path, key_path
        key = ec.generate_private_key(ec.SECP256R1())
        cert = _certificate(key, names, now)
        write_private(key_path, key.private_bytes(
            serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
        ))
        write_private(cert_path, cert.public_bytes(serialization.Encoding.PEM))
        return cert_path, key_path
    finally:
        os.close(lock)


def _certificate(key: ec.EllipticCurvePrivateKey, names: list[str], now: datetime.datetime) -> x509.Certificate:
    subject = x509.Name([
        x509.NameAttribute(NameOID.ORGANIZATION_NAME, "FerryMQ local stack"),
        x509.NameAttribute(NameOID.COMMON_NAME, names[0]),
    ])
    alt_names: list[x509.GeneralName] = []
    for name in names:
        try:
            alt_names.append(x509.IPAddress(ipaddress.ip_address(name)))
        except ValueError:
            alt_names.append(x509.DNSName(name))
    public = key.public_key()
    return (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(subject)
        .public_key(public)
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=VALID_DAYS))
        .add_extension(x509.SubjectAlternativeName(alt_names), critical=False)
        # Its own trust anchor: clients are pointed at this very certificate.
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .add_extension(
            x509.KeyUsage(
                digital_signature=True, content_commitment=False, key_encipherment=False, data_encipherment=False,
                key_agreement=False, key_cert_sign=True, crl_sign=False, encipher_only=False, decipher_only=False,
            ),
            critical=True,
        )
        .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(public), critical=False)
        .add_extension(x509.AuthorityKeyIdentifier.from_issuer_public_key(public), critical=False)
        .sign(key, hashes.SHA256())
    )


def _still_good(cert_path: Path, key_path: Path, names: list[str], now: datetime.datetime) -> bool:
    try:
        cert = x509.load_pem_x509_certificate(cert_path.read_bytes())
        key = serialization.load_pem_private_key(key_path.read_bytes(), password=None)
    except (OSError, ValueError):
        return False
    if cert.public_key() != key.public_key():
        return False
    if cert.not_valid_after_utc - now < datetime.timedelta(days=RENEW_DAYS):
        return False
    try:
        sans = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    except x509.ExtensionNotFound:
        return False
    covered = {str(n) for n in sans.get_values_for_type(x509.DNSName)}
    covered |= {str(n) for n in sans.get_values_for_type(x509.IPAddress)}
    return all(_normalised(name) in covered for name in names)


def _normalised(name: str) -> str:
    try:
        return str(ipaddress.ip_address(name))
    except ValueError:
        return name

