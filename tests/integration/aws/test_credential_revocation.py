"""The key store's revocation and temporary credentials, through the DynamoDB API of the stand-in."""

from __future__ import annotations

import time

import pytest

from ferrymq.aws.credentials import ACTIVE, INACTIVE, VERSION_KEY, CredentialStore
from ferrymq.settings import Settings


def test_deleting_disabling_enabling_and_overwriting_move_the_version(aws_settings: Settings) -> None:
    store = CredentialStore.from_settings(aws_settings)
    before = store.version()
    # creating a key moves nothing: front ends remember unknown keys only briefly
    key = store.create("123456789012", "bob")
    assert store.version() == before
    # each change a front end must learn of moves it by one, with the change
    assert store.set_status(key.access_key_id, active=False) is True
    assert (store.version(), store.get(key.access_key_id).status) == (before + 1, INACTIVE)  # type: ignore[union-attr]
    assert store.set_status(key.access_key_id, active=True) is True
    assert (store.version(), store.get(key.access_key_id).status) == (before + 2, ACTIVE)  # type: ignore[union-attr]
    store.put(key)
    assert store.version() == before + 3
    assert store.delete(key.access_key_id) is True
    assert (store.version(), store.get(key.access_key_id)) == (before + 4, None)
    # and a change to no key changes nothing
    assert store.delete(key.access_key_id) is False
    assert store.set_status(key.access_key_id, active=False) is False
    assert store.version() == before + 4


def test_the_version_item_is_no_key(aws_settings: Settings) -> None:
    store = CredentialStore.from_settings(aws_settings)
    store.set_status(store.create("123456789012", "carol").access_key_id, active=False)
    assert store.get(VERSION_KEY) is None
    assert VERSION_KEY not in [c.access_key_id for c in store.list()]
    assert store.delete(VERSION_KEY) is False
    assert store.set_status(VERSION_KEY, active=False) is False


def test_temporary_credentials_keep_only_their_tokens_hash_and_expiry(aws_settings: Settings) -> None:
    store = CredentialStore.from_settings(aws_settings)
    created, token = store.create_temporary("123456789012", "dave", duration_seconds=900)
    assert created.access_key_id.startswith("ASIA") and created.temporary
    assert created.expires_at == pytest.approx(time.time() + 900, abs=60)
    read = store.get(created.access_key_id)
    assert read == created
    assert token not in repr(read)
    assert read is not None and read.accepts_token(token)
    assert not read.accepts_token(None) and not read.accepts_token(token[:-1])
    with pytest.raises(ValueError, match="between 1 and 129600"):
        store.create_temporary("123456789012", "dave", duration_seconds=0)
