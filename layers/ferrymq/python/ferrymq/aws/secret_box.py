"""Secrets kept at rest under a KMS envelope: what :class:`~ferrymq.aws.credentials.CredentialStore` stores in
place of a secret access key.

A data key comes from KMS (``GenerateDataKey`` under the FerryMQ-managed key :data:`KEY_ALIAS`, with an
encryption context naming its purpose); each secret is encrypted with AES-256-GCM under it, the access key id
bound in as associated data, so a sealed secret copied onto another key's item does not open. What is stored::

    offset 0        1            3                 3+n        15+n
           +--------+------------+-----------------+----------+----------------------------+
           | format | n (u16)    | wrapped data    | nonce    | ciphertext | GCM tag (16)  |
           | (1)    |            | key (n bytes)   | (12)     |                             |
           +--------+------------+-----------------+----------+----------------------------+

One data key seals every secret a process writes; unwrapped keys are cached by their wrapped form, so reading
a key costs one KMS ``Decrypt`` per data key and process, not per request. Neither DynamoDB, nor a scan of it,
nor the local stand-in's journal and snapshots ever hold a secret in the clear.
"""

from __future__ import annotations

import os
import struct
import threading
from typing import Any

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.ciphers.aead import AESGCM

from ferrymq.aws import session
from ferrymq.aws.errors import translate_client_errors
from ferrymq.errors import InternalError

KEY_ALIAS = "alias/ferrymq/credentials"
FORMAT = 1
NONCE_BYTES = 12
_HEADER = struct.Struct(">BH")
_CONTEXT = {"purpose": "ferrymq-access-key-secrets"}
_AAD_PREFIX = b"ferrymq access key secret\0"
_UNWRAPPED_CACHE_LIMIT = 256


class SealedSecretDamaged(InternalError):
    """A sealed secret could not be opened: damaged, or moved from the item it was sealed for."""


class SecretBox:
    """Seals and opens secrets under a data key from KMS (``key_id``: an id, ARN or alias)."""

    def __init__(self, kms: Any, key_id: str = KEY_ALIAS) -> None:
        self._kms = kms
        self._key_id = key_id
        self._lock = threading.Lock()
        self._sealing: tuple[bytes, AESGCM] | None = None
        self._unwrapped: dict[bytes, AESGCM] = {}

    @classmethod
    def for_region(cls, region: str, key_id: str = KEY_ALIAS) -> SecretBox:
        """A box whose KMS client is built as every other FerryMQ client (endpoints from the environment)."""
        return cls(session.new_session().client("kms", region_name=region), key_id)

    def seal(self, secret: str, bound_to: str) -> bytes:
        wrapped, cipher = self._sealing_key()
        nonce = os.urandom(NONCE_BYTES)
        ciphertext = cipher.encrypt(nonce, secret.encode(), _AAD_PREFIX + bound_to.encode())
        return _HEADER.pack(FORMAT, len(wrapped)) + wrapped + nonce + ciphertext

    def open(self, sealed: bytes, bound_to: str) -> str:
        if len(sealed) < _HEADER.size:
            raise SealedSecretDamaged(f"The sealed secret of {bound_to} is too short.")
        version, length = _HEADER.unpack_from(sealed)
        if version != FORMAT or len(sealed) < _HEADER.size + length + NONCE_BYTES + 16:
            raise SealedSecretDamaged(f"The sealed secret of {bound_to} has an unknown format.")
        wrapped = bytes(sealed[_HEADER.size : _HEADER.size + length])
        nonce_at = _HEADER.size + length
        nonce, ciphertext = sealed[nonce_at : nonce_at + NONCE_BYTES], sealed[nonce_at + NONCE_BYTES :]
        try:
            plain = self._unwrap(wrapped).decrypt(nonce, ciphertext, _AAD_PREFIX + bound_to.encode())
        except InvalidTag:
            raise SealedSecretDamaged(f"The sealed secret of {bound_to} does not open.") from None
        return plain.decode()

    def _sealing_key(self) -> tuple[bytes, AESGCM]:
        with self._lock:
            if self._sealing is None:
                with translate_client_errors():
                    answer = self._kms.generate_data_key(KeyId=self._key_id, KeySpec="AES_256",
                                                         EncryptionContext=_CONTEXT)
                cipher = AESGCM(answer["Plaintext"])
                self._sealing = (answer["CiphertextBlob"], cipher)
                self._remember(answer["CiphertextBlob"], cipher)
            return self._sealing

    def _unwrap(self, wrapped: bytes) -> AESGCM:
        cipher = self._unwrapped.get(wrapped)
        if cipher is None:
            with translate_client_errors():
                plain = self._kms.decrypt(CiphertextBlob=wrapped, EncryptionContext=_CONTEXT)["Plaintext"]
            cipher = AESGCM(plain)
            with self._lock:
                self._remember(wrapped, cipher)
        return cipher

    def _remember(self, wrapped: bytes, cipher: AESGCM) -> None:
        if len(self._unwrapped) >= _UNWRAPPED_CACHE_LIMIT:
            self._unwrapped.clear()
        self._unwrapped[wrapped] = cipher
