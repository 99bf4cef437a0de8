"""Secret access keys at rest: sealed under a KMS envelope in DynamoDB, in the stand-in's journal and snapshot too;
keys written in the clear by earlier versions still work and are sealed by the migration."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from ferrymq.aws import session
from ferrymq.aws.credentials import Credential, CredentialStore
from ferrymq.aws.secret_box import KEY_ALIAS, SealedSecretDamaged, SecretBox
from ferrymq.settings import Settings


def _raw_items(settings: Settings) -> list[dict[str, Any]]:
    dynamodb = session.client("dynamodb", settings)
    return dynamodb.scan(TableName=settings.credentials_table, ConsistentRead=True)["Items"]


def _every_byte_of(settings: Settings) -> bytes:
    return b"".join(str(item).encode() for item in _raw_items(settings))


def test_a_created_key_is_stored_sealed_and_reads_back(aws_settings: Settings) -> None:
    # given a key created through the store
    store = CredentialStore.from_settings(aws_settings)
    created = store.create("111122223333", "sealed-user")
    # then no attribute of any item holds its secret, and the item carries a sealed one instead
    assert created.secret_access_key.encode() not in _every_byte_of(aws_settings)
    (item,) = [i for i in _raw_items(aws_settings) if i["access_key_id"]["S"] == created.access_key_id]
    assert "secret_access_key" not in item and item["secret_sealed"]["B"]
    # and both this store and a fresh one (another process's cache) read the secret back
    assert store.get(created.access_key_id) == created
    assert CredentialStore.from_settings(aws_settings).get(created.access_key_id) == created
    assert created in CredentialStore.from_settings(aws_settings).list()


def test_a_key_written_in_the_clear_by_an_earlier_version_still_works_and_is_sealed(aws_settings: Settings) -> None:
    # given an item as earlier versions wrote it
    dynamodb = session.client("dynamodb", aws_settings)
    legacy = Credential("AKIALEGACYLEGACY0001", "legacy-secret-in-the-clear", "111122223333", "old", 1.0)
    dynamodb.put_item(TableName=aws_settings.credentials_table, Item={
        "access_key_id": {"S": legacy.access_key_id}, "secret_access_key": {"S": legacy.secret_access_key},
        "account_id": {"S": legacy.account_id}, "user_name": {"S": legacy.user_name}, "created_at": {"N": "1.0"}})
    store = CredentialStore.from_settings(aws_settings)
    # then it is read as before
    assert store.get(legacy.access_key_id) == legacy
    # when the migration runs (ferrymq up runs it at every start), then it is sealed, once
    assert store.seal_plaintext_secrets() >= 1
    assert store.seal_plaintext_secrets() == 0
    assert legacy.secret_access_key.encode() not in _every_byte_of(aws_settings)
    assert store.get(legacy.access_key_id) == legacy


def test_a_sealed_secret_moved_onto_another_key_does_not_open(aws_settings: Settings) -> None:
    box = SecretBox(session.client("kms", aws_settings))
    sealed = box.seal("the secret", "AKIAONEONEONEONEONE1")
    assert box.open(sealed, "AKIAONEONEONEONEONE1") == "the secret"
    with pytest.raises(SealedSecretDamaged):
        box.open(sealed, "AKIATWOTWOTWOTWOTWO2")
    with pytest.raises(SealedSecretDamaged):
        box.open(sealed[:-1] + bytes([sealed[-1] ^ 1]), "AKIAONEONEONEONEONE1")
    with pytest.raises(SealedSecretDamaged):
        box.open(b"\x07" + sealed[1:], "AKIAONEONEONEONEONE1")


def test_a_fresh_box_unwraps_each_data_key_once(aws_settings: Settings) -> None:
    # given secrets sealed by one process
    sealer = SecretBox(session.client("kms", aws_settings))
    sealed = [sealer.seal(f"secret-{i}", f"AKIAKEY{i:013d}") for i in range(20)]
    # when another process opens them all, it asks KMS once (one data key sealed them all)
    kms = session.client("kms", aws_settings)
    calls: list[str] = []
    kms.meta.events.register("before-call.kms.*", lambda model, **_: calls.append(model.name))
    opener = SecretBox(kms)
    assert [opener.open(s, f"AKIAKEY{i:013d}") for i, s in enumerate(sealed)] == [f"secret-{i}" for i in range(20)]
    assert calls == ["Decrypt"]


def test_the_standin_keeps_no_secret_in_its_journal_or_snapshot(aws_settings: Settings, aws_endpoint: str,
                                                                 tmp_path_factory: pytest.TempPathFactory) -> None:
    # given a key created against the session's stand-in
    created = CredentialStore.from_settings(aws_settings).create("111122223333", "journal-user")
    # then no file of any stand-in data directory of this session holds its secret
    standin_dirs = [p for p in Path(tmp_path_factory.getbasetemp()).glob("aws-standin*") if p.is_dir()]
    if not standin_dirs:
        pytest.skip("the test AWS endpoint is not the session's own stand-in")
    for directory in standin_dirs:
        for path in directory.rglob("*"):
            if path.is_file():
                assert created.secret_access_key.encode() not in path.read_bytes(), path
    # (the key alias the box seals under was created by bootstrap)
    kms = session.client("kms", aws_settings)
    assert kms.describe_key(KeyId=KEY_ALIAS)["KeyMetadata"]["Enabled"]
