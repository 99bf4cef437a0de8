"""KMS as server-side encryption uses it: the key checks, KMS's refusals as SQS reports them, and the calls
counted for usage records.

:class:`Kms` wraps one boto3 KMS client.  Every call through it (its own, and those the Encryption SDK makes
with the same client) is counted for the thread that made it, inside :func:`metered`, by hooks on the
client's events; the hooks also keep the last error KMS answered, because the Encryption SDK reports a
failed unwrap without it.

Before a data key is generated or unwrapped, :meth:`Kms.check_key` asks KMS for the key's state
(DescribeKey), once per data key: some KMS implementations (moto's) generate and decrypt with a disabled or
pending-deletion key, and SQS refuses both.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any, TypeVar

from botocore.exceptions import BotoCoreError, ClientError

from ferrymq.errors import (
    InternalError,
    KmsAccessDenied,
    KmsDisabled,
    KmsInvalidKeyUsage,
    KmsInvalidState,
    KmsNotFound,
    KmsOptInRequired,
    KmsThrottled,
    ServiceUnavailable,
    SqsError,
)

log = logging.getLogger(__name__)
T = TypeVar("T")

_REFUSALS: dict[str, type[SqsError]] = {
    "AccessDeniedException": KmsAccessDenied,
    "UnrecognizedClientException": KmsAccessDenied,
    "InvalidGrantTokenException": KmsAccessDenied,
    "DisabledException": KmsDisabled,
    "InvalidKeyUsageException": KmsInvalidKeyUsage,
    "IncorrectKeyException": KmsInvalidKeyUsage,
    "KMSInvalidStateException": KmsInvalidState,
    "NotFoundException": KmsNotFound,
    "OptInRequired": KmsOptInRequired,
    "KMSOptInRequired": KmsOptInRequired,
    "ThrottlingException": KmsThrottled,
    "LimitExceededException": KmsThrottled,
}
_OUTAGES = frozenset({"KMSInternalException", "DependencyTimeoutException", "ServiceUnavailable", "InternalFailure"})


class KmsCalls:
    """The KMS calls one thread made inside :func:`metered`, and the last error KMS answered."""

    __slots__ = ("count", "error")

    def __init__(self) -> None:
        self.count = 0
        self.error: tuple[str, str] | None = None


_local = threading.local()


@contextmanager
def metered() -> Iterator[KmsCalls]:
    """Count the KMS calls this thread makes in the block."""
    calls = KmsCalls()
    outer = getattr(_local, "calls", None)
    _local.calls = calls
    try:
        yield calls
    finally:
        _local.calls = outer


class InvalidCiphertext(Exception):
    """KMS refused to unwrap a data key: the wrapped key, or the encryption context it is bound to, is not
    what KMS made (stored data damaged or tampered with, not a fault of the request)."""


def error_for(code: str, message: str) -> Exception:
    """The SQS error for KMS's answer ``code`` (:class:`InvalidCiphertext` for a wrapped key KMS refuses)."""
    if code == "InvalidCiphertextException":
        return InvalidCiphertext(message)
    refusal = _REFUSALS.get(code)
    if refusal is not None:
        return refusal(message)
    if code in _OUTAGES:
        return ServiceUnavailable()
    log.error("KMS answered %s: %s", code, message)
    return InternalError()


def _key_state_error(meta: dict[str, Any]) -> SqsError | None:
    arn = meta.get("Arn") or meta.get("KeyId", "")
    state = meta.get("KeyState") or ("Enabled" if meta.get("Enabled", True) else "Disabled")
    if state == "Disabled":
        return KmsDisabled(f"{arn} is disabled.")
    if state != "Enabled":
        words = {"PendingDeletion": "pending deletion", "PendingImport": "pending import"}.get(state, state)
        return KmsInvalidState(f"{arn} is {words}.")
    usage = meta.get("KeyUsage", "ENCRYPT_DECRYPT")
    spec = meta.get("KeySpec") or meta.get("CustomerMasterKeySpec") or "SYMMETRIC_DEFAULT"
    if usage != "ENCRYPT_DECRYPT" or spec != "SYMMETRIC_DEFAULT":
        return KmsInvalidKeyUsage(f"{arn} key usage is {usage} ({spec}): it cannot generate data keys.")
    return None


class Kms:
    """The KMS client of server-side encryption (``client``: a boto3 KMS client, whose events it hooks)."""

    def __init__(self, client: Any) -> None:
        self.client = client
        events = client.meta.events
        # Once per client, however many wrap it: a call is counted once.
        events.register("before-call.kms", self._before_call, unique_id="ferrymq-kms-count")
        events.register("after-call.kms", self._after_call, unique_id="ferrymq-kms-error")

    @staticmethod
    def _before_call(**_: Any) -> None:
        calls = getattr(_local, "calls", None)
        if calls is not None:
            calls.count += 1

    @staticmethod
    def _after_call(http_response: Any = None, parsed: Any = None, **_: Any) -> None:
        calls = getattr(_local, "calls", None)
        if calls is None or http_response is None or http_response.status_code < 300:
            return
        error = (parsed or {}).get("Error") or {}
        calls.error = (str(error.get("Code", "")), str(error.get("Message", "")))

    def call(self, what: Callable[[], T]) -> T:
        """Run ``what`` (KMS work, the Encryption SDK's included) with its failures as SQS errors."""
        calls = getattr(_local, "calls", None)
        if calls is not None:
            calls.error = None
        try:
            return what()
        except SqsError:
            raise
        except ClientError as exc:
            error = exc.response.get("Error", {})
            raise error_for(str(error.get("Code", "")), str(error.get("Message", ""))) from exc
        except BotoCoreError as exc:
            raise ServiceUnavailable() from exc
        except Exception as exc:
            # The Encryption SDK wraps KMS's answer in its own errors, or drops it: the hook kept it.
            if calls is not None and calls.error is not None:
                raise error_for(*calls.error) from exc
            raise

    def check_key(self, key_id: str) -> str:
        """The ARN of ``key_id`` (an id, ARN or alias), if the key may encrypt and decrypt now."""

        def describe() -> dict[str, Any]:
            return self.client.describe_key(KeyId=key_id)["KeyMetadata"]

        meta = self.call(describe)
        problem = _key_state_error(meta)
        if problem is not None:
            raise problem
        return str(meta["Arn"])

    def ensure_alias(self, alias: str, description: str) -> str:
        """The ARN of the key ``alias`` names, creating key and alias when it names none (first use)."""
        try:
            return self.check_key(alias)
        except KmsNotFound:
            pass

        def create() -> None:
            key_id = self.client.create_key(Description=description)["KeyMetadata"]["KeyId"]
            try:
                self.client.create_alias(AliasName=alias, TargetKeyId=key_id)
            except ClientError as exc:
                # Another front end created it first: use theirs, and leave ours unused.
                if exc.response.get("Error", {}).get("Code") != "AlreadyExistsException":
                    raise
                self.client.schedule_key_deletion(KeyId=key_id, PendingWindowInDays=7)
            log.info("created KMS key %s as %s", key_id, alias)

        self.call(create)
        return self.check_key(alias)
