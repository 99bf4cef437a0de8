"""Handing messages to a queue that another worker leads, idempotently by message id.

The sending worker holds the messages in flight (so no consumer takes them meanwhile), sends them with
``WorkerClient.send`` carrying their ``origin``, and removes them only once the other worker acknowledged:
a crash in between leaves them in place, and sending them again later is recognised by the receiving queue as
a resend of the same ids (within its resend window), so no copy is stored twice.

:class:`DeadLetterForwarder` does this for dead-letter redrive on receive; the move-task runner
(:mod:`storage_workers.move_tasks`) does the same for each batch it moves.
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass
from typing import Any

from ferrymq.errors import ServiceUnavailable, SqsError
from storage_workers.engine import Engine, Outgoing
from storage_workers.log.writer import LogFailed
from storage_workers.peers import Peers, QueueTarget

log = logging.getLogger(__name__)


def handover_message(c: Outgoing) -> dict[str, Any]:
    """``c`` as a ``WorkerClient.send`` message that keeps its history."""
    return {
        "id": c.id,
        "body": c.body,
        "attrs": c.attrs,
        "md5_body": c.md5_body,
        "md5_attrs": c.md5_attrs,
        "delay": 0,
        "system": c.system,
        "group": c.group,
        "dedup_id": c.dedup_id,
        "origin": {"sent_ts": c.sent_ts, "receive_count": c.receive_count, "first_receive_ts": c.first_receive_ts},
    }


async def send_to(peers: Peers, target: QueueTarget, messages: list[Outgoing]) -> None:
    """Store ``messages`` in ``target`` on the worker leading its partition; raises ServiceUnavailable."""
    client = await peers.worker(target.partition)
    try:
        await client.send(
            target.queue_id,
            [handover_message(c) for c in messages],
            retention_seconds=target.retention_seconds,
            fifo=target.fifo,
        )
    except ServiceUnavailable:
        await peers.forget(target.partition)
        raise


@dataclass(frozen=True, slots=True)
class _Pending:
    queue_id: str
    target: QueueTarget
    messages: list[Outgoing]


class DeadLetterForwarder:
    """Sends messages to dead-letter queues on other workers in the background, one task per receive."""

    def __init__(self, engine: Engine, peers: Peers) -> None:
        self._engine = engine
        self._peers = peers
        self._tasks: set[asyncio.Task[None]] = set()
        self.forwarded = 0
        """Messages handed to other workers' dead-letter queues so far."""

    def submit(self, queue_id: str, target: QueueTarget, messages: list[Outgoing]) -> None:
        task = asyncio.get_running_loop().create_task(self._forward(_Pending(queue_id, target, messages)))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _forward(self, p: _Pending) -> None:
        try:
            await send_to(self._peers, p.target, p.messages)
        except SqsError as exc:
            # The messages stay held in flight; once visible again, the next receive forwards them anew.
            log.warning("dead-letter queue %s on partition %d refused messages: %s", p.target.queue_id,
                        p.target.partition, exc.message)
            return
        try:
            self._engine.handed_over(p.queue_id, [c.seq for c in p.messages])
        except LogFailed:
            return
        self.forwarded += len(p.messages)

    async def close(self) -> None:
        for task in list(self._tasks):
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
