"""Queue placement's pure parts, and placement without any registered cluster."""

from __future__ import annotations

import asyncio
import zlib

from ferrymq.aws.clusters import ClusterInfo
from ferrymq.aws.queue_store import Shard
from ferrymq.clock import ManualClock
from ferrymq.metadata.queue_placement import QueuePlacement, _least_used, partition_by_hash


def test_a_queue_hashes_to_one_of_the_listed_partitions() -> None:
    ids = [f"{i:032x}" for i in range(500)]
    assert {partition_by_hash(q, (4, 9, 17)) for q in ids} == {4, 9, 17}
    assert all(partition_by_hash(q, 3) == zlib.crc32(q.encode()) % 3 for q in ids)


def test_the_cluster_with_the_lowest_share_in_use_and_room_left_is_chosen() -> None:
    small_but_empty = ClusterInfo("small", (0,), 10, 2)  # 20 % used
    big_and_busy = ClusterInfo("big", (1,), 100, 50)  # 50 % used
    full = ClusterInfo("full", (2,), 5, 0 + 5)
    assert _least_used([big_and_busy, small_but_empty, full]) == small_but_empty
    assert _least_used([full]) is None
    assert _least_used([]) is None


def test_without_registered_clusters_queues_hash_over_the_partition_count() -> None:
    placement = QueuePlacement(None, ManualClock(), partitions=4)
    placed = asyncio.run(placement.place("abc"))
    assert placed == Shard(zlib.crc32(b"abc") % 4, None)
    asyncio.run(placement.release([placed]))  # nothing to give back


def test_the_shards_of_a_queue_go_to_different_partitions_while_there_are_enough() -> None:
    placement = QueuePlacement(None, ManualClock(), partitions=4)
    shards = asyncio.run(placement.place_shards("abc", 0, 4))
    assert sorted(s.partition for s in shards) == [0, 1, 2, 3]
    # more shards than partitions: they share, as evenly as the hash gives
    more = asyncio.run(placement.place_shards("abc", 4, 2, taken=[s.partition for s in shards]))
    assert all(0 <= s.partition < 4 for s in more)
    # the first shard of a queue is placed as an unsharded queue is
    assert shards[0] == asyncio.run(placement.place("abc"))


def test_a_partition_is_avoided_only_while_another_is_left() -> None:
    ids = [f"{i:032x}" for i in range(200)]
    assert all(partition_by_hash(q, (4, 9, 17), avoid={4, 9}) == 17 for q in ids)
    assert {partition_by_hash(q, (4, 9), avoid={4, 9}) for q in ids} == {4, 9}
