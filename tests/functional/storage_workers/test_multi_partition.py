"""One worker serving several partitions: each its own log directory and state behind one listener, requests
routed by the partition they name, NotLeader for the others, and the single-partition layout adopted."""

from __future__ import annotations

import asyncio
import os
from pathlib import Path

import pytest

from ferrymq.errors import NotLeader, ServiceUnavailable
from ferrymq.rpc.client import WorkerClient
from ferrymq.storage.log.segments import SUFFIX
from ferrymq.storage.server import StorageWorker, WorkerConfig
from ferrymq.storage.server.layout import adopt_legacy_log
from tests.functional.storage_workers.in_process import worker
from tests.functional.storage_workers.test_server_fifo import fifo_message, message, receive
from tests.functional.storage_workers.worker_calls import RETENTION, drain, eventually
from tests.support.engine_requests import RECEIPT_KEY

PARTITIONS = (0, 1, 2)
NO_MESSAGES = {"visible": 0, "in_flight": 0, "delayed": 0}


def segment_names(directory: Path) -> list[str]:
    return sorted(name for name in os.listdir(directory) if name.endswith(SUFFIX))


def test_a_worker_serves_queues_on_each_of_its_partitions_independently_and_across_a_restart(
    tmp_path: Path,
) -> None:
    async def fill() -> None:
        # given a worker serving partitions 0, 1 and 2
        async with worker(tmp_path, partitions=PARTITIONS) as (_, client):
            # when a FIFO queue on partition 1 and a standard queue on partition 2 get messages, and partition 0
            # a queue of the same id as the standard one
            await client.send(1, "fifo", [fifo_message("g", "f1"), fifo_message("g", "f2")],
                              retention_seconds=RETENTION, fifo=True)
            await client.send(2, "q", [message("two-a"), message("two-b")], retention_seconds=RETENTION)
            await client.send(0, "q", [message("zero")], retention_seconds=RETENTION)
            # then each partition holds only its own messages
            assert [m["body"] for m in await receive(client, "fifo", partition=1, max_messages=1)] == ["f1"]
            assert await client.stats(0, "fifo", retention_seconds=RETENTION) == NO_MESSAGES
            assert (await client.stats(2, "q", retention_seconds=RETENTION))["visible"] == 2
            assert (await client.stats(0, "q", retention_seconds=RETENTION))["visible"] == 1
            # and a ping reports every partition
            status = await client.ping()
            assert set(status["partitions"]) == {"0", "1", "2"}
            assert status["partitions"]["2"]["messages"] == 2

    async def after_restart() -> None:
        async with worker(tmp_path, partitions=PARTITIONS) as (_, client):
            # the FIFO group is still locked by the message in flight, the rest as it was
            assert await receive(client, "fifo", partition=1) == []
            assert (await client.stats(1, "fifo", retention_seconds=RETENTION))["in_flight"] == 1
            assert sorted(m["body"] for m in await drain(client, "q", partition=2)) == ["two-a", "two-b"]
            assert [m["body"] for m in await drain(client, "q", partition=0)] == ["zero"]

    asyncio.run(fill())
    # and each partition has its own log directory
    assert sorted(p.name for p in tmp_path.iterdir() if p.is_dir()) == ["p0", "p1", "p2"]
    assert all(segment_names(tmp_path / f"p{p}") for p in PARTITIONS)
    assert segment_names(tmp_path) == []
    # when the worker restarts on the same directory, then every partition recovered its own state
    asyncio.run(after_restart())


def test_a_request_for_a_partition_the_worker_does_not_serve_is_not_leader_and_changes_nothing(
    tmp_path: Path,
) -> None:
    async def scenario() -> None:
        # given a worker serving partitions 0, 1 and 2
        async with worker(tmp_path, partitions=PARTITIONS) as (server, client):
            batches = {p: r.log.batches for p, r in server.replicas.items() if r.log is not None}
            # when a send, a receive and a purge name partition 5
            for call in (
                client.send(5, "q", [message("astray")], retention_seconds=RETENTION),
                client.receive(5, "q", max_messages=1, visibility_timeout=30, wait_seconds=0,
                               retention_seconds=RETENTION),
                client.purge(5, "q"),
            ):
                # then each is NotLeader, naming the partition and the worker
                with pytest.raises(NotLeader, match="worker-1 does not serve partition 5"):
                    await call
            # and nothing was stored: no partition appended a record, and none holds the message
            assert {p: r.log.batches for p, r in server.replicas.items() if r.log is not None} == batches
            for partition in PARTITIONS:
                assert await client.stats(partition, "q", retention_seconds=RETENTION) == NO_MESSAGES
            assert set(server.replicas) == set(PARTITIONS)

    asyncio.run(scenario())
    assert not (tmp_path / "p5").exists()


