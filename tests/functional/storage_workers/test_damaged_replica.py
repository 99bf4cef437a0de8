"""A worker whose log for one partition is damaged (a bad record with intact ones after it): the worker starts,
serves its other partitions, and refuses the damaged one naming the damage (PING, readiness); set aside, the
damaged copy is kept beside an empty log that the replica starts over with."""

from __future__ import annotations

import asyncio
import uuid
from pathlib import Path

import pytest

from ferrymq.errors import NotLeader
from ferrymq.rpc.client import WorkerClient
from ferrymq.storage.engine.records import SENT
from ferrymq.storage.log.format import RECORD
from ferrymq.storage.server import StorageWorker, WorkerConfig
from ferrymq.storage.server.damage import LOST_COPY_MARK
from ferrymq.storage.server.layout import replica_dir
from ferrymq.storage.server.metrics import readiness
from tests.functional.storage_workers.worker_calls import drain
from tests.support.engine_requests import RECEIPT_KEY
from tests.support.log_files import flip, frames_of, write_batches


def sent(queue: str, seq: int, body: str) -> tuple:
    return (SENT, queue, 4_000_000_000_000, seq, [[str(uuid.UUID(int=seq)), body, {}, "md5", None, 0, {}]])


def damaged_log(directory: Path) -> tuple[Path, int, bytes]:
    """Five acknowledged records, the third damaged; returns the segment, the damaged frame's start, its bytes."""
    write_batches(directory, [[sent("q", i, f"b{i}")] for i in range(1, 6)])
    path = next(directory.glob("*.seg"))
    third = [f for f in frames_of(path) if f.flags == RECORD][2]
    flip(path, third.start + 12)
    return path, third.start, path.read_bytes()


def worker(data_dir: Path) -> StorageWorker:
    config = WorkerConfig(data_dir=data_dir, partitions=(0, 1), port=0, register=False, worker_id="w-damaged")
    return StorageWorker(config, dict.fromkeys((0, 1), RECEIPT_KEY))


def test_a_damaged_partition_is_refused_named_while_the_worker_serves_the_other(tmp_path: Path) -> None:
    # given a worker data directory whose partition 0 log is damaged and partition 1 log intact
    segment, start, contents = damaged_log(replica_dir(tmp_path, 0))
    write_batches(replica_dir(tmp_path, 1), [[sent("q1", 1, "intact")]])

    async def scenario() -> None:
        server = worker(tmp_path)
        host, port = await server.start()
        client = WorkerClient(host, port, connect_timeout=1.0)
        try:
            # when it starts, then partition 1 serves
            assert [m["body"] for m in await drain(client, "q1", partition=1)] == ["intact"]
            # and partition 0 is refused, naming the damage, and changes nothing
            with pytest.raises(NotLeader, match="Partition 0's log on storage worker w-damaged is damaged"):
                await drain(client, "q", partition=0)
            status = (await client.ping())["partitions"]["0"]
            assert status["role"] == "refused"
            assert (status["damage"]["segment"], status["damage"]["byte"]) == (str(segment), start)
            assert f"damaged frame at byte {start}" in status["damage"]["detail"]
            assert readiness(server) == (False, {"0": "refused: its log is damaged", "1": "leading"})
            assert segment.read_bytes() == contents
        finally:
            await client.close()
            await server.close()

    asyncio.run(scenario())
    assert segment.read_bytes() == contents


def test_a_damaged_copy_set_aside_is_kept_beside_an_empty_log_marked_lost(tmp_path: Path) -> None:
    # given a worker refusing its damaged partition 0
    segment, _start, contents = damaged_log(replica_dir(tmp_path, 0))

    async def scenario() -> None:
        server = worker(tmp_path)
        await server.start(static_roles=False)
        try:
            replica = server.replicas[0]
            assert replica.refusing
            # when the copy is set aside
            await replica.set_aside()
            # then the damaged directory is kept whole beside the partition's new, empty log
            aside = [p for p in tmp_path.iterdir() if p.name.startswith("p0.damaged-")]
            assert len(aside) == 1 and (aside[0] / segment.name).read_bytes() == contents
            assert replica.log is not None and replica.log.end_offset == 1 and not replica.refusing
            assert (replica_dir(tmp_path, 0) / LOST_COPY_MARK).exists()
            status = server.status()["partitions"]["0"]
            assert status["role"] == "standby" and status["damage"]["set_aside"] == str(aside[0])
            # and the mark stays until a leader has heard of the loss
            assert replica.lost_copy
            replica.lost_copy_reported()
            assert not replica.lost_copy
        finally:
            await server.close()

    asyncio.run(scenario())


def test_a_worker_outside_any_cluster_with_every_partition_damaged_has_nothing_to_serve(tmp_path: Path) -> None:
    damaged_log(replica_dir(tmp_path, 0))
    damaged_log(replica_dir(tmp_path, 1))

    async def scenario() -> None:
        server = worker(tmp_path)
        server.open()
        try:
            assert all(r.refusing for r in server.replicas.values())
        finally:
            await server.close()

    asyncio.run(scenario())
