"""Snapshot files: written atomically, and private keys survive pickling."""

from __future__ import annotations

from pathlib import Path

from cryptography.hazmat.primitives.asymmetric import ec, padding, rsa
from cryptography.hazmat.primitives.hashes import SHA256

from ferrymq.infra.standin import snapshot
from ferrymq.private_files import write_private


def test_private_keys_survive_a_snapshot_round_trip(tmp_path: Path) -> None:
    # given backends holding an RSA and an EC private key, as moto's KMS keys do
    rsa_key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    ec_key = ec.generate_private_key(ec.SECP256R1())
    state = snapshot.Snapshot(
        seq=7,
        backends={"kms": {"123456789012": {"us-east-1": {"rsa": rsa_key, "ec": ec_key}}}},
        s3_bucket_accounts={"bucket": ("aws", "123456789012")},
    )
    # when written and read back
    path = tmp_path / "snapshot.pickle"
    write_private(path, snapshot.dumps(state))
    loaded = snapshot.read(path)
    # then the keys still sign what the original public keys verify
    assert loaded is not None
    assert loaded.seq == 7
    assert loaded.s3_bucket_accounts == {"bucket": ("aws", "123456789012")}
    keys = loaded.backends["kms"]["123456789012"]["us-east-1"]
    signature = keys["rsa"].sign(b"msg", padding.PKCS1v15(), SHA256())
    rsa_key.public_key().verify(signature, b"msg", padding.PKCS1v15(), SHA256())
    ec_signature = keys["ec"].sign(b"msg", ec.ECDSA(SHA256()))
    ec_key.public_key().verify(ec_signature, b"msg", ec.ECDSA(SHA256()))


def test_atomic_write_replaces_the_file_and_leaves_no_temp_file(tmp_path: Path) -> None:
    path = tmp_path / "snapshot.pickle"
    write_private(path, b"old")
    write_private(path, b"new")
    assert path.read_bytes() == b"new"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["snapshot.pickle"]


def test_no_snapshot_reads_as_none(tmp_path: Path) -> None:
    assert snapshot.read(tmp_path / "missing.pickle") is None
