"""The queue catalog's rules against DynamoDB's API (moto's server, or the configured endpoint)."""

import asyncio
import itertools

import pytest

from ferrymq.aws import session
from ferrymq.aws.credentials import CredentialStore
from ferrymq.aws.queue_store import QueueStore
from ferrymq.clock import ManualClock
from ferrymq.errors import PurgeQueueInProgress, QueueDeletedRecently, QueueDoesNotExist, QueueNameExists
from ferrymq.settings import Settings
from functions.metadata.catalog import QueueCatalog

_accounts = itertools.count(100000000000)


@pytest.fixture
def catalog(aws_settings: Settings) -> tuple[QueueCatalog, ManualClock, str]:
    clock = ManualClock()
    store = QueueStore(session.client("dynamodb", aws_settings), aws_settings.queues_table)
    return QueueCatalog(store, clock, partitions=4, ttl=30), clock, str(next(_accounts))


def test_create_is_idempotent_for_the_same_attributes(catalog: tuple[QueueCatalog, ManualClock, str]) -> None:
    cat, _, account = catalog
    # given a queue created with a visibility timeout
    first = asyncio.run(cat.create(account, "orders", {"VisibilityTimeout": "60"}, {}))
    # when it is created again with the same (or default-equal) attributes, then the same queue comes back
    again = asyncio.run(cat.create(account, "orders", {"VisibilityTimeout": "60", "DelaySeconds": "0"}, {}))
    assert again.queue_id == first.queue_id
    assert 0 <= first.partition < 4
    # when it is created with a different value, then QueueNameExists
    with pytest.raises(QueueNameExists):
        asyncio.run(cat.create(account, "orders", {"VisibilityTimeout": "61"}, {}))


def test_delete_then_create_within_60_seconds(catalog: tuple[QueueCatalog, ManualClock, str]) -> None:
    cat, clock, account = catalog
    original = asyncio.run(cat.create(account, "q", {}, {}))
    asyncio.run(cat.delete(account, "q"))
    with pytest.raises(QueueDoesNotExist):
        asyncio.run(cat.get(account, "q"))
    with pytest.raises(QueueDeletedRecently):
        asyncio.run(cat.create(account, "q", {}, {}))
    clock.advance(61)
    recreated = asyncio.run(cat.create(account, "q", {}, {}))
    assert recreated.queue_id != original.queue_id
    assert asyncio.run(cat.get(account, "q")).queue_id == recreated.queue_id


def test_list_by_prefix_with_paging(catalog: tuple[QueueCatalog, ManualClock, str]) -> None:
    cat, _, account = catalog
    for name in ["a1", "a2", "a3", "b1"]:
        asyncio.run(cat.create(account, name, {}, {}))
    asyncio.run(cat.delete(account, "a2"))
    assert [q.name for q in asyncio.run(cat.list(account, "a", None, None))] == ["a1", "a3"]
    assert [q.name for q in asyncio.run(cat.list(account, "", 2, None))] == ["a1", "a3"]
    assert [q.name for q in asyncio.run(cat.list(account, "", 2, "a3"))] == ["b1"]


def test_purge_cooldown(catalog: tuple[QueueCatalog, ManualClock, str]) -> None:
    cat, clock, account = catalog
    asyncio.run(cat.create(account, "p", {}, {}))
    asyncio.run(cat.mark_purged(account, "p"))
    with pytest.raises(PurgeQueueInProgress, match="Only one PurgeQueue operation on p"):
        asyncio.run(cat.mark_purged(account, "p"))
    clock.advance(60)
    asyncio.run(cat.mark_purged(account, "p"))


def test_set_attributes_merges_and_reads_back(catalog: tuple[QueueCatalog, ManualClock, str]) -> None:
    cat, clock, account = catalog
    asyncio.run(cat.create(account, "s", {"DelaySeconds": "5"}, {}))
    clock.advance(10)
    updated = asyncio.run(cat.set_attributes(account, "s", {"VisibilityTimeout": "120"}))
    assert updated.attributes == {"DelaySeconds": "5", "VisibilityTimeout": "120"}
    assert updated.modified_at > updated.created_at
    assert asyncio.run(cat.get(account, "s")).attributes == updated.attributes


def test_credential_store_round_trip(aws_settings: Settings) -> None:
    store = CredentialStore.from_settings(aws_settings)
    created = store.create("123456789012", "alice")
    assert created.access_key_id.startswith("AKIA") and len(created.secret_access_key) == 40
    assert store.get(created.access_key_id) == created
    assert created.principal_id.startswith("AIDA")
    assert created in store.list()
    assert store.delete(created.access_key_id) is True
    assert store.get(created.access_key_id) is None
    assert store.delete(created.access_key_id) is False
