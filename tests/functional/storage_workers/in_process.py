"""In-process workers for functional tests, and their peers: partitions and queues registered by hand
instead of read from DynamoDB."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

from ferrymq.errors import ServiceUnavailable
from ferrymq.rpc.client import WorkerClient
from storage_workers.peers import QueueTarget
from storage_workers.server import StorageWorker, WorkerConfig


class StandInPeers:
    def __init__(self, partition: int) -> None:
        self.partition = partition
        self.addresses: dict[int, tuple[str, int]] = {}
        self.queues: dict[str, QueueTarget] = {}
        self._clients: dict[int, WorkerClient] = {}

    def add_worker(self, partition: int, host: str, port: int) -> None:
        self.addresses[partition] = (host, port)

    def add_queue(self, target: QueueTarget) -> None:
        self.queues[target.arn] = target

    def drop_queue(self, arn: str) -> None:
        self.queues.pop(arn, None)

    async def worker(self, partition: int) -> WorkerClient:
        client = self._clients.get(partition)
        if client is None:
            address = self.addresses.get(partition)
            if address is None:
                raise ServiceUnavailable(f"No storage worker serves partition {partition}.")
            client = self._clients[partition] = WorkerClient(*address, connect_timeout=1.0)
        return client

    async def forget(self, partition: int) -> None:
        client = self._clients.pop(partition, None)
        if client is not None:
            await client.close()

    async def queue(self, arn: str) -> QueueTarget | None:
        return self.queues.get(arn)

    async def close(self) -> None:
        for partition in list(self._clients):
            await self.forget(partition)


@asynccontextmanager
async def worker(
    data_dir: Path, *, partition: int = 0, peers: StandInPeers | None = None
) -> AsyncIterator[tuple[StorageWorker, WorkerClient]]:
    """A worker on a free loopback port (hand-overs held 1 s, not 10) and a client for it, both closed on exit."""
    server = StorageWorker(
        WorkerConfig(data_dir=data_dir, partition=partition, register=False, transfer_hold_seconds=1), peers=peers
    )
    host, port = await server.start()
    client = WorkerClient(host, port, connect_timeout=1.0)
    try:
        yield server, client
    finally:
        await client.close()
        await server.close()
