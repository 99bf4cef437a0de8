"""Group commits synced on the event loop (:mod:`ferrymq.storage.log.sync_place`), on real files: what they make
durable recovers as what the I/O thread makes durable does; a slow sync sends the next ones to the thread; a
batch that starts a new segment is left to the thread; a sync that fails on the loop fails the log as one in the
thread does; a worker's logs share one place, and its metrics count the syncs on the loop and the slow ones."""

from __future__ import annotations

import asyncio
import errno
import os
import threading
import uuid
from pathlib import Path

import pytest
from prometheus_client import generate_latest

from ferrymq.rpc.client import WorkerClient
from ferrymq.storage.engine.records import SENT
from ferrymq.storage.log.recovery import recover
from ferrymq.storage.log.segments import list_segments
from ferrymq.storage.log.sync_place import SyncPlace
from ferrymq.storage.log.writer import LogFailed, LogWriter
from ferrymq.storage.server import StorageWorker, WorkerConfig
from ferrymq.storage.server.metrics import worker_registry
from tests.functional.storage_workers.test_server_fifo import message
from tests.functional.storage_workers.worker_calls import RETENTION
from tests.support.engine_requests import RECEIPT_KEY

LOOP = "loop"
THREAD = "thread"


def sent(seq: int, body: str = "x" * 40) -> tuple:
    return (SENT, "q", 1_700_000_000_000, seq, [[str(uuid.UUID(int=seq)), body, {}, "md5", None, 0, {}]])


def place_on_loop(quick_seconds: float, calm_seconds: float = 3600.0) -> SyncPlace:
    """A place whose calm period since its start is already over: the next sync runs on the loop."""
    now = [0.0]
    place = SyncPlace(quick_seconds, calm_seconds=calm_seconds, clock=lambda: now[0])
    now[0] = calm_seconds
    return place


def writer_noting_where(directory: Path, place: SyncPlace, where: list[str], **kwargs: object) -> LogWriter:
    """A writer whose every sync notes whether it ran in the event loop's thread."""
    main = threading.get_ident()
    return LogWriter(
        directory,
        sync_place=place,
        on_sync=lambda _: where.append(LOOP if threading.get_ident() == main else THREAD),
        **kwargs,  # type: ignore[arg-type]
    )


def recovered(directory: Path) -> list[int]:
    got: list[tuple] = []
    recover(directory, got.append)
    return [r[3] for r in got]


async def append_in_turns(writer: LogWriter, seqs: range, per_turn: int = 3) -> None:
    for start in range(seqs.start, seqs.stop, per_turn):
        for seq in range(start, min(start + per_turn, seqs.stop)):
            writer.append(sent(seq), 1)
        await writer.flush()


def test_commits_synced_on_the_loop_are_durable_and_recover_as_the_threads_do(tmp_path: Path) -> None:
    where: list[str] = []

    async def scenario() -> None:
        # given a writer whose disk has been quick
        writer = writer_noting_where(tmp_path / "loop", place_on_loop(1.0), where)
        # when records are appended over several turns, each batch awaited
        await append_in_turns(writer, range(1, 31))
        await writer.close()
        # and the same records through a writer that syncs in its thread
        threaded = LogWriter(tmp_path / "thread")
        await append_in_turns(threaded, range(1, 31))
        await threaded.close()

    asyncio.run(scenario())
    # then every batch was synced on the loop, one sync per batch
    assert where == [LOOP] * 10
    # and the log recovers to every record, in order, as the thread's does
    assert recovered(tmp_path / "loop") == list(range(1, 31)) == recovered(tmp_path / "thread")


def test_a_slow_sync_on_the_loop_sends_the_next_ones_to_the_thread(tmp_path: Path) -> None:
    where: list[str] = []
    # given a place where every sync is slow (a limit of a nanosecond), on the loop for now
    place = place_on_loop(1e-9)

    async def scenario() -> None:
        writer = writer_noting_where(tmp_path, place, where)
        # when batches are committed one after another
        await append_in_turns(writer, range(1, 13))
        await writer.close()

    asyncio.run(scenario())
    # then the first was synced on the loop and, being slow, sent the rest to the thread
    assert where == [LOOP] + [THREAD] * 3
    assert place.slow_syncs == 4 and place.on_loop_syncs == 1
    assert recovered(tmp_path) == list(range(1, 13))


