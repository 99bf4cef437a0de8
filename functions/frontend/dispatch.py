"""Dispatch to storage workers: one persistent, pipelined connection per worker leading a partition, shared by
all requests (the clients and the leader lookup are :class:`~ferrymq.rpc.leaders.LeaderClients`).

Each worker is walled off from the others: at most ``max_in_flight_per_worker`` requests are outstanding on
one worker (more wait briefly for room, then are answered ServiceUnavailable), and a circuit breaker per
worker stops sending to one that has left several requests in a row unanswered. A hung or dead worker then
holds up only the requests for the partitions it leads, and only for the time a failover takes.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TypeVar

from ferrymq.aws.queue_store import QueueRecord
from ferrymq.bulkhead import Bulkhead
from ferrymq.circuit_breaker import CircuitBreaker
from ferrymq.clock import Clock, SystemClock
from ferrymq.errors import NotLeader, QueueDoesNotExist, ServiceUnavailable, SqsError
from ferrymq.limits import RESEND_HORIZON_MS
from ferrymq.rpc.client import WorkerClient, WorkerConnectionLost, WorkerTimeout, WorkerUnreachable
from ferrymq.rpc.leaders import LeaderClients

T = TypeVar("T")


class WorkerShunned(WorkerUnreachable):
    """The worker's circuit breaker is open, or it has as many requests outstanding as it may: nothing was sent."""


@dataclass(frozen=True)
class WorkerLimits:
    """How each worker is walled off (see the module docstring)."""

    max_in_flight: int = 4096
    max_wait_seconds: float = 1.0
    breaker_failures: int = 3
    breaker_cooldown_seconds: float = 1.0


@dataclass
class _Wall:
    bulkhead: Bulkhead
    breaker: CircuitBreaker


