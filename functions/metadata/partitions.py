"""Which storage worker leads a partition, from the partition map in DynamoDB, cached."""

from __future__ import annotations

import asyncio

from ferrymq.aws.partitions import PartitionMap, WorkerAddress
from ferrymq.clock import Clock
from ferrymq.errors import ServiceUnavailable
from ferrymq.ttl_cache import TtlCache


class PartitionDirectory:
    def __init__(self, partition_map: PartitionMap, clock: Clock, *, ttl: float) -> None:
        self._map = partition_map
        self._cache: TtlCache[int, WorkerAddress] = TtlCache(clock, ttl)

    async def leader(self, partition: int) -> WorkerAddress:
        hit = self._cache.get(partition)
        if hit is not None:
            return hit
        address = await asyncio.to_thread(self._map.lookup, partition)
        if address is None:
            raise ServiceUnavailable(f"No storage worker serves partition {partition}.")
        self._cache.put(partition, address)
        return address

    def forget(self, partition: int) -> None:
        """Drop a cached leader after it failed to answer, so the next call reads the map again."""
        self._cache.pop(partition)
