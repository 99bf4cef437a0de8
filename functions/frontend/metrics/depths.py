"""Queue depths for the gateway's metrics: visible, in flight, delayed, and the age of the oldest message.

The workers know these per stored queue id; :class:`QueueDepths` refreshes them by reading the catalog (every
account and region) and asking each queue's shards (``WorkerClient.depth``), summing the shards of a sharded
queue (the oldest age is the largest of theirs).

Cost is bounded: one refresh asks about at most ``max_queues`` queues, ``concurrency`` at a time, and reads
only as much of the catalog as that needs. With more queues than that, refreshes take the catalog in turns
(each continues the scan where the last stopped), so every queue's figures are at most
``ceil(queues / max_queues)`` refreshes old. Queues gone from the catalog lose their figures once a whole pass
over it has not seen them.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Any

from ferrymq.aws.queue_store import QueueRecord
from ferrymq.errors import SqsError
from ferrymq.frontend.metrics.recorder import QueueKey

log = logging.getLogger(__name__)

Scan = Callable[[int, Any], Awaitable[tuple[list[QueueRecord], Any]]]
"""``(limit, start) -> (live queues, where to go on or None at the end)``: ``QueueCatalog.scan``."""
ShardDepths = Callable[[QueueRecord], Awaitable[list[Mapping[str, int]]]]
"""One ``WorkerClient.depth`` answer per shard of the queue."""


@dataclass(frozen=True, slots=True)
class Depth:
    visible: int
    in_flight: int
    delayed: int
    oldest_age_seconds: float


def combined(shards: list[Mapping[str, int]]) -> Depth:
    """A queue's depth from its shards': counts add up, the oldest message is the oldest of any shard."""
    return Depth(
        visible=sum(s["visible"] for s in shards),
        in_flight=sum(s["in_flight"] for s in shards),
        delayed=sum(s["delayed"] for s in shards),
        oldest_age_seconds=max((s["oldest_age_ms"] for s in shards), default=0) / 1000.0,
    )


class QueueDepths:
    def __init__(self, scan: Scan, shard_depths: ShardDepths, *, home_region: str, max_queues: int,
                 concurrency: int = 8, wall: Callable[[], float] = time.time) -> None:
        self._scan = scan
        self._shard_depths = shard_depths
        self._home_region = home_region
        self._max_queues = max(1, max_queues)
        self._concurrency = max(1, concurrency)
        self._wall = wall
        self.figures: dict[QueueKey, Depth] = {}
        self.listed: frozenset[QueueKey] | None = None
        """Every live queue as the last complete pass over the catalog found them; None before one ends."""
        self.refreshed_at: float | None = None
        """When the last refresh ended (wall-clock seconds)."""
        self.passes = 0
        """Complete passes over the catalog so far."""
        self._cursor: Any = None
        self._seen: set[QueueKey] = set()

    def key(self, queue: QueueRecord) -> QueueKey:
        return (queue.account, queue.region or self._home_region, queue.name)

    async def refresh(self) -> None:
        """Ask about the next ``max_queues`` queues of the catalog; raises SqsError when the catalog cannot be
        read (a queue whose workers do not answer keeps its last figures, and the refresh goes on)."""
        queues: list[QueueRecord] = []
        finished = False
        while len(queues) < self._max_queues:
            page, self._cursor = await self._scan(self._max_queues - len(queues), self._cursor)
            queues.extend(page)
            if self._cursor is None:
                finished = True
                break
        gate = asyncio.Semaphore(self._concurrency)

        async def ask(queue: QueueRecord) -> Depth:
            async with gate:
                return combined(await self._shard_depths(queue))

        answers = await asyncio.gather(*(ask(q) for q in queues), return_exceptions=True)
        failures: list[BaseException] = []
        for queue, answer in zip(queues, answers, strict=True):
            key = self.key(queue)
            self._seen.add(key)
            if isinstance(answer, Depth):
                self.figures[key] = answer
            elif isinstance(answer, Exception):
                failures.append(answer)
            else:
                raise answer
        if failures:
            first = failures[0]
            reason = first.message if isinstance(first, SqsError) and first.message else repr(first)
            log.warning("queue depths: %d of %d queues did not answer (%s); their figures are kept as they were",
                        len(failures), len(queues), reason)
        if finished:
            self.listed = frozenset(self._seen)
            for key in [k for k in self.figures if k not in self._seen]:
                del self.figures[key]
            self._seen = set()
            self.passes += 1
        self.refreshed_at = self._wall()
