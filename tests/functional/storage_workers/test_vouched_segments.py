"""A start from a checkpoint reads no sealed segment: their CRC-32s are checked against the checkpoint's after the
worker serves (``ferrymq.storage.server.vouched_segments``), and damage found then is handled as damage found at a
start, on real files, in a worker on loopback."""

from __future__ import annotations

import asyncio
import errno
import logging
import time
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest

from ferrymq.rpc.client import WorkerClient
from ferrymq.storage.log import recovery as recovery_module
from ferrymq.storage.log.checkpoint import FILE_NAME, read_checkpoint
from ferrymq.storage.log.format import CorruptSegment
from ferrymq.storage.log.segments import crc_of
from ferrymq.storage.server import StorageWorker, WorkerConfig
from ferrymq.storage.server import vouched_segments as vouched_module
from ferrymq.storage.server.replica import PartitionReplica
from tests.functional.storage_workers.test_checkpoints import everything, workload
from tests.functional.storage_workers.test_replication import P
from tests.functional.storage_workers.test_server_fifo import receive
from tests.support.engine_requests import RECEIPT_KEY
from tests.support.log_files import flip, frames_of

SMALL_SEGMENTS = {"segment_bytes": 4096}


@pytest.fixture(autouse=True)
def check_at_once(monkeypatch: pytest.MonkeyPatch) -> None:
    """The check begins as soon as the worker serves (its wait after a start is its own test's)."""
    monkeypatch.setattr(vouched_module, "START_DELAY_SECONDS", 0.0)


@asynccontextmanager
async def worker(data_dir: Path) -> AsyncIterator[tuple[StorageWorker, PartitionReplica, WorkerClient]]:
    server = StorageWorker(
        WorkerConfig(data_dir=data_dir, worker_id="w", partitions=(P,), register=False, **SMALL_SEGMENTS),
        {P: RECEIPT_KEY},
    )
    await server.start()
    assert server.address is not None
    client = WorkerClient(*server.address, connect_timeout=1.0)
    try:
        yield server, server.replicas[P], client
    finally:
        await client.close()
        await server.close()


async def checked(replica: PartitionReplica) -> None:
    async with asyncio.timeout(10):
        while replica.vouched.checking:
            await asyncio.sleep(0.01)


async def filled(data_dir: Path) -> tuple[Any, ...]:
    """A log of several segments, and the checkpoint its clean stop wrote; the state it holds."""
    async with worker(data_dir) as (_, replica, client):
        for round_ in range(6):
            await workload(client, round_)
        assert replica.log is not None and len(replica.log.segments) > 3
        return everything(replica)


def damage_sealed_segment(data_dir: Path) -> tuple[Path, int | None]:
    """Flip a byte inside a record of a sealed segment the checkpoint names; the segment, and its CRC-32 before."""
    found = read_checkpoint(data_dir / "p0")
    assert found is not None
    segment = data_dir / "p0" / f"{found.segments[1][0]:020d}.seg"
    before = crc_of(segment, segment.stat().st_size)
    flip(segment, frames_of(segment)[2].start + 12)
    return segment, before


async def stops_on_damage(server: StorageWorker) -> None:
    """Until the worker stopped, as after a log failure, on the damage its check of a sealed segment found."""
    async with asyncio.timeout(10):
        await server.stopped.wait()
    assert isinstance(server.fatal, CorruptSegment)


