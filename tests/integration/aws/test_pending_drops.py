"""Pending drops in the queue catalog, against DynamoDB's API (the durable stand-in, or the configured endpoint):
the tombstone and the pending drop as one transaction, reading them by partition, clearing them, and keeping
them out of every caller's sight."""

from __future__ import annotations

import asyncio
import itertools
import random
import uuid
from pathlib import Path
from typing import Any

import boto3
import pytest

from ferrymq.aws import session
from ferrymq.aws.credentials import Credential
from ferrymq.aws.queue_store import (
    DROPS_ACCOUNT,
    TOMBSTONE_LIFETIME_SECONDS,
    PendingDrop,
    QueueRecord,
    QueueStore,
    StaleQueueRecord,
)
from ferrymq.clock import ManualClock
from ferrymq.errors import QueueDoesNotExist
from ferrymq.frontend.actions.queues import get_queue_url, list_queues
from ferrymq.frontend.context import RequestContext
from ferrymq.frontend.wiring import build_frontend
from ferrymq.infra.standin import layout
from ferrymq.metadata.catalog import QueueCatalog
from ferrymq.settings import Settings
from tests.integration.infra.processes import python_module, running

_accounts = itertools.count(200000000000)
DELETED_AT = 1_700_000_100.0


@pytest.fixture
def store(aws_settings: Settings) -> QueueStore:
    return QueueStore(session.client("dynamodb", aws_settings), aws_settings.queues_table)


@pytest.fixture
def partition() -> int:
    """A partition no other test uses, so its pending drops are this test's alone (also against an endpoint
    that outlives the test session)."""
    return random.randrange(10_000, 99_999)


def _live(store: QueueStore, partition: int, name: str = "q") -> QueueRecord:
    record = QueueRecord(account=str(next(_accounts)), name=name, queue_id=uuid.uuid4().hex, partition=partition,
                         created_at=1_700_000_000, modified_at=1_700_000_000)
    store.put_new(record, None)
    return record


def _drop_of(record: QueueRecord) -> PendingDrop:
    return PendingDrop(record.partition, record.queue_id, record.account, record.name, DELETED_AT)


def test_the_tombstone_and_the_pending_drop_are_written_together(store: QueueStore, partition: int) -> None:
    # given a live queue
    record = _live(store, partition)
    # when it is tombstoned
    store.tombstone(record, record.evolve(deleted_at=DELETED_AT))
    # then the catalog holds the tombstone, one version on
    stored = store.get(record.account, record.name)
    assert stored is not None and not stored.live
    assert (stored.deleted_at, stored.version, stored.queue_id) == (DELETED_AT, record.version + 1, record.queue_id)
    # and its partition has a pending drop of the queue id
    assert store.pending_drops(partition) == [_drop_of(record)]


def test_pending_drops_are_read_by_partition_only(store: QueueStore, partition: int) -> None:
    # given deleted queues in a partition, in one whose number starts with the same digits, and in a neighbour
    mine = [_live(store, partition, f"mine-{i}") for i in range(3)]
    longer = _live(store, partition * 10)
    neighbour = _live(store, partition + 1)
    for record in [*mine, longer, neighbour]:
        store.tombstone(record, record.evolve(deleted_at=DELETED_AT))
    # when the partition's pending drops are read, then they are exactly its own
    assert sorted(d.queue_id for d in store.pending_drops(partition)) == sorted(r.queue_id for r in mine)
    assert [d.queue_id for d in store.pending_drops(partition * 10)] == [longer.queue_id]
    assert [d.queue_id for d in store.pending_drops(partition + 1)] == [neighbour.queue_id]


def test_a_cleared_pending_drop_is_gone_and_clearing_again_is_harmless(store: QueueStore, partition: int) -> None:
    # given two pending drops in a partition
    first, second = _live(store, partition, "first"), _live(store, partition, "second")
    for record in (first, second):
        store.tombstone(record, record.evolve(deleted_at=DELETED_AT))
    # when one is cleared, twice
    store.clear_pending_drop(partition, first.queue_id)
    store.clear_pending_drop(partition, first.queue_id)
    # then only the other remains, and the tombstone is untouched
    assert store.pending_drops(partition) == [_drop_of(second)]
    tombstone = store.get(first.account, first.name)
    assert tombstone is not None and tombstone.deleted_at == DELETED_AT


