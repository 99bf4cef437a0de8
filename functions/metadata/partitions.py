"""Which storage worker leads a partition, from the partition map in DynamoDB, cached."""

from __future__ import annotations

import asyncio

from ferrymq.aws.partitions import PartitionMap, WorkerAddress
from ferrymq.clock import Clock
from ferrymq.errors import ServiceUnavailable


class PartitionDirectory:
    def __init__(self, partition_map: PartitionMap, clock: Clock, *, ttl: float) -> None:
        self._map = partition_map
        self._clock = clock
        self._ttl = ttl
        self._cache: dict[int, tuple[float, WorkerAddress]] = {}

    async def leader(self, partition: int) -> WorkerAddress:
        hit = self._cache.get(partition)
        if hit is not None and hit[0] > self._clock.monotonic():
            return hit[1]
        address = await asyncio.to_thread(self._map.lookup, partition)
        if address is None:
            raise ServiceUnavailable(f"No storage worker serves partition {partition}.")
        self._cache[partition] = (self._clock.monotonic() + self._ttl, address)
        return address

    def forget(self, partition: int) -> None:
        """Drop a cached leader after it failed to answer, so the next call reads the map again."""
        self._cache.pop(partition, None)
