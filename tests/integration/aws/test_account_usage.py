"""Each account's count of queues and shards against DynamoDB's API (the durable stand-in, or the configured
endpoint): conditional takes that no race passes, releases that never go below zero, and usage items that the
catalog's scan of every queue passes over."""

from __future__ import annotations

import asyncio
import uuid
from concurrent.futures import ThreadPoolExecutor

import pytest

from ferrymq.aws import session
from ferrymq.aws.account_usage import AccountUsage, AccountUsageStore, OverAccountLimit, UsageNotCounted
from ferrymq.aws.queue_store import QueueStore
from ferrymq.clock import ManualClock
from ferrymq.errors import OverLimit
from ferrymq.metadata.account_quota import AccountQuota
from ferrymq.metadata.catalog import QueueCatalog
from ferrymq.settings import Settings


def new_account() -> str:
    return f"4{uuid.uuid4().int % 10**11:011d}"


@pytest.fixture
def usage(aws_settings: Settings) -> AccountUsageStore:
    return AccountUsageStore(session.client("dynamodb", aws_settings), aws_settings.queues_table)


def test_units_are_taken_only_after_a_first_count_and_only_within_both_limits(usage: AccountUsageStore) -> None:
    account = new_account()
    # given an account never counted, then a take is refused until it is seeded, and a second seed changes nothing
    with pytest.raises(UsageNotCounted):
        usage.take(account, 1, 1, max_queues=3, max_shards=5)
    usage.seed(account, 1, 2)
    usage.seed(account, 0, 0)
    assert usage.get(account) == AccountUsage(account, 1, 2)
    # when units are taken, then either limit refuses what would pass it, with the counts as they are
    assert usage.take(account, 1, 3, max_queues=3, max_shards=5) == AccountUsage(account, 2, 5)
    with pytest.raises(OverAccountLimit) as over:
        usage.take(account, 0, 1, max_queues=3, max_shards=5)
    assert over.value.usage == AccountUsage(account, 2, 5)
    with pytest.raises(OverAccountLimit):
        usage.take(account, 1, 0, max_queues=2, max_shards=5)
    # and a shard-only take ignores a queue count already over a lowered queue limit
    assert usage.take(account, 0, 1, max_queues=1, max_shards=6) == AccountUsage(account, 2, 6)
    # when units are released, then the counts go down, and a release past zero changes nothing
    usage.release(account, 1, 4)
    usage.release(account, 5, 5)
    assert usage.get(account) == AccountUsage(account, 1, 2)


def test_racing_takes_never_pass_the_limit(usage: AccountUsageStore) -> None:
    account = new_account()
    usage.seed(account, 0, 0)

    def take(_: int) -> bool:
        try:
            usage.take(account, 1, 2, max_queues=100, max_shards=21)
        except OverAccountLimit:
            return False
        return True

    with ThreadPoolExecutor(max_workers=16) as pool:
        taken = sum(pool.map(take, range(32)))
    assert taken == 10
    assert usage.get(account) == AccountUsage(account, 10, 20)


def test_the_catalog_counts_an_account_once_and_its_scan_passes_over_usage_items(
    aws_settings: Settings, usage: AccountUsageStore,
) -> None:
    # given a catalog with limits of 2 queues and 3 shards, and an account it has not counted
    store = QueueStore(session.client("dynamodb", aws_settings), aws_settings.queues_table)
    catalog: QueueCatalog

    async def held(account: str) -> tuple[int, int]:
        return await catalog.held(account, ["us-east-1"])

    catalog = QueueCatalog(store, ManualClock(), partitions=4, ttl=30, region="us-east-1",
                           quota=AccountQuota(usage, held, max_queues=2, max_shards=3))
    account = new_account()

    async def scenario() -> set[str]:
        # when it creates queues, then the second passing the shard limit is refused and leaves nothing
        await catalog.create(account, "wide", {"FerryMQShardCount": "2"}, {})
        with pytest.raises(OverLimit):
            await catalog.create(account, "wider", {"FerryMQShardCount": "2"}, {})
        await catalog.create(account, "plain", {}, {})
        # and the scan of every queue reads the usage items' table without taking them for queues
        names: set[str] = set()
        start = None
        while True:
            records, start = await catalog.scan(1000, start)
            names |= {r.name for r in records if r.account == account}
            if start is None:
                return names

    assert asyncio.run(scenario()) == {"wide", "plain"}
    assert usage.get(account) == AccountUsage(account, 2, 3)