class Dispatcher:
    def __init__(
        self,
        leaders: LeaderClients,
        *,
        on_queue_gone: Callable[[QueueRecord], None] | None = None,
        failover_seconds: float = 0.0,
        clock: Clock | None = None,
        limits: WorkerLimits | None = None,
    ) -> None:
        """``on_queue_gone``: told when a worker answers that a queue id is gone (deleted since this front end
        cached the queue), so the cache is dropped and the next request reads the catalog.
        ``failover_seconds``: how long a request may wait for a partition's next leader (a lease and a bit: the
        time an election takes) before it is answered ServiceUnavailable; at most half the resend horizon, so
        that a send resent after an unknown outcome always reaches a worker that still remembers what the first
        attempt stored, even if a consumer has deleted it since."""
        self._leaders = leaders
        self._on_queue_gone = on_queue_gone
        self._failover_seconds = min(failover_seconds, RESEND_HORIZON_MS / 2000)
        self._clock = clock or SystemClock()
        self._limits = limits or WorkerLimits()
        self._walls: dict[tuple[str, int], _Wall] = {}
        """Per worker address; pruned as new addresses come (a restarted worker listens on a new port)."""

    @property
    def walled_workers(self) -> int:
        """How many worker addresses this dispatcher keeps a bulkhead and breaker for."""
        return len(self._walls)

    def breaker(self, client: WorkerClient) -> CircuitBreaker:
        return self._wall(client).breaker

    def _wall(self, client: WorkerClient) -> _Wall:
        where = (client.host, client.port)
        wall = self._walls.get(where)
        if wall is None:
            self._prune_walls()
            limits = self._limits
            wall = self._walls[where] = _Wall(
                Bulkhead(f"storage worker {client.host}:{client.port}", max_concurrent=limits.max_in_flight,
                         max_wait_seconds=limits.max_wait_seconds),
                CircuitBreaker(self._clock, failures=limits.breaker_failures,
                               cooldown_seconds=limits.breaker_cooldown_seconds),
            )
        return wall

    def _prune_walls(self) -> None:
        """Drop the walls of workers no partition leads as far as the clients know, with nothing in flight:
        without this every address a worker ever had (a restart picks a new port) would be kept for good."""
        held = self._leaders.workers()
        for where in [w for w, wall in self._walls.items() if w not in held and not wall.bulkhead.in_use]:
            del self._walls[where]

    async def _through_wall(self, client: WorkerClient, attempt: Callable[[WorkerClient], Awaitable[T]]) -> T:
        """``attempt(client)`` within the worker's bulkhead and breaker; refused by either, it was not sent."""
        wall = self._wall(client)
        if not wall.breaker.allow():
            raise WorkerShunned(f"Storage worker {client.host}:{client.port} is not answering; not sent.")
        if not wall.bulkhead.try_acquire():
            try:
                await wall.bulkhead.acquire()
            except ServiceUnavailable as exc:
                raise WorkerShunned(exc.message) from None
        try:
            result = await attempt(client)
        except (WorkerTimeout, WorkerUnreachable, WorkerConnectionLost):
            wall.breaker.failed()
            raise
        except SqsError:
            wall.breaker.succeeded()  # an answer, if a refusal: the worker works
            raise
        finally:
            wall.bulkhead.release()
        wall.breaker.succeeded()
        return result

    async def call(
        self,
        queue: QueueRecord,
        op: Callable[[WorkerClient], Awaitable[T]],
        *,
        idempotent: bool,
        resend: Callable[[WorkerClient], Awaitable[T]] | None = None,
        partition: int | None = None,
    ) -> T:
        """Run ``op`` against the worker leading the queue's partition (``partition``: one of its shards'),
        through a failover if need be.

        A worker that answers NotLeader, or cannot be reached, did nothing: the leader is looked up again and
        the request goes to it, until ``failover_seconds`` have passed.  When the outcome is unknown (a
        timeout, a lost connection, a leader that stepped down before committing) an idempotent operation is
        retried the same way; a send is retried as ``resend(client)``, with the same message ids, which the
        worker turns into the first attempt's result for the messages that attempt stored (by id: no clock of
        this front end is compared with the workers'); anything else is answered
        ServiceUnavailable (SQS clients retry a 503).  After a timeout the same worker is never asked again:
        it would only make the caller wait out a second deadline.
        """
        if partition is None:
            partition = queue.partition
        deadline = self._clock.monotonic() + self._failover_seconds
        pause = _FIRST_PAUSE_SECONDS
        attempt = op
        tries = 0
        hung: WorkerClient | None = None
        while True:
            tries += 1
            sent = False
            try:
                # The client held for a leader that is known comes without a coroutine of its own.
                client = self._leaders.known(partition) or await self._leaders.client(partition)
                if client is hung:
                    raise WorkerTimeout("The storage worker that timed out still leads the partition.")
                sent = True
                return await self._through_wall(client, attempt)
            except QueueDoesNotExist:
                if self._on_queue_gone is not None:
                    self._on_queue_gone(queue)
                raise
            except ServiceUnavailable as exc:
                self._leaders.forget(partition)
                if sent and not isinstance(exc, (NotLeader, WorkerUnreachable)):
                    # The outcome is unknown: only what can be repeated safely is.
                    if resend is not None and not idempotent:
                        attempt = resend
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

    async def on_shard(
        self,
        queue: QueueRecord,
        index: int,
        op: Callable[[WorkerClient, int, str], Awaitable[T]],
        *,
        idempotent: bool,
        resend: Callable[[WorkerClient, int, str], Awaitable[T]] | None = None,
    ) -> T:
        """:meth:`call` for shard ``index`` of the queue: ``op(worker, partition, storage id)``, and
        ``resend(worker, partition, storage id)``."""
        partition, queue_id = queue.shards[index].partition, queue.storage_id(index)
        return await self.call(
            queue,
            lambda w: op(w, partition, queue_id),
            idempotent=idempotent,
            resend=None if resend is None else (lambda w: resend(w, partition, queue_id)),
            partition=partition,
        )

    async def on_every_shard(
        self, queue: QueueRecord, op: Callable[[WorkerClient, int, str], Awaitable[T]], *, idempotent: bool
    ) -> list[T]:
        """:meth:`on_shard` for every shard of the queue at once; the answers in shard order."""
        return list(await asyncio.gather(
            *(self.on_shard(queue, index, op, idempotent=idempotent) for index in range(len(queue.shards)))
        ))

    async def ping_leader(self, partition: int) -> None:
        """Ask the worker leading ``partition`` whether it answers (within the worker RPC's deadline); raises
        ServiceUnavailable when no leader is known, or it cannot be reached or does not answer."""
        client = await self._leaders.client(partition)
        try:
            await self._through_wall(client, lambda c: c.ping())
        except ServiceUnavailable:
            self._leaders.forget(partition)
            raise

    async def close(self) -> None:
        await self._leaders.close()


_FIRST_PAUSE_SECONDS = 0.05
_MAX_PAUSE_SECONDS = 0.5
