"""Snapshots of moto's in-memory backends for the services FerryMQ keeps durable.

A snapshot is one pickle holding, per service, ``{account: {region: backend}}`` plus S3's global bucket
registry and the sequence number of the last journal record it contains. moto's models pickle as they are
except for two kinds of object, reduced here:

- ``cryptography`` private keys (KMS keeps one per key): to PKCS#8 DER, loaded back on unpickling;
- S3's versioned key store, a dict whose ``items()`` shows only each key's latest version (pickle's
  default for dict subclasses would drop the older versions): to its raw ``{key: [versions]}``.

Writing is atomic: temp file, fsync, rename, fsync of the directory.
"""

from __future__ import annotations

import io
import pickle
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec, rsa

DURABLE_SERVICES = ("dynamodb", "s3", "kms")
SNAPSHOT_FORMAT = 1

_PRIVATE_KEY_TYPES = (rsa.RSAPrivateKey, ec.EllipticCurvePrivateKey)


def load_private_key(der: bytes) -> Any:
    return serialization.load_der_private_key(der, password=None)


def _versioned_key_store_type() -> type:
    from moto.s3.utils import _VersionedKeyStore

    return _VersionedKeyStore


def load_versioned_key_store(versions: dict[str, list[Any]]) -> Any:
    store = _versioned_key_store_type()()
    for key, key_versions in versions.items():
        dict.__setitem__(store, key, key_versions)
    return store


class _BackendPickler(pickle.Pickler):
    def __init__(self, file: Any, protocol: int) -> None:
        super().__init__(file, protocol)
        self._versioned_key_store = _versioned_key_store_type()

    def reducer_override(self, obj: Any) -> Any:
        if type(obj) is self._versioned_key_store:
            return load_versioned_key_store, (dict(dict.items(obj)),)
        if isinstance(obj, _PRIVATE_KEY_TYPES):
            der = obj.private_bytes(
                serialization.Encoding.DER,
                serialization.PrivateFormat.PKCS8,
                serialization.NoEncryption(),
            )
            return load_private_key, (der,)
        return NotImplemented


@dataclass(frozen=True, slots=True)
class Snapshot:
    """State of the durable services as of journal record ``seq``."""

    seq: int
    backends: dict[str, dict[str, dict[str, Any]]]
    s3_bucket_accounts: dict[str, tuple[str, str]]


def _backend_dict(service: str) -> Any:
    from moto.backends import get_backend

    return get_backend(service)  # type: ignore[call-overload]


def capture(seq: int) -> Snapshot:
    """The current backends. Callers make sure no request runs meanwhile."""
    backends: dict[str, dict[str, dict[str, Any]]] = {}
    for service in DURABLE_SERVICES:
        # dict.items: AccountSpecificBackend's own accessors create backends on demand.
        backends[service] = {
            account: dict(dict.items(per_account)) for account, per_account in dict.items(_backend_dict(service))
        }
    s3 = _backend_dict("s3")
    return Snapshot(seq=seq, backends=backends, s3_bucket_accounts=dict(s3.bucket_accounts))


def restore(snapshot: Snapshot) -> None:
    """Install the snapshot's backends in moto's module-level registries, in place."""
    for service, accounts in snapshot.backends.items():
        backend_dict = _backend_dict(service)
        for account, regions in accounts.items():
            per_account = backend_dict[account]
            for region, backend in regions.items():
                dict.__setitem__(per_account, region, backend)
    _backend_dict("s3").bucket_accounts.update(snapshot.s3_bucket_accounts)


def dumps(snapshot: Snapshot) -> bytes:
    buffer = io.BytesIO()
    pickler = _BackendPickler(buffer, protocol=pickle.HIGHEST_PROTOCOL)
    pickler.dump({"format": SNAPSHOT_FORMAT, "snapshot": snapshot})
    return buffer.getvalue()


def loads(data: bytes) -> Snapshot:
    document = pickle.loads(data)
    if document.get("format") != SNAPSHOT_FORMAT:
        raise ValueError(f"unsupported snapshot format {document.get('format')!r}")
    return document["snapshot"]


def read(path: Path) -> Snapshot | None:
    if not path.exists():
        return None
    return loads(path.read_bytes())