def test_redrive_into_a_dead_letter_queue_on_another_partition_of_the_same_worker(tmp_path: Path) -> None:
    async def scenario() -> None:
        # given a worker serving partitions 0 and 1, knowing no cluster, with a source queue on 0 and its
        # dead-letter queue on 1
        async with worker(tmp_path, partitions=(0, 1)) as (server, client):
            redrive = {
                "max_receive_count": 1,
                "dlq_queue_id": "dlq",
                "dlq_partition": 1,
                "dlq_fifo": False,
                "dlq_retention_seconds": RETENTION,
                "source_arn": "arn:aws:sqs:us-east-1:000000000000:src",
            }
            [sent] = await client.send(0, "src", [message("poison")], retention_seconds=RETENTION)
            await receive(client, "src", visibility_timeout=0, redrive=redrive)
            # when it is received past its max receive count
            assert await receive(client, "src", redrive=redrive) == []

            # then it is handed to partition 1 through the worker's own address, and leaves the source
            async def arrived() -> bool:
                return (await client.stats(1, "dlq", retention_seconds=RETENTION))["visible"] == 1

            await eventually(arrived)
            (dead,) = await receive(client, "dlq", partition=1)
            assert (dead["id"], dead["receive_count"]) == (sent["id"], 2)
            assert server.replicas[0].term.forwarder.forwarded == 1

            async def left() -> bool:
                return await client.stats(0, "src", retention_seconds=RETENTION) == NO_MESSAGES

            await eventually(left)

    asyncio.run(scenario())


def _worker(data_dir: Path, partitions: tuple[int, ...]) -> StorageWorker:
    config = WorkerConfig(data_dir=data_dir, partitions=partitions, register=False, segment_bytes=4096)
    return StorageWorker(config, dict.fromkeys(partitions, RECEIPT_KEY))


async def _bodies(data_dir: Path, partitions: tuple[int, ...], partition: int) -> list[str]:
    server = _worker(data_dir, partitions)
    host, port = await server.start()
    client = WorkerClient(host, port, connect_timeout=1.0)
    try:
        return sorted(m["body"] for m in await drain(client, "q", partition=partition))
    finally:
        await client.close()
        await server.close()


def _single_partition_layout(tmp_path: Path) -> tuple[Path, list[str], list[str]]:
    """A data directory as a single-partition worker left it: segments directly in it, several of them.
    Returns it, its segment names and the bodies stored."""
    data_dir = tmp_path / "worker"
    bodies = [f"m{i:02d}-" + "x" * 600 for i in range(20)]

    async def fill() -> None:
        server = _worker(data_dir, (3,))
        host, port = await server.start()
        client = WorkerClient(host, port, connect_timeout=1.0)
        try:
            for body in bodies:
                await client.send(3, "q", [message(body)], retention_seconds=RETENTION)
        finally:
            await client.close()
            await server.close()

    asyncio.run(fill())
    names = segment_names(data_dir / "p3")
    for name in names:
        os.rename(data_dir / "p3" / name, data_dir / name)
    (data_dir / "p3" / "LOCK").unlink()
    # That layout predates checkpoints: the one the stopping worker wrote is not part of it.
    (data_dir / "p3" / "state.ckpt").unlink()
    os.rmdir(data_dir / "p3")
    return data_dir, names, sorted(bodies)


def test_a_single_partition_layout_is_moved_into_the_partition_s_directory(tmp_path: Path) -> None:
    # given a data directory of the single-partition layout with several segments
    data_dir, names, bodies = _single_partition_layout(tmp_path)
    assert len(names) > 2
    # when a worker serving partitions 3 and 4 starts on it
    served = asyncio.run(_bodies(data_dir, (3, 4), 3))
    # then the segments are in p3, none is left beside it, and partition 3 serves every message
    assert segment_names(data_dir / "p3") == names
    assert segment_names(data_dir) == []
    assert served == bodies


