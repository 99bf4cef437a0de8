"""Dispatch to storage workers: one persistent, pipelined connection per worker, shared by all requests."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import TypeVar

from ferrymq.aws.queue_store import QueueRecord
from ferrymq.errors import ServiceUnavailable
from ferrymq.rpc.client import WorkerClient
from functions.metadata.partitions import PartitionDirectory

T = TypeVar("T")


class Dispatcher:
    def __init__(self, directory: PartitionDirectory, *, connect_timeout: float) -> None:
        self._directory = directory
        self._connect_timeout = connect_timeout
        self._clients: dict[tuple[str, int], WorkerClient] = {}

    async def _client(self, partition: int) -> WorkerClient:
        address = await self._directory.leader(partition)
        key = (address.host, address.port)
        client = self._clients.get(key)
        if client is None:
            client = WorkerClient(address.host, address.port, connect_timeout=self._connect_timeout)
            self._clients[key] = client
        return client

    async def call(self, queue: QueueRecord, op: Callable[[WorkerClient], Awaitable[T]], *, idempotent: bool) -> T:
        """Run ``op`` against the worker leading the queue's partition.

        When the worker cannot be reached the cached leader is forgotten, so a restarted worker on a new
        address is found; idempotent operations are then retried once at once.  Sends are not retried here:
        the client's own retry of a 503 is what SQS clients expect.
        """
        try:
            return await op(await self._client(queue.partition))
        except ServiceUnavailable:
            self._directory.forget(queue.partition)
            if not idempotent:
                raise
        return await op(await self._client(queue.partition))

    async def close(self) -> None:
        for client in self._clients.values():
            await client.close()
        self._clients.clear()