def test_a_start_reads_only_the_last_segment_and_checks_the_sealed_ones_while_serving(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    at_start: list[str] = []
    real = recovery_module.crc_of
    monkeypatch.setattr(recovery_module, "crc_of", lambda path, size: at_start.append(path.name) or real(path, size))

    async def scenario() -> None:
        before = await filled(tmp_path)
        found = read_checkpoint(tmp_path / "p0")
        assert found is not None
        at_start.clear()
        async with worker(tmp_path) as (server, replica, client):
            # the start read the CRC of the last segment only
            assert at_start == [f"{found.segments[-1][0]:020d}.seg"]
            assert everything(replica) == before
            assert await receive(client, "q", max_messages=10)
            await checked(replica)
            # the sealed ones were checked since, every byte the checkpoint named, and all held
            sealed = [(index, size) for index, _, size in found.segments[:-1]]
            assert replica.vouched.checked_bytes == sum(size for _, size in sealed)
            assert server.fatal is None and not replica.vouched.doubted
            # and the checkpoints this replica takes name the CRC-32 of their bytes, as checked
            crcs = {key[0]: crc for key, crc in replica._crcs.items()}
            assert crcs == {index: crc_of(tmp_path / "p0" / f"{index:020d}.seg", size) for index, size in sealed}

    asyncio.run(scenario())


def test_a_sealed_segment_damaged_while_stopped_stops_the_worker_and_the_next_start_names_the_damage(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    async def scenario() -> None:
        await filled(tmp_path)
        middle, _ = damage_sealed_segment(tmp_path)
        with caplog.at_level(logging.ERROR):
            async with worker(tmp_path) as (server, replica, _):
                # it started and served, then its check found the segment changed: it stops as after a log failure
                await stops_on_damage(server)
                assert middle.name in str(server.fatal)
                assert replica.vouched.doubted
        assert "no longer have the CRC-32 the checkpoint recorded" in caplog.text
        # no checkpoint vouches for that log any more: not the one it started from, nor one written at the stop
        assert not (tmp_path / "p0" / FILE_NAME).exists()
        # the next start walks every segment and finds the damaged range, as without a checkpoint
        async with worker(tmp_path) as (_, replica, _):
            assert replica.refusing and replica.damage is not None
            assert replica.damage.segment is not None and middle.name in replica.damage.segment

    asyncio.run(scenario())


def test_a_stop_before_the_check_ends_keeps_the_checkpoints_claim_for_the_next_start_to_check(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    async def scenario() -> None:
        await filled(tmp_path)
        middle, claimed = damage_sealed_segment(tmp_path)
        # a start whose check never gets to run before the stop
        hold = asyncio.Event()
        real = vouched_module.crc_of

        def held(path: Path, size: int, **pacing: Any) -> int | None:
            asyncio.run_coroutine_threadsafe(hold.wait(), loop).result()
            return real(path, size)

        loop = asyncio.get_running_loop()
        monkeypatch.setattr(vouched_module, "crc_of", held)
        async with worker(tmp_path) as (server, _, client):
            await workload(client, 9)
            assert server.fatal is None
        hold.set()
        monkeypatch.setattr(vouched_module, "crc_of", real)
        # the stop's checkpoint repeats the CRC-32 the first one recorded, not one of the changed bytes
        found = read_checkpoint(tmp_path / "p0")
        assert found is not None
        index = int(middle.stem)
        assert [crc for i, *_, crc in found.extents if i == index] == [claimed]
        # so the next start's check still finds the damage
        async with worker(tmp_path) as (server, _, _):
            await stops_on_damage(server)

    asyncio.run(scenario())


def test_a_segment_cut_since_the_start_is_not_taken_for_damage(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    async def scenario() -> None:
        await filled(tmp_path)
        real = vouched_module.crc_of
        replicas: list[PartitionReplica] = []

        def cut_meanwhile(path: Path, size: int, **pacing: Any) -> int | None:
            # a follower's truncation (or a compaction) rewrote the log while this segment was read
            deadline = time.monotonic() + 10
            while not replicas and time.monotonic() < deadline:
                time.sleep(0.01)
            assert replicas[0].log is not None
            replicas[0].log.rewrites += 1
            crc = real(path, size)
            return None if crc is None else crc ^ 1

        monkeypatch.setattr(vouched_module, "crc_of", cut_meanwhile)
        with caplog.at_level(logging.INFO):
            async with worker(tmp_path) as (server, replica, _):
                replicas.append(replica)
                await checked(replica)
                assert server.fatal is None and not replica.vouched.doubted
        assert "was rewritten since the start; its bytes were not checked" in caplog.text

    asyncio.run(scenario())


async def served_on(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, check: Callable[..., int | None]) -> None:
    """A start over a filled log whose vouched segments are checked with ``check``: the worker serves on, with
    the state it had, and nothing is taken for damage."""
    state = await filled(tmp_path)
    monkeypatch.setattr(vouched_module, "crc_of", check)
    async with worker(tmp_path) as (server, replica, _):
        await checked(replica)
        assert server.fatal is None and not replica.vouched.doubted
        assert everything(replica) == state


def test_a_segment_that_cannot_be_read_is_named_and_the_others_are_still_checked(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    real = vouched_module.crc_of
    read: list[str] = []

    def failing_once(path: Path, size: int, **pacing: Any) -> int | None:
        read.append(path.name)
        if len(read) == 1:
            raise OSError(errno.EIO, "Input/output error", str(path))
        return real(path, size, **pacing)

    # when the first segment checked cannot be read, then the worker serves on with the state it had
    with caplog.at_level(logging.INFO):
        asyncio.run(served_on(tmp_path, monkeypatch, failing_once))
    # and the unreadable segment is named, and every other was read
    assert len(read) > 2
    assert f"{read[0]} could not be read to check it against the checkpoint" in caplog.text
    assert f"{len(read) - 1} sealed segments" in caplog.text and "; 1 could not be read" in caplog.text


def test_a_check_that_fails_unexpectedly_says_so_and_the_worker_serves_on(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    def broken(path: Path, size: int, **pacing: Any) -> int | None:
        raise RuntimeError("a bug in the check")

    with caplog.at_level(logging.INFO):
        asyncio.run(served_on(tmp_path, monkeypatch, broken))
    # then the error is in the log, not lost with the task
    assert "the check of the sealed segments against the checkpoint stopped (RuntimeError('a bug in the " \
        "check'))" in caplog.text


def test_the_check_waits_out_the_start_s_first_seconds_and_a_rewrite_meanwhile_still_counts(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setattr(vouched_module, "START_DELAY_SECONDS", 2.0)

    async def scenario() -> None:
        await filled(tmp_path)
        real = vouched_module.crc_of
        read: list[Path] = []

        def differing(path: Path, size: int, **pacing: Any) -> int | None:
            read.append(path)
            crc = real(path, size)
            return None if crc is None else crc ^ 1

        monkeypatch.setattr(vouched_module, "crc_of", differing)
        with caplog.at_level(logging.INFO):
            async with worker(tmp_path) as (server, replica, _):
                # given a worker serving from its checkpoint: no sealed segment is read in the first seconds
                await asyncio.sleep(0.1)
                assert replica.vouched.checking and not read
                # when the log is rewritten during that wait (a follower's cut, a compaction)
                assert replica.log is not None
                replica.log.rewrites += 1
                await checked(replica)
                # then the segments are read after it, and bytes that differ are not taken for damage
                assert read and server.fatal is None and not replica.vouched.doubted
        assert "was rewritten since the start; its bytes were not checked" in caplog.text

    asyncio.run(scenario())
