"""The gateway's TLS files: named ones are used as given; a self-signed pair is made, kept private and reused."""

from __future__ import annotations

import datetime
import ipaddress
import multiprocessing
import ssl
import stat
from pathlib import Path
from typing import Any

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import serialization

from ferrymq.infra import tls
from ferrymq.settings import Settings


def _mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def _names_in(cert_path: Path) -> set[str]:
    cert = x509.load_pem_x509_certificate(cert_path.read_bytes())
    sans = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    return {*sans.get_values_for_type(x509.DNSName), *map(str, sans.get_values_for_type(x509.IPAddress))}


def test_plain_http_unless_asked(tmp_path: Path) -> None:
    assert tls.tls_files(Settings(data_dir=tmp_path)) is None
    assert not (tmp_path / "tls").exists()


def test_named_files_are_used_as_given(tmp_path: Path) -> None:
    settings = Settings(data_dir=tmp_path, tls_cert_file=tmp_path / "c.pem", tls_key_file=tmp_path / "k.pem")
    assert tls.tls_files(settings) == (tmp_path / "c.pem", tmp_path / "k.pem")


def test_a_certificate_without_its_key_is_a_configuration_error(tmp_path: Path) -> None:
    with pytest.raises(tls.TlsConfigError, match="together"):
        tls.tls_files(Settings(data_dir=tmp_path, tls_cert_file=tmp_path / "c.pem"))


def test_tls_without_files_makes_a_private_self_signed_certificate(tmp_path: Path) -> None:
    # given FERRYMQ_TLS=1 and no certificate paths
    settings = Settings.from_env({"FERRYMQ_TLS": "1", "FERRYMQ_DATA_DIR": str(tmp_path),
                                  "FERRYMQ_HOST": "10.1.2.3"})
    # when the gateway asks for its files
    files = tls.tls_files(settings)
    # then a certificate and key are made in <data dir>/tls, owner-only
    assert files == (tmp_path / "tls" / "cert.pem", tmp_path / "tls" / "key.pem")
    cert, key = files
    assert _mode(tmp_path / "tls") == 0o700
    assert _mode(key) == 0o600 and _mode(cert) == 0o600
    # and the certificate names loopback and the listening address, and its key matches it
    assert {"localhost", "127.0.0.1", "::1", "10.1.2.3"} <= _names_in(cert)
    server = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    server.load_cert_chain(cert, key)


def test_the_self_signed_certificate_is_reused_while_current(tmp_path: Path) -> None:
    first = tls.ensure_self_signed(tmp_path, ["localhost", "127.0.0.1"])
    before = first[0].read_bytes(), first[1].read_bytes()
    again = tls.ensure_self_signed(tmp_path, ["localhost", "127.0.0.1"])
    assert (again[0].read_bytes(), again[1].read_bytes()) == before


def test_a_certificate_near_expiry_or_for_other_names_is_replaced(tmp_path: Path) -> None:
    # given a certificate made a year minus a week ago
    long_ago = datetime.datetime.now(datetime.UTC) - datetime.timedelta(days=tls.VALID_DAYS - 7)
    cert, _ = tls.ensure_self_signed(tmp_path, ["localhost"], now=long_ago)
    old = cert.read_bytes()
    # when the gateway starts now, then it gets a new one
    tls.ensure_self_signed(tmp_path, ["localhost"])
    renewed = cert.read_bytes()
    assert renewed != old
    # and when it listens on an address the certificate does not name, again
    tls.ensure_self_signed(tmp_path, ["localhost", "192.0.2.7"])
    assert cert.read_bytes() != renewed
    assert str(ipaddress.ip_address("192.0.2.7")) in _names_in(cert)


def test_a_key_that_does_not_match_the_certificate_is_replaced(tmp_path: Path) -> None:
    cert, key = tls.ensure_self_signed(tmp_path / "a", ["localhost"])
    _, other_key = tls.ensure_self_signed(tmp_path / "b", ["localhost"])
    key.write_bytes(other_key.read_bytes())
    tls.ensure_self_signed(tmp_path / "a", ["localhost"])
    server = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    server.load_cert_chain(cert, key)


def _ensure(directory: str, together: Any, out: Any) -> None:
    together.wait()
    cert, key = tls.ensure_self_signed(Path(directory), ["localhost", "127.0.0.1"])
    out.put((cert.read_bytes(), key.read_bytes()))


def test_processes_starting_together_all_serve_the_one_pair_made(tmp_path: Path) -> None:
    # given no certificate yet, when four processes (a port's gateways) ask for one at the same moment
    context = multiprocessing.get_context("spawn")
    together, out = context.Barrier(4), context.Queue()
    processes = [context.Process(target=_ensure, args=(str(tmp_path / "tls"), together, out)) for _ in range(4)]
    for process in processes:
        process.start()
    pairs = [out.get(timeout=60) for _ in processes]
    for process in processes:
        process.join(60)
    # then each got the same certificate and key, a matching pair, which is what the directory holds
    assert len(set(pairs)) == 1
    cert, key = pairs[0]
    assert x509.load_pem_x509_certificate(cert).public_key() == \
        serialization.load_pem_private_key(key, password=None).public_key()
    assert ((tmp_path / "tls" / tls.CERT_NAME).read_bytes(), (tmp_path / "tls" / tls.KEY_NAME).read_bytes()) == pairs[0]
