"""The key store's admin flag and rotation, through the DynamoDB API of the stand-in."""

from __future__ import annotations

from ferrymq.aws.credentials import ACTIVE, INACTIVE, CredentialStore
from ferrymq.settings import Settings


def test_the_admin_flag_is_kept_and_absent_means_a_plain_key(aws_settings: Settings) -> None:
    store = CredentialStore.from_settings(aws_settings)
    admin = store.create("123456789012", "ops", admin=True)
    plain = store.create("123456789012", "app")
    temporary, _ = store.create_temporary("123456789012", "ops-tmp", 900, admin=True)
    assert [store.get(k.access_key_id).admin for k in (admin, plain, temporary)] == [True, False, True]  # type: ignore[union-attr]


def test_rotation_makes_a_new_key_like_the_old_and_disables_the_old_in_one_step(aws_settings: Settings) -> None:
    store = CredentialStore.from_settings(aws_settings)
    old = store.create("123456789012", "rotor", admin=True)
    before = store.version()
    new = store.rotate(old.access_key_id)
    assert new is not None and new.access_key_id != old.access_key_id
    assert (new.account_id, new.user_name, new.admin, new.status) == ("123456789012", "rotor", True, ACTIVE)
    assert store.get(new.access_key_id) == new
    assert store.get(old.access_key_id).status == INACTIVE  # type: ignore[union-attr]
    # front ends learn of it: the old key stops working everywhere
    assert store.version() == before + 1
    # and a key that does not exist is not rotated, and nothing is made
    count = len(store.list())
    assert store.rotate("AKIANOSUCHKEY0000000") is None
    assert len(store.list()) == count
