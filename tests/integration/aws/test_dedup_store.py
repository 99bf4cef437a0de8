"""FIFO deduplication claims against DynamoDB's API: what a purge and a DeduplicationScope change do to them."""

from __future__ import annotations

import uuid

import pytest

from ferrymq.aws import session
from ferrymq.aws.dedup_store import DedupStore, dedup_key
from ferrymq.limits import DEDUP_WINDOW_SECONDS
from ferrymq.settings import Settings

T = 1_800_000_000.0


@pytest.fixture
def store(aws_settings: Settings) -> DedupStore:
    return DedupStore(session.client("dynamodb", aws_settings), aws_settings.dedup_table)


def _key(group: str | None = None) -> str:
    return dedup_key(uuid.uuid4().hex, group, "order-1")


def test_a_claim_made_before_the_last_purge_owns_nothing(store: DedupStore) -> None:
    # given a claim, then a purge of the queue a second later
    key = _key()
    assert store.claim(key, "m-1", T) == "m-1"
    purged_at = T + 1
    # when the same id is sent after the purge, then it is a new message
    assert store.claim(key, "m-2", T + 2, purged_at=purged_at) == "m-2"
    # and that new claim deduplicates the rest of its window, purge or not
    assert store.claim(key, "m-3", T + 3, purged_at=purged_at) == "m-2"
    assert store.claim(key, "m-3", T + 3) == "m-2"


def test_a_claim_made_after_the_purge_still_deduplicates(store: DedupStore) -> None:
    key = _key()
    assert store.claim(key, "m-1", T + 5, purged_at=T) == "m-1"
    assert store.claim(key, "m-2", T + 6, purged_at=T) == "m-1"


def test_a_claim_written_before_claim_times_were_kept_is_judged_by_its_expiry(
    store: DedupStore, aws_settings: Settings
) -> None:
    # given an item as the store wrote it before claimed_ms existed (claimed at T)
    key = _key()
    client = session.client("dynamodb", aws_settings)
    client.put_item(TableName=aws_settings.dedup_table, Item={
        "pk": {"S": key}, "message_id": {"S": "old"}, "expires_at": {"N": str(int(T) + DEDUP_WINDOW_SECONDS)}})
    # then a purge after T frees it and a purge before T does not
    assert store.claim(key, "m-1", T + 2, purged_at=T - 5) == "old"
    assert store.claim(key, "m-2", T + 2, purged_at=T + 1) == "m-2"
