"""The storage worker as a real process: readiness, partition map, the RPC over loopback, clean shutdown."""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import Callable
from pathlib import Path

import pytest

from ferrymq.aws.partitions import PartitionMap
from ferrymq.errors import NotLeader
from ferrymq.rpc.client import WorkerClient
from ferrymq.settings import Settings
from tests.functional.storage_workers.worker_calls import drain
from tests.integration.conftest import WorkerProcess
from tests.integration.infra.processes import children_of, is_alive

RETENTION = 345600


def message(body: str, delay: int = 0) -> dict:
    return {
        "id": str(uuid.uuid4()),
        "body": body,
        "attrs": {"n": {"DataType": "Number", "StringValue": "1"}},
        "md5_body": "md5",
        "md5_attrs": "md5a",
        "delay": delay,
        "system": {},
    }


async def send_rounds(worker: WorkerProcess, rounds: int) -> list[str]:
    """``rounds`` sends of ten messages of about 210 bytes to queue ``q`` of partition 0; the bodies sent."""
    client = WorkerClient(worker.host, worker.port)
    sent: list[str] = []
    try:
        for round_ in range(rounds):
            batch = [message(f"m{round_}-{i}-" + "z" * 200) for i in range(10)]
            await client.send(0, "q", batch, retention_seconds=RETENTION)
            sent.extend(m["body"] for m in batch)
    finally:
        await client.close()
    return sent


def test_worker_registers_its_address_and_a_new_epoch_each_start(
    start_worker: Callable[..., WorkerProcess], aws_settings: Settings, tmp_path: Path
) -> None:
    partition_map = PartitionMap.from_settings(aws_settings)
    # given a worker started for partition 7
    first = start_worker(tmp_path / "w", worker_id="w-seven", partition=7)
    # then the partition map names it, with its real port
    entry = partition_map.lookup(7)
    assert entry is not None
    assert (entry.worker_id, entry.host, entry.port) == ("w-seven", first.host, first.port)
    # when it stops on SIGTERM, then it exits cleanly
    assert first.terminate() == 0
    # and when it starts again it takes the partition with the next epoch
    second = start_worker(tmp_path / "w", worker_id="w-seven", partition=7)
    again = partition_map.lookup(7)
    assert again is not None and again.epoch == entry.epoch + 1 and again.port == second.port
    assert 7 in [a.partition for a in partition_map.all()]


def test_send_receive_delete_and_long_poll_over_loopback(
    start_worker: Callable[..., WorkerProcess], tmp_path: Path
) -> None:
    worker = start_worker(tmp_path / "w")

    async def scenario() -> None:
        client = WorkerClient(worker.host, worker.port)
        try:
            sent = await client.send(0, "q", [message("one"), message("two")], retention_seconds=RETENTION)
            assert len(sent) == 2 and all(isinstance(s["sent_ts"], int) for s in sent)
            got = await client.receive(0,
                "q", max_messages=10, visibility_timeout=30, wait_seconds=0, retention_seconds=RETENTION
            )
            assert [m["body"] for m in got] == ["one", "two"]
            assert got[0]["attrs"] == {"n": {"DataType": "Number", "StringValue": "1"}}
            assert await client.delete(0, "q", [m["receipt"] for m in got]) == [None, None]
            stats = await client.stats(0, "q", retention_seconds=RETENTION)
            assert stats == {"visible": 0, "in_flight": 0, "delayed": 0}

            # a long poll is answered as soon as a message is sent: before a marker, a long poll of the same
            # length started first on a queue nothing reaches, which ends before the poll's own time would run out
            def long_poll(queue_id: str) -> asyncio.Future[list[dict]]:
                return asyncio.ensure_future(
                    client.receive(0,
                        queue_id, max_messages=1, visibility_timeout=30, wait_seconds=10, retention_seconds=RETENTION
                    )
                )

            marker = long_poll("quiet")
            poll = long_poll("q")
            await asyncio.sleep(0.3)
            await client.send(0, "q", [message("three")], retention_seconds=RETENTION)
            got = await poll
            assert [m["body"] for m in got] == ["three"]
            assert not marker.done()
            await client.send(0, "quiet", [message("for the marker")], retention_seconds=RETENTION)
            assert [m["body"] for m in await marker] == ["for the marker"]
        finally:
            await client.close()

    asyncio.run(scenario())


def test_worker_stops_cleanly_when_its_parent_dies_alone(
    start_worker: Callable[..., WorkerProcess], tmp_path: Path
) -> None:
    # given a worker whose parent passed it --parent-pid, as `ferrymq up` does, holding an acknowledged message
    parent = start_worker(tmp_path / "w", extra_args=["--no-register"], behind_parent=True)
    (worker_pid,) = children_of(parent.proc.pid)

    async def send() -> None:
        client = WorkerClient(parent.host, parent.port)
        try:
            await client.send(0, "q", [message("kept")], retention_seconds=RETENTION)
        finally:
            await client.close()

    asyncio.run(send())
    # when only the parent is killed with SIGKILL
    parent.kill9()
    # then the worker notices and stops on its own, the way SIGTERM stops it
    deadline = time.monotonic() + 15
    while is_alive(worker_pid) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not is_alive(worker_pid)
    log = parent.stderr()
    assert f"parent process {parent.proc.pid} is gone; stopping" in log
    assert "Traceback" not in log
    # and the next worker on its data directory takes it over with the message
    again = start_worker(tmp_path / "w", extra_args=["--no-register"])

    async def received() -> list[dict]:
        client = WorkerClient(again.host, again.port)
        try:
            return await drain(client, "q")
        finally:
            await client.close()

    assert [m["body"] for m in asyncio.run(received())] == ["kept"]
    assert again.terminate() == 0


def test_a_worker_process_serves_and_registers_every_partition_it_is_given(
    start_worker: Callable[..., WorkerProcess], aws_settings: Settings, tmp_path: Path
) -> None:
    partition_map = PartitionMap.from_settings(aws_settings)
    # given a worker process started for partitions 60, 61 and 62
    worker = start_worker(tmp_path / "w", worker_id="w-many", partitions=(60, 61, 62))
    # then the partition map names it, at its one address, for each of them
    for partition in (60, 61, 62):
        entry = partition_map.lookup(partition)
        assert entry is not None
        assert (entry.worker_id, entry.host, entry.port) == ("w-many", worker.host, worker.port)

    async def scenario() -> None:
        client = WorkerClient(worker.host, worker.port)
        try:
            # and when each partition gets a message in a queue of the same id, each keeps its own
            for partition in (60, 61, 62):
                await client.send(partition, "q", [message(f"for {partition}")], retention_seconds=RETENTION)
            for partition in (60, 61, 62):
                assert [m["body"] for m in await drain(client, "q", partition=partition)] == [f"for {partition}"]
            # and a partition it was not given is NotLeader
            with pytest.raises(NotLeader, match="w-many does not serve partition 63"):
                await client.send(63, "q", [message("astray")], retention_seconds=RETENTION)
        finally:
            await client.close()

    asyncio.run(scenario())
    assert worker.terminate() == 0
