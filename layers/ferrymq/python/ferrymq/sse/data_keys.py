"""Data keys for message envelopes: generated, wrapped and unwrapped by the Encryption SDK, reused for the
queue's ``KmsDataKeyReusePeriodSeconds``.

The Encryption SDK does the key work: a :class:`KMSMasterKey` per KMS key generates a data key under the
queue's encryption context (``aws:sqs:arn``, as SQS uses) and unwraps one, and a caching materials manager
per (KMS key, reuse period) keeps the results for the period in a shared :class:`LocalCryptoMaterialsCache`.
A lookup in that cache costs ~20 µs (it hashes the request), as much as the whole budget of a message, so the
keys in use are also held here, ready to encrypt with (:meth:`DataKeys.sealing_key`,
:meth:`DataKeys.opening_key`: a dict lookup and a clock read).  They expire with the SDK's entries; a
lookup that misses calls :meth:`DataKeys.new_sealing_key` / :meth:`DataKeys.unwrap` (blocking: KMS calls;
run them off the event loop), which checks the key's state and asks the caching materials manager.

A sealing key encrypts at most :data:`~ferrymq.sse.envelope.MAX_MESSAGES_PER_DATA_KEY` messages; then its
materials manager is replaced by one with a partition of its own, whose first request generates a new key.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from dataclasses import dataclass

from aws_encryption_sdk import CachingCryptoMaterialsManager, LocalCryptoMaterialsCache
from aws_encryption_sdk.identifiers import Algorithm, CommitmentPolicy
from aws_encryption_sdk.key_providers.kms import KMSMasterKey
from aws_encryption_sdk.materials_managers import DecryptionMaterialsRequest, EncryptionMaterialsRequest
from aws_encryption_sdk.structures import EncryptedDataKey, MasterKeyInfo
from cryptography.hazmat.primitives.ciphers.aead import AESGCM

from ferrymq.aws.kms import InvalidCiphertext, Kms
from ferrymq.sse.envelope import MAX_MESSAGES_PER_DATA_KEY, EnvelopeError, WrappedKey

# The SDK logs every KMS refusal with a traceback before raising; FerryMQ reports them as SQS errors itself.
logging.getLogger("aws_encryption_sdk").setLevel(logging.CRITICAL)

CONTEXT_KEY = "aws:sqs:arn"
"""The encryption context key KMS binds each data key to: the ARN of the queue it encrypts messages for."""
# Unsigned and cacheable; only its key length (32 bytes) and the cache keys depend on it.
ALGORITHM = Algorithm.AES_256_GCM_HKDF_SHA512_COMMIT_KEY
_POLICY = CommitmentPolicy.REQUIRE_ENCRYPT_REQUIRE_DECRYPT
_PROVIDER = "aws-kms"
MAX_UNWRAPPED_KEYS = 4096
"""Unwrapped data keys held for decryption; past it the oldest go (the SDK's cache may still have them)."""


@dataclass(slots=True)
class SealingKey:
    """A data key to encrypt a queue's messages with, and what envelopes say of it."""

    aead: AESGCM
    queue_arn: bytes
    expires: float
    remaining: int
    wrapped: bytes
    key_arn: str


@dataclass(slots=True)
class _OpeningKey:
    aead: AESGCM
    expires: float


class DataKeys:
    """Data keys by KMS key and queue, on behalf of every queue a front end serves.

    ``monotonic``: the clock expiry is measured on.  ``max_age``: when above 0, no key is used longer than
    this, whatever the queue's reuse period.
    """

    def __init__(self, kms: Kms, monotonic: Callable[[], float], *, max_age: float = 0.0,
                 cache_capacity: int = 1024) -> None:
        self.kms = kms
        self._monotonic = monotonic
        self._max_age = max_age
        self._cache = LocalCryptoMaterialsCache(cache_capacity)
        self._managers: dict[tuple[str, str, float], CachingCryptoMaterialsManager] = {}
        self._managers_lock = threading.Lock()
        self._sealing: dict[tuple[str, str, int], SealingKey] = {}
        self._opening: dict[tuple[bytes, str], _OpeningKey] = {}
        self._opening_lock = threading.Lock()

    def _age(self, reuse_seconds: int) -> float:
        return float(min(reuse_seconds, self._max_age) if self._max_age > 0 else reuse_seconds)

    def _manager(self, purpose: str, key_id: str, age: float, *, fresh: bool = False) -> CachingCryptoMaterialsManager:
        with self._managers_lock:
            slot = (purpose, key_id, age)
            manager = self._managers.get(slot)
            if manager is None or fresh:
                manager = self._managers[slot] = CachingCryptoMaterialsManager(
                    master_key_provider=KMSMasterKey(key_id=key_id, client=self.kms.client),
                    cache=self._cache,
                    max_age=age,
                )
            return manager

    # --- encrypting ------------------------------------------------------------------------------------

    def sealing_key(self, key_id: str, queue_arn: str, reuse_seconds: int, messages: int) -> SealingKey | None:
        """The key to seal ``messages`` more messages of ``queue_arn`` with, if one is held and may still;
        never blocks."""
        key = self._sealing.get((key_id, queue_arn, reuse_seconds))
        if key is None or key.expires <= self._monotonic() or key.remaining < messages:
            return None
        key.remaining -= messages
        return key

    def new_sealing_key(self, key_id: str, queue_arn: str, reuse_seconds: int) -> SealingKey:
        """A data key for ``queue_arn`` under KMS key ``key_id``, from the SDK's cache or KMS (blocking)."""
        age = self._age(reuse_seconds)
        slot = (key_id, queue_arn, reuse_seconds)
        spent = self._sealing.get(slot)
        started = self._monotonic()
        self.kms.check_key(key_id)
        # A key that encrypted its share of messages is replaced even if the SDK would still hand it out.
        manager = self._manager("seal", key_id, age, fresh=spent is not None and spent.remaining <= 0)
        request = EncryptionMaterialsRequest(
            encryption_context={CONTEXT_KEY: queue_arn},
            frame_length=0,
            algorithm=ALGORITHM,
            plaintext_length=1,
            commitment_policy=_POLICY,
        )
        materials = self.kms.call(lambda: manager.get_encryption_materials(request))
        (edk,) = materials.encrypted_data_keys
        key_arn = edk.key_provider.key_info.decode()
        wrapped = WrappedKey(key_arn, edk.encrypted_data_key).encode()
        aead = AESGCM(materials.data_encryption_key.data_key)
        expires = started + age
        key = SealingKey(aead, queue_arn.encode(), expires, MAX_MESSAGES_PER_DATA_KEY, wrapped, key_arn)
        self._sealing[slot] = key
        # The front end that sealed messages can open them without asking KMS to unwrap the key.
        self._remember(wrapped, queue_arn, _OpeningKey(aead, expires))
        return key

    # --- decrypting ------------------------------------------------------------------------------------

    def opening_key(self, wrapped: bytes, queue_arn: str) -> AESGCM | None:
        """The unwrapped data key of ``wrapped`` (as an envelope stores it) for ``queue_arn``, if held; never
        blocks."""
        key = self._opening.get((wrapped, queue_arn))
        if key is None or key.expires <= self._monotonic():
            return None
        return key.aead

    def unwrap(self, wrapped: bytes, queue_arn: str, reuse_seconds: int) -> AESGCM:
        """Unwrap ``wrapped`` for messages of ``queue_arn`` through the SDK's cache or KMS (blocking)."""
        age = self._age(reuse_seconds)
        started = self._monotonic()
        key = WrappedKey.decode(wrapped)
        self.kms.check_key(key.key_arn)
        manager = self._manager("open", key.key_arn, age)
        request = DecryptionMaterialsRequest(
            algorithm=ALGORITHM,
            encrypted_data_keys={
                EncryptedDataKey(MasterKeyInfo(_PROVIDER, key.key_arn.encode()), key.ciphertext)
            },
            encryption_context={CONTEXT_KEY: queue_arn},
            commitment_policy=_POLICY,
        )
        try:
            materials = self.kms.call(lambda: manager.decrypt_materials(request))
        except InvalidCiphertext as exc:
            raise EnvelopeError(f"KMS does not unwrap the envelope's data key for {queue_arn}: {exc}") from None
        aead = AESGCM(materials.data_key.data_key)
        self._remember(wrapped, queue_arn, _OpeningKey(aead, started + age))
        return aead

    def _remember(self, wrapped: bytes, queue_arn: str, key: _OpeningKey) -> None:
        opening = self._opening
        # Unwraps run in threads: evicting is guarded, lookups on the event loop need no lock.
        with self._opening_lock:
            opening[(wrapped, queue_arn)] = key
            while len(opening) > MAX_UNWRAPPED_KEYS:
                del opening[next(iter(opening))]
