"""Where a new queue's messages live: the out-cluster manager's choice, made as the queue is created.

With storage clusters registered (:class:`~ferrymq.aws.clusters.ClusterRegistry`), a new queue goes to the
cluster with the lowest share of its capacity in use that still has room (:class:`~ferrymq.placement.ClusterPlacer`),
and to one of that cluster's partitions by a hash of the queue id. Room is taken by a conditional write
before the queue is written, so no cluster ever holds more queues than its capacity, however many front ends
create queues at once; when none has room the create is refused with OverLimit. Without registered clusters
(a stack that predates them) a queue goes to a partition by a hash over ``partitions``.

A queue spread over several partitions (``FerryMQShardCount``) places each shard the same way, taking one
unit of room per shard, and avoids the partitions its other shards use while the chosen cluster has others.
"""

from __future__ import annotations

import logging
import zlib
from collections.abc import Callable, Collection
from typing import TypeVar

from ferrymq.aws.clusters import ClusterFull, ClusterInfo, ClusterRegistry
from ferrymq.aws.queue_store import Shard
from ferrymq.bulkhead import Bulkhead, off_loop
from ferrymq.clock import Clock
from ferrymq.errors import OverLimit, SqsError
from ferrymq.placement import ClusterPlacer

log = logging.getLogger(__name__)
T = TypeVar("T")

_TAKE_ATTEMPTS = 4
"""Clusters tried (each after a fresh read of the registry) before a create is refused as over the limit."""


def partition_by_hash(queue_id: str, partitions: tuple[int, ...] | int, avoid: Collection[int] = ()) -> int:
    """The partition of ``queue_id`` among ``partitions`` (a list, or a count of partitions from 0), leaving
    out those in ``avoid`` while any other is left."""
    choices = tuple(range(partitions)) if isinstance(partitions, int) else tuple(partitions)
    free = tuple(p for p in choices if p not in avoid) or choices
    return free[zlib.crc32(queue_id.encode()) % len(free)]


class QueuePlacement:
    def __init__(self, registry: ClusterRegistry | None, clock: Clock, *, partitions: int,
                 cache_seconds: float = 2.0, bulkhead: Bulkhead | None = None) -> None:
        """``registry``: None places every queue by hash over ``partitions``. ``cache_seconds``: how long a read
        of the registry serves placements (a full cluster found stale is read again at once). ``bulkhead``:
        where the DynamoDB calls run (by default the event loop's default threads)."""
        self._bulkhead = bulkhead
        self._registry = registry
        self._clock = clock
        self._partitions = partitions
        self._cache_seconds = cache_seconds
        self._clusters: list[ClusterInfo] = []
        self._read_at: float | None = None

    async def place_shards(self, queue_id: str, first: int, count: int, taken: Collection[int] = ()) -> list[Shard]:
        """Place shards ``first`` to ``first + count - 1`` of a queue whose other shards use the partitions
        ``taken``; when one cannot be placed, the room of those placed is given back and OverLimit raised."""
        placed: list[Shard] = []
        used = set(taken)
        try:
            for index in range(first, first + count):
                shard = await self.place(f"{queue_id}#{index}" if index else queue_id, avoid=used)
                placed.append(shard)
                used.add(shard.partition)
        except BaseException:
            await self.release(placed)
            raise
        return placed

    async def place(self, queue_id: str, avoid: Collection[int] = ()) -> Shard:
        """Take room for a new queue (or shard) and say where it goes, on a partition not in ``avoid`` while
        the cluster has another; OverLimit when no cluster has room."""
        registry = self._registry
        clusters = await self._read(fresh=False)
        if registry is None or not clusters:
            return Shard(partition_by_hash(queue_id, self._partitions, avoid), None)
        for attempt in range(_TAKE_ATTEMPTS):
            if attempt:
                clusters = await self._read(fresh=True)
            chosen = _least_used(clusters)
            if chosen is None:
                if attempt:
                    break
                continue  # full as last read: read again before refusing
            try:
                taken = await self._io(registry.take, chosen)
            except ClusterFull:
                continue
            self._clusters = [taken if c.name == taken.name else c for c in self._clusters]
            return Shard(partition_by_hash(queue_id, taken.partitions, avoid), taken.name)
        raise OverLimit("No storage cluster has room for another queue.")

    async def release(self, shards: Collection[Shard]) -> None:
        """Give back the room of shards of a queue that is deleted (or that were never written). A release that
        fails leaves the count high, on the safe side: the queue's own operation stands."""
        if self._registry is None:
            return
        for shard in shards:
            if shard.cluster is None:
                continue
            try:
                await self._io(self._registry.release, shard.cluster)
            except SqsError as exc:
                log.warning("cluster %s: giving back a queue's room failed: %s", shard.cluster, exc.code)

    async def _io(self, fn: Callable[..., T], *args: object) -> T:
        return await off_loop(self._bulkhead, fn, *args)

    async def partitions(self) -> list[int]:
        """Every partition new queues may go to: the registered clusters', else ``0..partitions-1``."""
        clusters = await self._read(fresh=False)
        if not clusters:
            return list(range(self._partitions))
        return sorted({p for c in clusters for p in c.partitions})

    async def _read(self, *, fresh: bool) -> list[ClusterInfo]:
        if self._registry is None:
            return []
        now = self._clock.monotonic()
        if fresh or self._read_at is None or now - self._read_at >= self._cache_seconds:
            self._clusters = await self._io(self._registry.all)
            self._read_at = now
        return self._clusters


def _least_used(clusters: list[ClusterInfo]) -> ClusterInfo | None:
    with_room = [c for c in clusters if c.room > 0]
    if not with_room:
        return None
    placer = ClusterPlacer(
        {c.name: c.max_queues for c in with_room}, max_shard=1.0, load={c.name: c.queues for c in with_room}
    )
    shards = placer.place("", 1.0)
    if not shards:
        return None
    name = shards[0].cluster
    return next(c for c in with_room if c.name == name)
