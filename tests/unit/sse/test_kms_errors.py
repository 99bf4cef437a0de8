"""KMS's answers as the errors SQS reports for SendMessage, SendMessageBatch and ReceiveMessage."""

from __future__ import annotations

from typing import Any

import pytest

from ferrymq.aws.kms import InvalidCiphertext, Kms, error_for
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
    error_for_code,
)

ARN = "arn:aws:kms:us-east-1:000000000000:key/1234abcd-12ab-34cd-56ef-1234567890ab"


@pytest.mark.parametrize(
    ("kms_code", "error", "query_code", "status"),
    [
        ("DisabledException", KmsDisabled, "KMS.DisabledException", 400),
        ("NotFoundException", KmsNotFound, "KMS.NotFoundException", 400),
        ("KMSInvalidStateException", KmsInvalidState, "KMS.InvalidStateException", 400),
        ("AccessDeniedException", KmsAccessDenied, "KMS.AccessDeniedException", 400),
        ("ThrottlingException", KmsThrottled, "KMS.ThrottlingException", 400),
        ("KMSOptInRequired", KmsOptInRequired, "KMS.OptInRequired", 403),
        ("InvalidKeyUsageException", KmsInvalidKeyUsage, "KMS.InvalidKeyUsageException", 400),
    ],
)
def test_kms_refusals_are_sqs_errors(kms_code: str, error: type[SqsError], query_code: str, status: int) -> None:
    # when KMS refuses with its code, then the SQS error carries KMS's message and SQS's codes and status
    got = error_for(kms_code, "why KMS said no")
    assert type(got) is error
    assert isinstance(got, SqsError)
    assert (got.message, got.query_code, got.status, got.sender) == ("why KMS said no", query_code, status, True)
    assert got.code == error.__name__ and error_for_code(got.code) is error


def test_kms_outages_are_unavailable_and_unknown_answers_internal() -> None:
    assert isinstance(error_for("KMSInternalException", "x"), ServiceUnavailable)
    assert isinstance(error_for("DependencyTimeoutException", "x"), ServiceUnavailable)
    assert isinstance(error_for("SomethingNew", "x"), InternalError)
    assert isinstance(error_for("InvalidCiphertextException", "x"), InvalidCiphertext)


class _Events:
    def register(self, *args: Any, **kwargs: Any) -> None:
        pass


class _DescribingClient:
    """A KMS client stub that answers DescribeKey with fixed metadata."""

    def __init__(self, meta: dict[str, Any]) -> None:
        self.meta = type("Meta", (), {"events": _Events()})()
        self._key = meta

    def describe_key(self, KeyId: str) -> dict[str, Any]:
        return {"KeyMetadata": self._key}


@pytest.mark.parametrize(
    ("meta", "error", "message"),
    [
        ({"KeyState": "Disabled", "Enabled": False}, KmsDisabled, f"{ARN} is disabled."),
        ({"KeyState": "PendingDeletion", "Enabled": False}, KmsInvalidState, f"{ARN} is pending deletion."),
        ({"KeyState": "PendingImport", "Enabled": False}, KmsInvalidState, f"{ARN} is pending import."),
        ({"KeyState": "Enabled", "KeyUsage": "SIGN_VERIFY", "KeySpec": "RSA_2048"}, KmsInvalidKeyUsage, None),
    ],
)
def test_a_key_that_may_not_encrypt_now_is_refused_before_any_data_key(meta: dict, error: type, message: str) -> None:
    kms = Kms(_DescribingClient({"Arn": ARN, **meta}))
    with pytest.raises(error) as refused:
        kms.check_key("alias/app")
    if message is not None:
        assert refused.value.message == message


def test_an_enabled_symmetric_key_is_checked_to_its_arn() -> None:
    kms = Kms(_DescribingClient({"Arn": ARN, "KeyState": "Enabled", "KeyUsage": "ENCRYPT_DECRYPT",
                                 "KeySpec": "SYMMETRIC_DEFAULT"}))
    assert kms.check_key("alias/app") == ARN
