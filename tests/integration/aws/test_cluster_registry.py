"""The cluster registry and the placement of new queues on clusters, against a real DynamoDB API (the durable
stand-in, or FERRYMQ_TEST_AWS_ENDPOINT). Tables of their own: a registered cluster would otherwise take the
queues other tests create through a whole front end."""

from __future__ import annotations

import asyncio
import uuid
from concurrent.futures import ThreadPoolExecutor

import pytest

from ferrymq.aws import session
from ferrymq.aws.clusters import ClusterFull, ClusterRegistry
from ferrymq.aws.queue_store import QueueStore
from ferrymq.clock import ManualClock
from ferrymq.errors import OverLimit
from ferrymq.metadata.catalog import QueueCatalog
from ferrymq.metadata.queue_placement import QueuePlacement
from ferrymq.settings import Settings

ACCOUNT = "123456789012"


@pytest.fixture(scope="module")
def own_settings(aws_settings: Settings) -> Settings:
    from ferrymq.infra.bootstrap import bootstrap

    settings = aws_settings.with_(table_prefix=f"ferrymq-clusters-{uuid.uuid4().hex[:6]}-")
    bootstrap(settings)
    return settings


@pytest.fixture(scope="module")
def registry(own_settings: Settings) -> ClusterRegistry:
    return ClusterRegistry.from_settings(own_settings)


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def test_registering_again_changes_partitions_and_capacity_and_keeps_the_count(registry: ClusterRegistry) -> None:
    name = unique("c")
    first = registry.register(name, [2, 0, 1], 5)
    assert (first.partitions, first.max_queues, first.queues) == ((0, 1, 2), 5, 0)
    registry.take(first, 2)
    again = registry.register(name, [0, 1, 2, 3], 10)
    assert (again.partitions, again.max_queues, again.queues) == ((0, 1, 2, 3), 10, 2)
    assert again in registry.all()


def test_a_cluster_never_takes_more_queues_than_its_capacity(registry: ClusterRegistry) -> None:
    info = registry.register(unique("c"), [0], 3)
    for expected in (1, 2, 3):
        assert registry.take(info).queues == expected
    with pytest.raises(ClusterFull):
        registry.take(info)
    # a deleted queue gives its room back, and a release past zero changes nothing
    registry.release(info.name)
    assert registry.take(info).queues == 3
    other = registry.register(unique("c"), [0], 3)
    registry.release(other.name)
    assert next(c for c in registry.all() if c.name == other.name).queues == 0


def test_a_take_against_a_capacity_changed_since_it_was_read_is_refused(registry: ClusterRegistry) -> None:
    read = registry.register(unique("c"), [0], 10)
    registry.register(read.name, [0], 1)
    with pytest.raises(ClusterFull):
        registry.take(read, 1)
    fresh = next(c for c in registry.all() if c.name == read.name)
    assert registry.take(fresh).queues == 1


def test_concurrent_takes_fill_a_cluster_exactly_to_its_capacity(registry: ClusterRegistry) -> None:
    info = registry.register(unique("c"), [0], 25)

    def take_one(_: int) -> bool:
        for _ in range(50):  # a take against a stale read is refused: read again, as placement does
            current = next(c for c in registry.all() if c.name == info.name)
            if current.room == 0:
                return False
            try:
                registry.take(current)
                return True
            except ClusterFull:
                continue
        return False

    with ThreadPoolExecutor(8) as pool:
        taken = sum(pool.map(take_one, range(40)))
    assert taken == 25
    assert next(c for c in registry.all() if c.name == info.name).queues == 25


def test_new_queues_go_to_the_emptiest_cluster_and_none_is_created_once_all_are_full(own_settings: Settings) -> None:
    # given two clusters of their own tables, one already holding two queues
    settings = own_settings.with_(table_prefix=f"ferrymq-placing-{uuid.uuid4().hex[:6]}-")
    from ferrymq.infra.bootstrap import bootstrap

    bootstrap(settings)
    registry = ClusterRegistry.from_settings(settings)
    a = registry.register("a", [0, 1], 3)
    registry.register("b", [10, 11], 3)
    registry.take(a, 2)
    clock = ManualClock()
    catalog = QueueCatalog(
        QueueStore(session.client("dynamodb", settings), settings.queues_table), clock, partitions=1, ttl=0.0,
        region="us-east-1", placement=QueuePlacement(registry, clock, partitions=1, cache_seconds=0.0),
    )

    async def scenario() -> None:
        # when four queues are created, each goes to the cluster with the lower share in use (a tie to the first
        # by name): b, b (a is at 2/3), a (both at 2/3), b
        made = [await catalog.create(ACCOUNT, f"q{i}", {}, {}) for i in range(4)]
        assert [q.cluster for q in made] == ["b", "b", "a", "b"]
        # on one of its cluster's partitions
        assert all(q.partition in ((0, 1) if q.cluster == "a" else (10, 11)) for q in made)
        # and both are full: the next create is refused, and nothing was written for it
        with pytest.raises(OverLimit) as refused:
            await catalog.create(ACCOUNT, "q4", {}, {})
        assert refused.value.status == 403
        assert [q.name for q in await catalog.list(ACCOUNT, "", None, None)] == ["q0", "q1", "q2", "q3"]
        # and creating an existing queue again takes no room
        assert (await catalog.create(ACCOUNT, "q0", {}, {})).queue_id == made[0].queue_id
        # when a queue on b is deleted, its room comes back and the next queue takes it
        await catalog.delete(ACCOUNT, "q1")
        assert (await catalog.create(ACCOUNT, "q5", {}, {})).cluster == "b"

    asyncio.run(scenario())
    assert {c.name: c.queues for c in registry.all()} == {"a": 3, "b": 3}