def test_a_batch_that_starts_a_new_segment_is_synced_in_the_thread(tmp_path: Path) -> None:
    where: list[str] = []

    async def scenario() -> None:
        # given a quick disk and segments of 4 KiB
        writer = writer_noting_where(tmp_path, place_on_loop(1.0), where, segment_bytes=4096)
        # when small batches are committed, then one that fills the segment, then small ones again
        await append_in_turns(writer, range(1, 4), per_turn=1)
        writer.append(sent(4, "y" * 5000), 1)
        await writer.flush()
        await append_in_turns(writer, range(5, 8), per_turn=1)
        await writer.close()

    asyncio.run(scenario())
    # then only the batch that rolled the segment was synced in the thread
    assert where == [LOOP] * 3 + [THREAD] + [LOOP] * 3
    assert len(list_segments(tmp_path)) == 2
    assert recovered(tmp_path) == list(range(1, 8))


def test_a_sync_that_fails_on_the_loop_fails_the_log(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    fatal: list[BaseException] = []
    failed_in: list[int] = []

    async def scenario() -> None:
        # given a quick disk that then fails
        writer = LogWriter(tmp_path, sync_place=place_on_loop(1.0), on_fatal=fatal.append)
        await append_in_turns(writer, range(1, 4))

        def broken(fd: int) -> None:
            failed_in.append(threading.get_ident())
            raise OSError(errno.EIO, "Input/output error")

        monkeypatch.setattr(os, "fdatasync", broken)
        # when a record is appended, then waiting for it fails, and so does every later append
        writer.append(sent(4), 1)
        with pytest.raises(LogFailed, match="Input/output error"):
            await writer.flush()
        with pytest.raises(LogFailed):
            writer.append(sent(5), 1)
        monkeypatch.undo()
        await writer.close()

    asyncio.run(scenario())
    # and the sync that failed ran on the loop, and the log's owner was told, as when the thread's sync fails
    assert failed_in == [threading.get_ident()]
    assert len(fatal) == 1 and isinstance(fatal[0], OSError)
    assert recovered(tmp_path)[:3] == [1, 2, 3]


def test_a_worker_s_logs_share_its_sync_place_and_its_metrics_count_where_they_synced(tmp_path: Path) -> None:
    async def scenario() -> tuple[float, float, float, float]:
        # given a worker of two partitions, past its calm period
        config = WorkerConfig(data_dir=tmp_path, worker_id="w", partitions=(0, 1), register=False)
        server = StorageWorker(config, {0: RECEIPT_KEY, 1: RECEIPT_KEY})
        address = await server.start()
        client = WorkerClient(*address, connect_timeout=1.0)
        try:
            place = server.sync_place
            assert all(r.log is not None and r.log.sync_place is place for r in server.replicas.values())
            place.calm_seconds = 0
            # when messages are sent to both partitions
            for partition in (0, 1):
                for i in range(5):
                    await client.send(partition, "q", [message(f"m{i}")], retention_seconds=RETENTION)
            before = samples(server)
            # and then a sync is slow (a limit of a nanosecond)
            place.quick_seconds = 1e-9
            await client.send(0, "q", [message("slow")], retention_seconds=RETENTION)
            after = samples(server)
        finally:
            await client.close()
            await server.close()
        return before + after

    on_loop, slow, on_loop_after, slow_after = asyncio.run(scenario())
    # then both partitions' commits were synced on the loop, none slow, and the slow one was counted
    assert on_loop >= 10 and slow == 0
    assert on_loop_after == on_loop + 1 and slow_after == 1


def samples(server: StorageWorker) -> tuple[float, float]:
    rendered = generate_latest(worker_registry(server)).decode()

    def value(name: str) -> float:
        line = next(line for line in rendered.splitlines() if line.startswith(f"{name} "))
        return float(line.split()[1])

    return value("ferrymq_worker_syncs_on_loop_total"), value("ferrymq_worker_slow_syncs_total")


def test_on_the_loop_the_answers_of_a_batch_go_out_before_the_next_batch_is_synced(tmp_path: Path) -> None:
    events: list[str] = []

    async def scenario() -> None:
        # given a writer syncing on the loop, and record A whose durability is answered as a connection answers
        # (its bytes sent at the end of the turn)
        loop = asyncio.get_running_loop()
        writer = LogWriter(tmp_path, sync_place=place_on_loop(1.0), on_sync=lambda _: events.append("sync"))
        writer.append(sent(1), 1)
        writer.when_durable(writer.end, lambda _: loop.call_soon(events.append, "answer A sent"), None)
        # when record B is appended while A's batch waits for its sync
        await asyncio.sleep(0)
        writer.append(sent(2), 1)
        await writer.flush()
        await writer.close()

    asyncio.run(scenario())
    # then A's answer was sent before B's batch was synced, not after
    assert events == ["sync", "answer A sent", "sync"]
    assert recovered(tmp_path) == [1, 2]