def test_a_tombstone_that_lost_a_race_writes_no_pending_drop(store: QueueStore, partition: int) -> None:
    # given a queue read by a deleting front end, then changed by another one
    read = _live(store, partition)
    store.replace(read, read.evolve(attributes={"DelaySeconds": "5"}))
    # when the first one tombstones what it read
    with pytest.raises(StaleQueueRecord):
        store.tombstone(read, read.evolve(deleted_at=DELETED_AT))
    # then neither half of the transaction happened
    stored = store.get(read.account, read.name)
    assert stored is not None and stored.live and stored.attributes == {"DelaySeconds": "5"}
    assert store.pending_drops(partition) == []


class _RacingStore(QueueStore):
    """A store whose first tombstone finds the record changed by another front end since it was read."""

    def __init__(self, inner: QueueStore) -> None:
        self._inner = inner
        self.raced = False

    def get(self, account: str, name: str, region: str | None = None) -> QueueRecord | None:
        return self._inner.get(account, name, region)

    def tombstone(self, old: QueueRecord, deleted: QueueRecord) -> None:
        if not self.raced:
            self.raced = True
            self._inner.replace(old, old.evolve(tags={"team": "edge"}))
        self._inner.tombstone(old, deleted)

    def clear_pending_drop(self, partition: int, queue_id: str) -> None:
        self._inner.clear_pending_drop(partition, queue_id)


def test_catalog_delete_retries_a_lost_race_and_leaves_one_pending_drop(store: QueueStore, partition: int) -> None:
    # given a queue, and a catalog whose first delete attempt races another writer
    record = _live(store, partition)
    racing = _RacingStore(store)
    catalog = QueueCatalog(racing, ManualClock(DELETED_AT), partitions=1, ttl=30, region="us-east-1")
    # when the queue is deleted
    deleted = asyncio.run(catalog.delete(record.account, record.name))
    # then the delete was retried on the fresh record: the tombstone keeps the other writer's change
    assert racing.raced
    assert (deleted.deleted_at, deleted.tags, deleted.version) == (DELETED_AT, {"team": "edge"}, record.version + 2)
    assert store.get(record.account, record.name) == deleted
    # and exactly one pending drop was written
    assert store.pending_drops(partition) == [_drop_of(record)]
    # and clearing it through the catalog removes it
    asyncio.run(catalog.clear_pending_drop(deleted, 0))
    assert store.pending_drops(partition) == []


def test_no_caller_can_list_or_find_the_pending_drops(aws_settings: Settings, store: QueueStore) -> None:
    # given a queue deleted in a partition (partition 0: the one these settings' catalog creates queues in)
    account = str(next(_accounts))
    frontend = build_frontend(aws_settings, ManualClock())
    catalog = frontend.services.catalog
    asyncio.run(catalog.create(account, "kept", {}, {}))
    asyncio.run(catalog.create(account, "doomed", {}, {}))
    deleted = asyncio.run(catalog.delete(account, "doomed"))
    drop_name = f"{deleted.partition:06d}#{deleted.queue_id}"
    assert deleted.queue_id in {d.queue_id for d in store.pending_drops(deleted.partition)}

    def context(caller: str) -> RequestContext:
        return RequestContext(frontend.services, Credential("AKIATESTDROPS", "secret", caller, "dev"),
                              "http://127.0.0.1")

    owner = context(account)
    # when the owner lists its queues, then only the live one shows
    listed = asyncio.run(list_queues(owner, {}))
    # (an IP endpoint gets path-form queue URLs, which name the region)
    assert listed["QueueUrls"] == [f"http://127.0.0.1/queue/us-east-1/{account}/kept"]
    # when the owner asks for the pending drop by the pseudo-account, then there is no such queue
    with pytest.raises(QueueDoesNotExist):
        asyncio.run(get_queue_url(owner, {"QueueName": drop_name, "QueueOwnerAWSAccountId": DROPS_ACCOUNT}))
    # and even a credential that names the pseudo-account as its own lists and finds nothing
    insider = context(DROPS_ACCOUNT)
    assert "QueueUrls" not in asyncio.run(list_queues(insider, {}))
    assert "QueueUrls" not in asyncio.run(list_queues(insider, {"QueueNamePrefix": f"{deleted.partition:06d}"}))
    with pytest.raises(QueueDoesNotExist):
        asyncio.run(get_queue_url(insider, {"QueueName": drop_name}))
    with pytest.raises(QueueDoesNotExist):
        asyncio.run(catalog.get(DROPS_ACCOUNT, drop_name))


