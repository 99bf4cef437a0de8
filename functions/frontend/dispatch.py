"""Dispatch to storage workers: one persistent, pipelined connection per worker leading a partition, shared by
all requests (the clients and the leader lookup are :class:`~ferrymq.rpc.leaders.LeaderClients`)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import TypeVar

from ferrymq.aws.queue_store import QueueRecord
from ferrymq.errors import NotLeader, QueueDoesNotExist, ServiceUnavailable
from ferrymq.rpc.client import WorkerClient, WorkerTimeout
from ferrymq.rpc.leaders import LeaderClients

T = TypeVar("T")


class Dispatcher:
    def __init__(self, leaders: LeaderClients, *, on_queue_gone: Callable[[QueueRecord], None] | None = None) -> None:
        """``on_queue_gone``: told when a worker answers that a queue id is gone (deleted since this front end
        cached the queue), so the cache is dropped and the next request reads the catalog."""
        self._leaders = leaders
        self._on_queue_gone = on_queue_gone

    async def call(self, queue: QueueRecord, op: Callable[[WorkerClient], Awaitable[T]], *, idempotent: bool) -> T:
        """Run ``op`` against the worker leading the queue's partition.

        When the worker cannot be reached the leader is looked up again, so a restarted worker on a new
        address is found; idempotent operations are then retried once at once.  After a timeout they are
        retried only if the partition has a new leader by then: the same hung worker would only make the
        caller wait out a second deadline.  Sends are not retried here: the client's own retry of a 503 is
        what SQS clients expect.  A worker that answers NotLeader did nothing, so every operation is retried
        once against the leader looked up afresh.
        """
        client: WorkerClient | None = None
        try:
            client = await self._leaders.client(queue.partition)
            return await op(client)
        except QueueDoesNotExist:
            if self._on_queue_gone is not None:
                self._on_queue_gone(queue)
            raise
        except NotLeader:
            self._leaders.forget(queue.partition)
            retry = await self._leaders.client(queue.partition)
        except ServiceUnavailable as exc:
            self._leaders.forget(queue.partition)
            if not idempotent:
                raise
            retry = await self._leaders.client(queue.partition)
            if isinstance(exc, WorkerTimeout) and retry is client:
                raise
        return await op(retry)

    async def close(self) -> None:
        await self._leaders.close()
