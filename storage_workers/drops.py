"""Carrying out the pending drops of this worker's partition: deleted queues whose messages it still holds.

DeleteQueue writes a pending drop beside the tombstone (see :mod:`ferrymq.aws.queue_store`) and then tells the
worker; when that call fails, only the pending drop remembers that the messages must go.  The sweeper reads
the partition's pending drops, drops each queue id in the engine (a ``DROPPED`` record, which frees the
messages at once and on every replay), waits until those records are durable, and only then clears the
items: a crash in between leaves the items, and dropping an id twice is harmless.

The catalog is read in a thread (boto3 blocks); the engine is only touched on the event loop.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from typing import Protocol

from ferrymq.aws.queue_store import PendingDrop
from ferrymq.errors import ServiceUnavailable

log = logging.getLogger(__name__)


class PendingDropStore(Protocol):
    """The two catalog calls the sweeper makes (:class:`ferrymq.aws.queue_store.QueueStore` has them)."""

    def pending_drops(self, partition: int) -> list[PendingDrop]: ...

    def clear_pending_drop(self, partition: int, queue_id: str) -> None: ...


class PendingDropSweeper:
    def __init__(
        self,
        partition: int,
        store: PendingDropStore,
        drop_queue: Callable[[str], None],
        wait_durable: Callable[[], Awaitable[None]],
    ) -> None:
        """``drop_queue`` drops a queue id in the engine (appending its record); ``wait_durable`` returns once
        everything appended so far is on disk."""
        self.partition = partition
        self._store = store
        self._drop_queue = drop_queue
        self._wait_durable = wait_durable
        self._unavailable = False

    async def sweep_once(self) -> int:
        """Drop every pending drop of the partition and clear it; returns how many were carried out.

        Raises what the catalog or the log raise; items not cleared yet are simply found again next time.
        """
        pending = await asyncio.to_thread(self._store.pending_drops, self.partition)
        if not pending:
            return 0
        for drop in pending:
            self._drop_queue(drop.queue_id)
        # Clearing an item before its DROPPED record is on disk could lose the drop in a crash.
        await self._wait_durable()
        for drop in pending:
            await asyncio.to_thread(self._store.clear_pending_drop, self.partition, drop.queue_id)
            log.info("dropped deleted queue %s (%s/%s) of partition %d", drop.queue_id, drop.account, drop.name,
                     self.partition)
        return len(pending)

    async def run(self, interval_seconds: float) -> None:
        """Sweep now, then every ``interval_seconds``, until cancelled.

        A catalog outage is reported once, with a line when it ends, and retried at the next interval; any
        other failure is logged and retried too, as a sweep that failed must not stop the ones after it.
        """
        while True:
            await self._sweep_reporting_failures()
            await asyncio.sleep(interval_seconds)

    async def _sweep_reporting_failures(self) -> None:
        try:
            await self.sweep_once()
        except ServiceUnavailable as exc:
            if not self._unavailable:
                self._unavailable = True
                # The message is the generic one clients see; the botocore failure behind it says what broke.
                log.warning("pending drops of partition %d cannot be read or cleared: %s; retrying",
                            self.partition, exc.__cause__ or exc.message)
            return
        except Exception:
            log.exception("sweeping the pending drops of partition %d failed; retrying", self.partition)
            return
        if self._unavailable:
            self._unavailable = False
            log.info("pending drops of partition %d are reachable again", self.partition)
