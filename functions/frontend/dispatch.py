"""Dispatch to storage workers: one persistent, pipelined connection per worker leading a partition, shared by
all requests (the clients and the leader lookup are :class:`~ferrymq.rpc.leaders.LeaderClients`)."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import TypeVar

from ferrymq.aws.queue_store import QueueRecord
from ferrymq.clock import Clock, SystemClock
from ferrymq.errors import NotLeader, QueueDoesNotExist, ServiceUnavailable
from ferrymq.rpc.client import WorkerClient, WorkerTimeout, WorkerUnreachable
from ferrymq.rpc.leaders import LeaderClients

T = TypeVar("T")


class Dispatcher:
    def __init__(
        self,
        leaders: LeaderClients,
        *,
        on_queue_gone: Callable[[QueueRecord], None] | None = None,
        failover_seconds: float = 0.0,
        clock: Clock | None = None,
    ) -> None:
        """``on_queue_gone``: told when a worker answers that a queue id is gone (deleted since this front end
        cached the queue), so the cache is dropped and the next request reads the catalog.
        ``failover_seconds``: how long a request may wait for a partition's next leader (a lease and a bit: the
        time an election takes) before it is answered ServiceUnavailable."""
        self._leaders = leaders
        self._on_queue_gone = on_queue_gone
        self._failover_seconds = failover_seconds
        self._clock = clock or SystemClock()

    async def call(
        self,
        queue: QueueRecord,
        op: Callable[[WorkerClient], Awaitable[T]],
        *,
        idempotent: bool,
        resend: Callable[[WorkerClient, int], Awaitable[T]] | None = None,
    ) -> T:
        """Run ``op`` against the worker leading the queue's partition, through a failover if need be.

        A worker that answers NotLeader, or cannot be reached, did nothing: the leader is looked up again and
        the request goes to it, until ``failover_seconds`` have passed.  When the outcome is unknown (a
        timeout, a lost connection, a leader that stepped down before committing) an idempotent operation is
        retried the same way; a send is retried as ``resend(client, since_ms)``, which the worker turns into
        the first attempt's result for the messages that attempt stored; anything else is answered
        ServiceUnavailable (SQS clients retry a 503).  After a timeout the same worker is never asked again:
        it would only make the caller wait out a second deadline.
        """
        first_attempt_ms = int(self._clock.now() * 1000)
        deadline = self._clock.monotonic() + self._failover_seconds
        pause = _FIRST_PAUSE_SECONDS
        attempt = op
        tries = 0
        hung: WorkerClient | None = None
        while True:
            tries += 1
            sent = False
            try:
                client = await self._leaders.client(queue.partition)
                if client is hung:
                    raise WorkerTimeout("The storage worker that timed out still leads the partition.")
                sent = True
                return await attempt(client)
            except QueueDoesNotExist:
                if self._on_queue_gone is not None:
                    self._on_queue_gone(queue)
                raise
            except ServiceUnavailable as exc:
                self._leaders.forget(queue.partition)
                if sent and not isinstance(exc, (NotLeader, WorkerUnreachable)):
                    # The outcome is unknown: only what can be repeated safely is.
                    if resend is not None and not idempotent:
                        attempt = _resending(resend, first_attempt_ms - _CLOCK_ALLOWANCE_MS)
                    elif not idempotent:
                        raise
                    if isinstance(exc, WorkerTimeout):
                        hung = client
                # One retry at once whatever the deadline (a worker restarted on a new address is found by it).
                if tries > 1:
                    if self._clock.monotonic() + pause > deadline:
                        raise
                    await asyncio.sleep(pause)
                    pause = min(pause * 2, _MAX_PAUSE_SECONDS)

    async def close(self) -> None:
        await self._leaders.close()


_FIRST_PAUSE_SECONDS = 0.05
_MAX_PAUSE_SECONDS = 0.5
_CLOCK_ALLOWANCE_MS = 2_000
"""How far the workers' clocks (which stamp sent messages) may be behind this front end's."""


def _resending(
    resend: Callable[[WorkerClient, int], Awaitable[T]], since_ms: int
) -> Callable[[WorkerClient], Awaitable[T]]:
    async def attempt(client: WorkerClient) -> T:
        return await resend(client, since_ms)

    return attempt