# --- durability in the stand-in ---------------------------------------------------------------------------


def _standin_client(url: str) -> Any:
    return boto3.client("dynamodb", endpoint_url=url, region_name="us-east-1", aws_access_key_id="test",
                        aws_secret_access_key="test")


def test_the_transaction_survives_a_standin_crash(tmp_path: Path) -> None:
    argv = python_module("ferrymq.infra.standin", "--host", "127.0.0.1", "--port", "0", "--data-dir", str(tmp_path))
    # given a stand-in with a queues table, a queue tombstoned in a transaction, and a transaction that lost
    with running(argv, layout.READY_PREFIX) as standin:
        dynamodb = _standin_client(standin.url)
        dynamodb.create_table(
            TableName="queues",
            BillingMode="PAY_PER_REQUEST",
            AttributeDefinitions=[{"AttributeName": "account", "AttributeType": "S"},
                                  {"AttributeName": "name", "AttributeType": "S"}],
            KeySchema=[{"AttributeName": "account", "KeyType": "HASH"},
                       {"AttributeName": "name", "KeyType": "RANGE"}],
        )
        store = QueueStore(dynamodb, "queues")
        deleted = _live(store, 7, "deleted")
        store.tombstone(deleted, deleted.evolve(deleted_at=DELETED_AT))
        raced = _live(store, 7, "raced")
        store.replace(raced, raced.evolve(tags={"a": "b"}))
        with pytest.raises(StaleQueueRecord):
            store.tombstone(raced, raced.evolve(deleted_at=DELETED_AT))
        # when it is killed with SIGKILL and started again on its directory
        standin.kill9()
    with running(argv, layout.READY_PREFIX) as standin:
        store = QueueStore(_standin_client(standin.url), "queues")
        # then both halves of the transaction are there, and nothing of the one that lost
        tombstone = store.get(deleted.account, deleted.name)
        assert tombstone is not None and tombstone.deleted_at == DELETED_AT
        assert store.pending_drops(7) == [_drop_of(deleted)]
        survivor = store.get(raced.account, raced.name)
        assert survivor is not None and survivor.live and survivor.tags == {"a": "b"}


def test_a_tombstone_expires_through_the_table_s_ttl_and_its_pending_drop_does_not(
    aws_settings: Settings, store: QueueStore, partition: int
) -> None:
    # given a deleted queue
    record = _live(store, partition)
    store.tombstone(record, record.evolve(deleted_at=DELETED_AT))
    dynamodb = session.client("dynamodb", aws_settings)
    # then its tombstone carries the table's TTL attribute, an hour past the deletion
    ttl = dynamodb.describe_time_to_live(TableName=aws_settings.queues_table)["TimeToLiveDescription"]
    assert (ttl["TimeToLiveStatus"], ttl["AttributeName"]) == ("ENABLED", "expires_at")
    item = dynamodb.get_item(
        TableName=aws_settings.queues_table,
        Key={"account": {"S": record.account}, "name": {"S": record.name}},
        ConsistentRead=True,
    )["Item"]
    assert int(item["expires_at"]["N"]) == int(DELETED_AT) + TOMBSTONE_LIFETIME_SECONDS
    # while the pending drop, which its worker must still act on, never expires
    drops = dynamodb.query(
        TableName=aws_settings.queues_table,
        KeyConditionExpression="account = :a",
        ExpressionAttributeValues={":a": {"S": DROPS_ACCOUNT}},
        ConsistentRead=True,
    )["Items"]
    mine = [d for d in drops if d["queue_id"]["S"] == record.queue_id]
    assert len(mine) == 1 and "expires_at" not in mine[0]
    # and a live queue has no expiry at all
    live = _live(store, partition, name="alive")
    raw = dynamodb.get_item(
        TableName=aws_settings.queues_table,
        Key={"account": {"S": live.account}, "name": {"S": live.name}},
        ConsistentRead=True,
    )["Item"]
    assert "expires_at" not in raw
