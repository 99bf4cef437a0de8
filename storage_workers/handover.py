"""Handing messages to a queue that another worker leads, idempotently by message id.

The sending worker holds the messages in flight (so no consumer takes them meanwhile), sends them with
``WorkerClient.send`` carrying their ``origin``, and removes them only once the other worker acknowledged:
a crash in between leaves them in place, and sending them again later is recognised by the receiving queue as
a resend of the same ids (within its resend window), so no copy is stored twice.

:class:`DeadLetterForwarder` does this for dead-letter redrive on receive; the move-task runner
(:mod:`ferrymq.storage.move_tasks`) does the same for each batch it moves.

Dead-letter hand-overs are bounded.  While a dead-letter queue's worker is slow or unreachable, every receive
after the hold finds the same messages dead again; a message already on its way is not sent a second time,
and no more than ``max_in_flight`` hand-overs run at once.  A message left out stays held and comes back after
the hold, when the next receive offers it again.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Iterable
from typing import Any

from ferrymq.destinations import QueueTarget
from ferrymq.errors import ServiceUnavailable, SqsError
from ferrymq.rpc.messages import Origin, sent_message
from ferrymq.storage.engine import Engine, Outgoing
from ferrymq.storage.log.writer import LogFailed
from ferrymq.storage.peers import Peers

log = logging.getLogger(__name__)

MAX_IN_FLIGHT_HANDOVERS = 64
"""Dead-letter hand-overs running at once, per worker; each carries the dead letters of one receive."""


def handover_message(c: Outgoing) -> dict[str, Any]:
    """``c`` as a ``WorkerClient.send`` message that keeps its history."""
    return sent_message(
        c.id,
        c.body,
        c.attrs,
        c.md5_body,
        c.md5_attrs,
        c.system,
        group=c.group,
        dedup_id=c.dedup_id,
        origin=Origin(c.sent_ts, c.receive_count, c.first_receive_ts),
    )


async def send_to(peers: Peers, target: QueueTarget, messages: list[Outgoing]) -> None:
    """Store ``messages`` in ``target`` on the worker leading its partition; raises ServiceUnavailable."""
    client = await peers.worker(target.partition)
    try:
        await client.send(
            target.partition,
            target.queue_id,
            [handover_message(c) for c in messages],
            retention_seconds=target.retention_seconds,
            fifo=target.fifo,
        )
    except ServiceUnavailable:
        await peers.forget(target.partition)
        raise


class DeadLetterForwarder:
    """Sends messages to dead-letter queues on other workers in the background, one task per receive, at most
    ``max_in_flight`` tasks at once and at most one for each message."""

    def __init__(self, engine: Engine, peers: Peers, *, max_in_flight: int = MAX_IN_FLIGHT_HANDOVERS) -> None:
        self._engine = engine
        self._peers = peers
        self._max_in_flight = max_in_flight
        self._tasks: set[asyncio.Task[None]] = set()
        self._forwarding: set[tuple[str, int]] = set()
        """(queue id, sequence number) of every message a running hand-over carries."""
        self.forwarded = 0
        """Messages handed to other workers' dead-letter queues so far."""
        self.deferred = 0
        """Dead letters left held for a later receive, because they were already on their way or too many
        hand-overs were running."""
        self._full_reported = False

    @property
    def in_flight(self) -> int:
        """Hand-overs running now."""
        return len(self._tasks)

    def submit(self, queue_id: str, target: QueueTarget, messages: list[Outgoing]) -> None:
        fresh = [c for c in messages if (queue_id, c.seq) not in self._forwarding]
        self.deferred += len(messages) - len(fresh)
        if not fresh:
            return
        if len(self._tasks) >= self._max_in_flight:
            self.deferred += len(fresh)
            if not self._full_reported:
                # Once per spell, not per receive: a dead-letter queue's worker that is down makes many.
                self._full_reported = True
                log.warning("%d dead-letter hand-overs are running; further dead letters stay held until one ends",
                            len(self._tasks))
            return
        keys = [(queue_id, c.seq) for c in fresh]
        self._forwarding.update(keys)
        task = asyncio.get_running_loop().create_task(self._forward(queue_id, target, fresh))
        self._tasks.add(task)
        # Released in a callback, not in the coroutine: a task cancelled before it started never runs its body.
        task.add_done_callback(lambda t: self._release(t, keys))

    def _release(self, task: asyncio.Task[None], keys: Iterable[tuple[str, int]]) -> None:
        self._tasks.discard(task)
        self._forwarding.difference_update(keys)
        if len(self._tasks) < self._max_in_flight:
            self._full_reported = False

    async def _forward(self, queue_id: str, target: QueueTarget, messages: list[Outgoing]) -> None:
        try:
            await send_to(self._peers, target, messages)
        except SqsError as exc:
            # The messages stay held in flight; once visible again, the next receive forwards them anew.
            log.warning("dead-letter queue %s on partition %d refused messages: %s", target.queue_id,
                        target.partition, exc.message)
            return
        try:
            self._engine.handed_over(queue_id, [c.seq for c in messages])
        except LogFailed:
            return
        self.forwarded += len(messages)

    async def close(self) -> None:
        for task in list(self._tasks):
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
