"""ClusterPeers over stand-in partition maps and queue catalogs: which failures become ServiceUnavailable (a
move task waits on those), which propagate (the task ends), and how much the peers keep."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from botocore.exceptions import ClientError, EndpointConnectionError, ReadTimeoutError

from ferrymq.aws.partitions import WorkerAddress
from ferrymq.aws.queue_store import QueueRecord
from ferrymq.clock import ManualClock
from ferrymq.errors import ServiceUnavailable
from ferrymq.storage.peers import ClusterPeers

ARN = "arn:aws:sqs:us-east-1:000000000000:{}"


class Catalog:
    """A queue store holding the queues named, or raising ``error`` on every read."""

    def __init__(self, *names: str, error: BaseException | None = None) -> None:
        self.records = {
            name: QueueRecord(account="000000000000", name=name, queue_id=f"id-{name}", partition=4) for name in names
        }
        self.error = error
        self.reads: list[str] = []

    def get(self, account: str, name: str) -> QueueRecord | None:
        self.reads.append(name)
        if self.error is not None:
            raise self.error
        return self.records.get(name)


class Map:
    """A partition map whose entries the test sets."""

    def __init__(self) -> None:
        self.addresses: dict[int, WorkerAddress] = {}
        self.error: BaseException | None = None

    def lookup(self, partition: int) -> WorkerAddress | None:
        if self.error is not None:
            raise self.error
        return self.addresses.get(partition)


def peers(
    catalog: Any = None, partition_map: Any = None, clock: ManualClock | None = None, **options: Any
) -> ClusterPeers:
    return ClusterPeers(
        partition_map=lambda: partition_map or Map(),
        queue_store=lambda: catalog or Catalog(),
        clock=clock or ManualClock(),
        **options,
    )


def throttled() -> ClientError:
    return ClientError({"Error": {"Code": "ThrottlingException", "Message": "slow down"}}, "GetItem")


def test_a_bug_in_the_queue_lookup_propagates_unchanged() -> None:
    # given a queue store that fails with a KeyError (a bug, not an outage)
    p = peers(Catalog(error=KeyError("attributes")))
    # when a queue is looked up, then the KeyError itself reaches the caller
    with pytest.raises(KeyError):
        asyncio.run(p.queue(ARN.format("q")))


def test_a_refused_catalog_call_propagates_unchanged() -> None:
    denied = ClientError({"Error": {"Code": "AccessDeniedException", "Message": "no"}}, "GetItem")
    with pytest.raises(ClientError):
        asyncio.run(peers(Catalog(error=denied)).queue(ARN.format("q")))


@pytest.mark.parametrize(
    "outage",
    [
        EndpointConnectionError(endpoint_url="http://dynamodb"),
        ReadTimeoutError(endpoint_url="http://dynamodb"),
        throttled(),
        ServiceUnavailable("as an adapter reports it"),
    ],
    ids=["unreachable", "read-timeout", "throttled", "adapter"],
)
def test_an_outage_of_the_catalog_is_service_unavailable(outage: BaseException) -> None:
    # given a queue catalog that cannot be read right now
    p = peers(Catalog(error=outage))
    # when a queue is looked up, then the caller is told to wait and try again
    with pytest.raises(ServiceUnavailable):
        asyncio.run(p.queue(ARN.format("q")))


def test_a_bug_in_the_leader_lookup_propagates_and_an_outage_is_service_unavailable() -> None:
    async def scenario() -> None:
        partition_map = Map()
        p = peers(partition_map=partition_map)
        partition_map.error = KeyError("host")
        with pytest.raises(KeyError):
            await p.worker(3)
        partition_map.error = throttled()
        with pytest.raises(ServiceUnavailable):
            await p.worker(3)

    asyncio.run(scenario())


def test_queue_lookups_are_cached_for_a_while_including_missing_queues() -> None:
    async def scenario() -> None:
        # given a catalog with queue "a" and no queue "gone"
        catalog, clock = Catalog("a"), ManualClock()
        p = peers(catalog, clock=clock, cache_seconds=2)
        # when each is looked up twice within the cache time
        first = await p.queue(ARN.format("a"))
        assert await p.queue(ARN.format("a")) == first
        assert await p.queue(ARN.format("gone")) is None
        assert await p.queue(ARN.format("gone")) is None
        # then the catalog was read once for each
        assert catalog.reads == ["a", "gone"]
        assert first is not None and (first.queue_id, first.partition) == ("id-a", 4)
        # and once the cache time has passed it is read again
        clock.advance(2)
        await p.queue(ARN.format("a"))
        assert catalog.reads == ["a", "gone", "a"]

    asyncio.run(scenario())


def test_queue_lookups_are_bounded_and_the_oldest_go_first() -> None:
    async def scenario() -> None:
        # given peers keeping at most two queue lookups
        catalog = Catalog("a", "b", "c")
        p = peers(catalog, max_queues=2)
        # when three queues are looked up
        for name in ("a", "b", "c"):
            await p.queue(ARN.format(name))
        # then the newest two are answered from the cache and the oldest is read again
        await p.queue(ARN.format("c"))
        await p.queue(ARN.format("b"))
        await p.queue(ARN.format("a"))
        assert catalog.reads == ["a", "b", "c", "a"]

    asyncio.run(scenario())


def test_a_partition_keeps_one_client_as_its_leader_moves() -> None:
    async def scenario() -> None:
        # given a leader for partition 3 and its client
        partition_map = Map()
        partition_map.addresses[3] = WorkerAddress("w", "127.0.0.1", 7000, epoch=1, partition=3)
        p = peers(partition_map=partition_map)
        try:
            old = await p.worker(3)
            # when the leader restarts elsewhere and the client is forgotten after a failure
            partition_map.addresses[3] = WorkerAddress("w", "127.0.0.1", 7001, epoch=2, partition=3)
            await p.forget(3)
            new = await p.worker(3)
            # then the peers hold one client for the partition, for the new address, and closed the old one
            assert p.clients() == {3: new}
            assert new.port == 7001
            assert old.closed
        finally:
            await p.close()
        assert new.closed

    asyncio.run(scenario())
