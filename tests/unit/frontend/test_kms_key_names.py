"""How the front end reads a queue's KmsMasterKeyId: which names are the service's own keys' aliases, which is
the tenant's AWS-managed key, and KMS's refusals reworded to name the key as the queue does."""

from __future__ import annotations

import pytest

from ferrymq.errors import KmsAccessDenied, KmsNotFound, ServiceUnavailable
from ferrymq.frontend.encryption import alias_named, named_as, names_tenant_managed_key, refused

QUEUE = "arn:aws:sqs:us-east-1:000000000000:q"


@pytest.mark.parametrize(("key_id", "alias"), [
    ("alias/ferrymq/credentials", "alias/ferrymq/credentials"),
    ("arn:aws:kms:us-east-1:123456789012:alias/ferrymq/credentials", "alias/ferrymq/credentials"),
    ("arn:aws:kms:us-east-1:123456789012:key/eb14dd15-d572-41b2-aa00-ab96265f3243", None),
    ("eb14dd15-d572-41b2-aa00-ab96265f3243", None),
    ("arn:aws:sqs:us-east-1:123456789012:alias/x", None),
    ("not an arn", None),
])
def test_an_alias_is_read_from_its_name_or_its_arn(key_id: str, alias: str | None) -> None:
    assert alias_named(key_id) == alias


@pytest.mark.parametrize(("key_id", "managed"), [
    ("alias/aws/sqs", True),
    ("arn:aws:kms:us-east-1:000000000000:alias/aws/sqs", True),
    ("arn:aws:kms:us-east-1:999999999999:alias/aws/sqs", False),  # another account's
    ("arn:aws:kms:eu-north-1:000000000000:alias/aws/sqs", False),  # another region's
    ("alias/aws/sqs/more", False),
    ("alias/aws/s3", False),
])
def test_alias_aws_sqs_is_the_tenants_only_in_its_own_account_and_region(key_id: str, managed: bool) -> None:
    assert names_tenant_managed_key(key_id, QUEUE) is managed


def test_a_refusal_names_the_key_as_named_and_is_kms_access_denied() -> None:
    error = refused("alias/ferrymq/credentials")
    assert isinstance(error, KmsAccessDenied)
    assert (error.query_code, error.status) == ("KMS.AccessDeniedException", 400)
    assert "alias/ferrymq/credentials" in error.message


def test_kms_arns_in_a_refusal_are_replaced_by_the_name_the_queue_uses() -> None:
    # given KMS's answer naming the alias by an ARN in the service's account
    error = KmsNotFound("Alias arn:aws:kms:us-east-1:123456789012:alias/no-such-key is not found.")
    # when it is reworded, then the account is gone and the key is named as the queue named it
    renamed = named_as(error, "alias/no-such-key")
    assert isinstance(renamed, KmsNotFound)
    assert renamed.message == "Alias alias/no-such-key is not found."
    # and an error without an ARN, or of another kind, is left as it is
    plain = KmsNotFound("Invalid keyId 1234")
    assert named_as(plain, "x") is plain
    outage = ServiceUnavailable()
    assert named_as(outage, "x") is outage
