"""``damage.repair`` against the durable stand-in's partition items, on an in-process worker's damaged replica:
what it does with the copy depends on the in-sync set, and it never takes the last in-sync member out."""

from __future__ import annotations

import asyncio
from pathlib import Path

from ferrymq.aws.replica_sets import ReplicaSets
from ferrymq.replication_rules import Acks
from ferrymq.storage.server import StorageWorker, WorkerConfig
from ferrymq.storage.server.damage import repair
from ferrymq.storage.server.layout import replica_dir
from tests.functional.storage_workers.test_damaged_replica import damaged_log
from tests.support.engine_requests import RECEIPT_KEY

LEASE_MS = 5_000


def repaired(data_dir: Path, partition: int, sets: ReplicaSets, me: str) -> dict:
    """Open a worker on ``data_dir`` holding a damaged copy of ``partition``, repair it; the replica's status."""

    async def scenario() -> dict:
        config = WorkerConfig(data_dir=data_dir, partitions=(partition,), port=0, register=False, worker_id=me)
        worker = StorageWorker(config, {partition: RECEIPT_KEY})
        await worker.start(static_roles=False)
        try:
            replica = worker.replicas[partition]
            assert replica.refusing
            await repair(replica, sets, me, lambda: 1_000)
            return replica.status()
        finally:
            await worker.close()

    return asyncio.run(scenario())


def test_an_in_sync_replica_leaves_the_set_then_sets_its_copy_aside(
    sets: ReplicaSets, partition: int, tmp_path: Path
) -> None:
    # given b, in sync, whose copy is damaged
    sets.create(partition, "c", ["a", "b", "c"], Acks.MAJORITY)
    sets.claim(partition, "a", 1, 0, LEASE_MS)
    damaged_log(replica_dir(tmp_path, partition))
    # when it repairs, then it left the set (nothing else changed) and its copy is set aside
    status = repaired(tmp_path, partition, sets, "b")
    item = sets.get(partition)
    assert item is not None and item.isr == frozenset({"a", "c"}) and (item.leader, item.epoch) == ("a", 2)
    assert status["damage"]["set_aside"] and status["role"] == "standby"
    assert Path(status["damage"]["set_aside"]).is_dir()


def test_a_lagging_replica_sets_its_copy_aside_without_a_write(
    sets: ReplicaSets, partition: int, tmp_path: Path
) -> None:
    sets.create(partition, "c", ["a", "b", "c"], Acks.MAJORITY, isr=["a", "c"])
    before = sets.get(partition)
    damaged_log(replica_dir(tmp_path, partition))
    status = repaired(tmp_path, partition, sets, "b")
    assert sets.get(partition) == before
    assert status["damage"]["set_aside"]


def test_the_last_in_sync_replica_keeps_its_damaged_copy_and_refuses(
    sets: ReplicaSets, partition: int, tmp_path: Path
) -> None:
    # given b, the only in-sync replica, whose copy is damaged
    sets.create(partition, "c", ["b", "a", "c"], Acks.MAJORITY, isr=["b"])
    before = sets.get(partition)
    segment, _, contents = damaged_log(replica_dir(tmp_path, partition))
    # when it repairs, then nothing changed: the item, the damaged log in place, and the partition refused
    status = repaired(tmp_path, partition, sets, "b")
    assert sets.get(partition) == before
    assert segment.read_bytes() == contents
    assert status["role"] == "refused"
    assert status["damage"]["refused"] == "no other in-sync replica holds what this copy held"
    assert status["damage"]["set_aside"] is None


def test_a_worker_outside_the_replica_set_refuses(sets: ReplicaSets, partition: int, tmp_path: Path) -> None:
    sets.create(partition, "c", ["a", "c"], Acks.MAJORITY)
    damaged_log(replica_dir(tmp_path, partition))
    status = repaired(tmp_path, partition, sets, "b")
    assert status["role"] == "refused" and "not one of its replicas" in status["damage"]["refused"]
