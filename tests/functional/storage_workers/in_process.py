"""In-process workers for functional tests, and their peers: partitions and queues registered by hand
instead of read from DynamoDB."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

from ferrymq.rpc.client import WorkerClient
from ferrymq.storage.peers import LeaderClients, QueueTarget
from ferrymq.storage.server import StorageWorker, WorkerConfig
from tests.support.engine_requests import RECEIPT_KEY


class StandInPeers(LeaderClients):
    def __init__(self) -> None:
        super().__init__(connect_timeout=1.0)
        self.addresses: dict[int, tuple[str, int]] = {}
        self.queues: dict[str, QueueTarget] = {}

    def add_worker(self, partition: int, host: str, port: int) -> None:
        self.addresses[partition] = (host, port)

    def add_queue(self, target: QueueTarget) -> None:
        self.queues[target.arn] = target

    def drop_queue(self, arn: str) -> None:
        self.queues.pop(arn, None)

    async def leader_address(self, partition: int) -> tuple[str, int] | None:
        return self.addresses.get(partition)

    async def queue(self, arn: str) -> QueueTarget | None:
        return self.queues.get(arn)


@asynccontextmanager
async def worker(
    data_dir: Path,
    *,
    partition: int = 0,
    partitions: tuple[int, ...] | None = None,
    port: int = 0,
    peers: StandInPeers | None = None,
) -> AsyncIterator[tuple[StorageWorker, WorkerClient]]:
    """A worker serving ``partitions`` (or only ``partition``) on loopback (a free port unless ``port`` names
    one; hand-overs held 1 s, not 10) and a client for it, both closed on exit."""
    served = partitions if partitions is not None else (partition,)
    server = StorageWorker(
        WorkerConfig(data_dir=data_dir, partitions=served, port=port, register=False, transfer_hold_seconds=1),
        dict.fromkeys(served, RECEIPT_KEY),
        peers=peers,
    )
    host, bound = await server.start()
    client = WorkerClient(host, bound, connect_timeout=1.0)
    try:
        yield server, client
    finally:
        await client.close()
        await server.close()