def test_a_move_of_the_single_partition_layout_cut_short_is_finished_at_the_next_start(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # given a data directory of the single-partition layout, and a move that stops after two renames
    data_dir, names, bodies = _single_partition_layout(tmp_path)
    real_rename = os.rename
    renames: list[str] = []

    def crashing_rename(src: os.PathLike[str], dst: os.PathLike[str]) -> None:
        if len(renames) == 2:
            raise OSError("power cut")
        renames.append(str(src))
        real_rename(src, dst)

    monkeypatch.setattr(os, "rename", crashing_rename)
    with pytest.raises(OSError, match="power cut"):
        adopt_legacy_log(data_dir, data_dir / "p3")
    monkeypatch.setattr(os, "rename", real_rename)
    # every file is in exactly one of the two places
    assert segment_names(data_dir / "p3") == names[:2]
    assert segment_names(data_dir) == names[2:]
    # when the worker starts, then it finishes the move and serves every message once
    assert asyncio.run(_bodies(data_dir, (3,), 3)) == bodies
    assert segment_names(data_dir / "p3") == names
    assert segment_names(data_dir) == []


def test_the_move_refuses_to_overwrite_a_segment_already_in_the_partition_s_directory(tmp_path: Path) -> None:
    # given a segment name both beside and inside the partition's directory
    (tmp_path / "p0").mkdir()
    name = f"{1:020d}{SUFFIX}"
    (tmp_path / name).write_bytes(b"old layout")
    (tmp_path / "p0" / name).write_bytes(b"new layout")
    # when the move runs, then it refuses and both files are as they were
    with pytest.raises(FileExistsError, match="is there already"):
        adopt_legacy_log(tmp_path, tmp_path / "p0")
    assert (tmp_path / name).read_bytes() == b"old layout"
    assert (tmp_path / "p0" / name).read_bytes() == b"new layout"


def test_a_queue_target_on_a_served_partition_is_reached_without_a_partition_map(tmp_path: Path) -> None:
    async def scenario() -> None:
        # given a worker serving partitions 0 and 1 that knows no cluster
        async with worker(tmp_path, partitions=(0, 1)) as (server, _):
            peers = server.replicas[0].peers
            # when partition 0's peers are asked for partition 1's worker, then it is this worker
            client = await peers.worker(1)
            assert (await client.ping())["worker_id"] == "worker-1"
            # and partition 9, which it does not serve, has no worker
            with pytest.raises(ServiceUnavailable, match="partition 9"):
                await peers.worker(9)

    asyncio.run(scenario())


def test_a_worker_recovers_its_logs_before_it_has_the_receipt_keys_and_serves_only_once_given_them(
    tmp_path: Path,
) -> None:
    async def scenario() -> None:
        # given a worker that stored messages on two partitions and stopped
        first = _worker(tmp_path, (0, 1))
        host, port = await first.start()
        client = WorkerClient(host, port, connect_timeout=1.0)
        await client.send(1, "q", [message("kept")], retention_seconds=RETENTION)
        await client.close()
        await first.close()
        # when it starts again without its keys (under up, the table they live in may still be starting)
        second = StorageWorker(WorkerConfig(data_dir=tmp_path, partitions=(0, 1), register=False,
                                            segment_bytes=4096), None)
        try:
            second.open()
            # then its logs are recovered meanwhile
            assert len(second.replicas[1].engine.partition.queues["q"].msgs) == 1
            # and it neither serves nor mints a handle without them
            with pytest.raises(ValueError, match=r"no receipt key for partitions \[0, 1\]"):
                await second.start()
            with pytest.raises(RuntimeError, match="receipt key has not been read"):
                second.replicas[1].engine.receipts.queue_tag("q")
            with pytest.raises(ValueError, match=r"no receipt key for partitions \[1\]"):
                second.use_receipt_keys({0: RECEIPT_KEY})
            # and once given them, it serves what it recovered with handles its partition's key vouches for
            second.use_receipt_keys(dict.fromkeys((0, 1), RECEIPT_KEY))
            host, port = await second.start()
            client = WorkerClient(host, port, connect_timeout=1.0)
            try:
                got = await receive(client, "q", partition=1)
                assert [m["body"] for m in got] == ["kept"]
                assert second.replicas[1].engine.receipts.decode(got[0]["receipt"]) is not None
            finally:
                await client.close()
        finally:
            await second.close()

    asyncio.run(scenario())
