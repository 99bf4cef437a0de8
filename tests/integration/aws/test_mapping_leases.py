"""Leases on event-source mappings against DynamoDB's API: one holder per mapping, a claim or renewal that lost a
race changes nothing, and a takeover raises the epoch so the old holder's renewals fail."""

from __future__ import annotations

import uuid

import pytest

from ferrymq.aws import session
from ferrymq.metadata.event_source_mappings import MappingStore, table_name
from ferrymq.metadata.mapping_leases import Leased, MappingLeases
from ferrymq.push.mapping import MappingConfig
from ferrymq.settings import Settings

NOW = 1_800_000_000_000


@pytest.fixture
def stores(aws_settings: Settings) -> tuple[MappingStore, MappingLeases]:
    dynamodb = session.client("dynamodb", aws_settings)
    return MappingStore(dynamodb, table_name(aws_settings)), MappingLeases(dynamodb, table_name(aws_settings))


def _new(store: MappingStore) -> str:
    account = f"{uuid.uuid4().int % 10**12:012d}"
    config = MappingConfig(queue_arn=f"arn:aws:sqs:us-east-1:{account}:q", function_arn=None, url="http://h/")
    mapping, _ = store.create(account, config)
    return mapping.uuid


def _seen(leases: MappingLeases, mapping_uuid: str) -> Leased:
    return next(leased for leased in leases.scan() if leased.mapping.uuid == mapping_uuid)


def test_one_claim_of_a_free_mapping_wins_and_the_other_changes_nothing(
    stores: tuple[MappingStore, MappingLeases]
) -> None:
    store, leases = stores
    mapping_uuid = _new(store)
    seen = _seen(leases, mapping_uuid)
    assert seen.free(NOW, 0) and seen.epoch == 0
    # two hosts claim what they both saw free: one wins
    assert leases.claim(seen, "host-a", NOW + 10_000) == 1
    assert leases.claim(seen, "host-b", NOW + 10_000) is None
    held = _seen(leases, mapping_uuid)
    assert (held.owner, held.epoch, held.until_ms) == ("host-a", 1, NOW + 10_000)
    assert not held.free(NOW, 2_000)
    # only the holder renews
    assert leases.renew(held.mapping, "host-a", 1, NOW + 20_000)
    assert not leases.renew(held.mapping, "host-b", 1, NOW + 20_000)


def test_a_takeover_after_expiry_raises_the_epoch_and_the_old_holders_renewals_fail(
    stores: tuple[MappingStore, MappingLeases]
) -> None:
    store, leases = stores
    mapping_uuid = _new(store)
    assert leases.claim(_seen(leases, mapping_uuid), "host-a", NOW + 10_000) == 1
    expired = _seen(leases, mapping_uuid)
    assert expired.free(NOW + 13_000, 2_000)
    assert leases.claim(expired, "host-b", NOW + 23_000) == 2
    assert not leases.renew(expired.mapping, "host-a", 1, NOW + 30_000)
    assert not leases.report(expired.mapping, "host-a", 1, "OK")
    assert leases.report(expired.mapping, "host-b", 2, "OK")
    # a clean release frees it at once
    assert leases.release(expired.mapping, "host-b", 2)
    assert _seen(leases, mapping_uuid).free(NOW, 0)


def test_a_deleted_mapping_can_be_neither_claimed_nor_renewed(stores: tuple[MappingStore, MappingLeases]) -> None:
    store, leases = stores
    mapping_uuid = _new(store)
    seen = _seen(leases, mapping_uuid)
    assert leases.claim(seen, "host-a", NOW + 10_000) == 1
    held = _seen(leases, mapping_uuid)
    store.delete(held.mapping)
    assert not leases.renew(held.mapping, "host-a", 1, NOW + 20_000)
    assert leases.claim(held, "host-b", NOW + 20_000) is None
    assert all(leased.mapping.uuid != mapping_uuid for leased in leases.scan())
