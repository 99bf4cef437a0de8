"""A worker that stops cleanly writes its partition's state as of its log's last record; the next start loads it
and replays only the records after it (``ferrymq.storage.log.checkpoint``).  Whatever the checkpoint, the state
is the one a replay of the whole log gives, and a checkpoint that is torn, stale or crafted is named and passed
over."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import mmap
import os
import pickle
import shutil
import struct
import tracemalloc
import zlib
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from ferrymq.storage.log import checkpoint as checkpoint_module
from ferrymq.storage.log import checkpoint_chain, mapped_chunks, reading
from ferrymq.storage.log.checkpoint import FILE_NAME, read_checkpoint
from ferrymq.storage.log.checkpoint_chain import HEAD, Head
from ferrymq.storage.server import mapped_columns
from ferrymq.storage.server import replica as replica_module
from ferrymq.storage.server.replica import PartitionReplica
from tests.functional.storage_workers.test_checkpoint_chain import mapped_files
from tests.functional.storage_workers.test_replication import P, node
from tests.functional.storage_workers.test_server_fifo import fifo_message, message, receive
from tests.functional.storage_workers.worker_calls import RETENTION
from tests.support.log_files import flip, frames_of

COMPACTING = {"segment_bytes": 4096, "compact_min_bytes": 1, "compact_ratio": 1.0}


async def workload(client: Any, round_: int) -> None:
    """Sends to a standard and a FIFO queue, receives, deletes, a visibility change, a delayed message."""
    await client.send(P, "q", [message(f"r{round_}-{i}-" + "x" * 100) for i in range(12)], retention_seconds=RETENTION)
    await client.send(P, "q", [{**message(f"later-{round_}"), "delay": 600}], retention_seconds=RETENTION)
    await client.send(P, "fifo.fifo", [fifo_message(f"g{round_}-{i % 3}", f"f{round_}-{i}") for i in range(6)],
                      retention_seconds=RETENTION, fifo=True)
    got = await receive(client, "q", max_messages=5)
    await client.delete(P, "q", [got[0]["receipt"], got[1]["receipt"]])
    await client.change_visibility(P, "q", [(got[2]["receipt"], 0)])
    fifo_got = await receive(client, "fifo.fifo", fifo=True, attempt_id=f"attempt-{round_}")
    await client.delete(P, "fifo.fifo", [fifo_got[0]["receipt"]])


def everything(replica: PartitionReplica) -> tuple[Any, ...]:
    engine = replica.engine
    return engine.state(), engine.meta_state(), engine.partition.credits_state(), engine.next_seq


def counting_recover(applied: list[Any]) -> Callable[..., Any]:
    """Recovery as the worker runs it, each record it applies noted in ``applied``."""
    real = replica_module.recover

    def counting(directory: Path, apply: Callable[[Any], None], **options: Any) -> Any:
        def counted(record: Any) -> None:
            applied.append(record)
            apply(record)

        return real(directory, counted, **options)

    return counting


async def full_replay_of(directory: Path) -> tuple[Any, ...]:
    """The state a worker rebuilds from the log alone, in a copy of ``directory`` without the checkpoint."""
    copy = directory.parent / f"{directory.name}-replayed"
    shutil.copytree(directory, copy)
    (copy / "p0" / FILE_NAME).unlink(missing_ok=True)
    async with node(copy, "w") as (replica, _, _):
        assert replica.bodies.applied_through == replica.log.end_offset - 1 if replica.log else False
        return everything(replica)


def test_a_clean_stop_writes_a_checkpoint_and_the_next_start_replays_nothing_before_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    applied: list[Any] = []

    async def scenario() -> None:
        async with node(tmp_path, "w") as (replica, client, _):
            await workload(client, 0)
            assert replica.log is not None
            end = replica.log.end_offset - 1
            before = everything(replica)
        # then the stop left a checkpoint as of the log's last record
        found = read_checkpoint(tmp_path / "p0")
        assert found is not None and found.offset == end
        # and a start loads it and applies no record: the state is the one the worker stopped with
        monkeypatch.setattr(replica_module, "recover", counting_recover(applied))
        async with node(tmp_path, "w") as (replica, client, _):
            assert applied == []
            assert everything(replica) == before
            got = await receive(client, "q", max_messages=10)
            assert got and all(row["body"].startswith(("r0-", "later-")) for row in got)

    asyncio.run(scenario())


def test_a_checkpoint_and_the_log_after_it_give_the_state_a_whole_replay_gives(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    async def scenario() -> None:
        # given a checkpoint written at a stop, and more records after it (a later run that did not stop
        # cleanly: no newer checkpoint)
        async with node(tmp_path, "w") as (_, client, _):
            await workload(client, 0)
        first = read_checkpoint(tmp_path / "p0")
        assert first is not None
        for round_ in (1, 2):
            async with node(tmp_path, "w") as (_, client, _):
                monkeypatch.setattr(PartitionReplica, "_write_checkpoint", _no_checkpoint)
                await workload(client, round_)
        monkeypatch.undo()
        again = read_checkpoint(tmp_path / "p0")
        assert again is not None and again.offset == first.offset
        # when the worker starts: the checkpoint, then the records after it
        async with node(tmp_path, "w") as (replica, client, _):
            from_checkpoint = everything(replica)
            assert replica.log is not None and replica.log.end_offset - 1 > first.offset
            # and it serves on from there
            await workload(client, 3)
            after = everything(replica)
        # then it holds what a replay of the whole log gives, before and after serving on
        assert from_checkpoint[0]["q"] and from_checkpoint[0]["fifo.fifo"]
        replayed = await full_replay_of(tmp_path)
        assert after == replayed

    asyncio.run(scenario())


async def _no_checkpoint(self: PartitionReplica) -> None:
    return None


def test_a_torn_checkpoint_is_named_and_the_whole_log_replayed(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    async def scenario() -> None:
        async with node(tmp_path, "w") as (replica, client, _):
            await workload(client, 0)
            before = everything(replica)
        path = tmp_path / "p0" / FILE_NAME
        data = path.read_bytes()
        path.write_bytes(data[: len(data) // 2])
        with caplog.at_level(logging.WARNING):
            async with node(tmp_path, "w") as (replica, _, _):
                assert everything(replica) == before
        assert any("torn or damaged" in r.getMessage() and "replaying the whole log" in r.getMessage()
                   for r in caplog.records)

    asyncio.run(scenario())


def test_a_checkpoint_of_segments_since_rewritten_is_not_used(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    async def scenario() -> None:
        async with node(tmp_path, "w") as (replica, client, _):
            await workload(client, 0)
        found = read_checkpoint(tmp_path / "p0")
        assert found is not None
        # when a segment it names is replaced by another file (as a rewrite without the checkpoint's deletion
        # would leave it)
        index = found.segments[-1][0]
        segment = tmp_path / "p0" / f"{index:020d}.seg"
        copy = segment.with_name("copy")
        copy.write_bytes(segment.read_bytes())
        os.replace(copy, segment)
        with caplog.at_level(logging.INFO):
            async with node(tmp_path, "w") as (replica, _, _):
                replayed = everything(replica)
        assert any("no longer has as they were" in r.getMessage() for r in caplog.records)
        assert replayed[0]["q"]

    asyncio.run(scenario())


def test_a_compaction_replaces_the_checkpoint_by_one_of_its_base_which_a_start_after_a_crash_uses(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    async def scenario() -> None:
        async with node(tmp_path, "w", **COMPACTING) as (_, client, _):
            await client.send(P, "q", [message("a" * 300) for _ in range(3)], retention_seconds=RETENTION)
        stopped = read_checkpoint(tmp_path / "p0")
        assert stopped is not None
        # given a worker that compacts, and will not stop cleanly (no checkpoint at its stop)
        monkeypatch.setattr(PartitionReplica, "_write_checkpoint", _no_checkpoint)
        async with node(tmp_path, "w", **COMPACTING) as (replica, client, _):
            assert replica.compactor is not None and replica.log is not None
            for round_ in range(40):
                await workload(client, 10 + round_)
                got = await receive(client, "q", max_messages=10)
                await client.delete(P, "q", [row["receipt"] for row in got])
                if replica.compactor.runs >= 2:
                    break
            await _compacted(replica)
            base = replica.log.segments[0]
            # then the checkpoint is the state the new base holds, as of its offset
            found = read_checkpoint(tmp_path / "p0")
            assert found is not None and found.offset == base.first_offset - 1 > stopped.offset
            assert found.segments == [found.segments[0]] and found.segments[0][0] == base.index
            # and the worker goes on past it
            await workload(client, 99)
        latest = read_checkpoint(tmp_path / "p0")
        assert latest is not None and len(latest.segments) == 1 and latest.offset >= found.offset
        replayed = await full_replay_of(tmp_path)
        # when it starts again: from that checkpoint and the log after the base, not from the whole log
        with caplog.at_level(logging.INFO):
            async with node(tmp_path, "w", **COMPACTING) as (replica, client, _):
                # then it holds what a replay of the whole log gives, and serves from it
                assert everything(replica) == replayed
                got = await receive(client, "q", max_messages=10)
                assert got and all(row["body"] for row in got)
        assert any(f"starting from the checkpoint as of offset {latest.offset}" in r.getMessage()
                   for r in caplog.records)

    asyncio.run(scenario())


async def _compacted(replica: PartitionReplica) -> None:
    """Until no compaction is running (its checkpoint is written by then)."""
    assert replica.compactor is not None
    for _ in range(200):
        if not replica.compactor.running:
            return
        await asyncio.sleep(0.02)
    raise AssertionError("compaction did not finish")


def test_a_crafted_checkpoint_runs_no_code_and_is_passed_over(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    marker = tmp_path / "ran"

    class Exploit:
        def __reduce__(self) -> tuple[Any, ...]:
            return (os.system, (f"touch {marker}",))

    class BadColumn:
        """A table's column of a kind no column has, or of bytes that are no whole number of its rows."""

        def __init__(self, kind: str, data: bytes) -> None:
            self.kind, self.data = kind, data

        def __reduce__(self) -> tuple[Any, ...]:
            return (checkpoint_module._column, (self.kind, self.data))

    async def scenario() -> None:
        async with node(tmp_path, "w") as (replica, client, _):
            await workload(client, 0)
            before = everything(replica)
        found = read_checkpoint(tmp_path / "p0")
        assert found is not None
        # when someone puts a checkpoint there whose head and checksum are right, and whose payload calls a
        # function when loaded
        for payload in (
            pickle.dumps((found.offset, found.segments, found.files, Exploit()), protocol=5),
            pickle.dumps((found.offset, found.segments, found.files, {"not": "a state"}), protocol=5),
            pickle.dumps((found.offset, found.segments, found.files, BadColumn("q", bytes(7))), protocol=5),
            pickle.dumps((found.offset, found.segments, found.files, BadColumn("O", bytes(8))), protocol=5),
        ):
            # (of the first version: one file whose whole payload is unpickled)
            head = struct.pack(">8sHQQI", checkpoint_module.MAGIC, 1, found.offset, len(payload), zlib.crc32(payload))
            (tmp_path / "p0" / FILE_NAME).write_bytes(head + payload)
            caplog.clear()
            with caplog.at_level(logging.WARNING):
                async with node(tmp_path, "w") as (replica, _, _):
                    assert everything(replica) == before
            # then nothing ran, it was named, and the state came from the log
            assert not marker.exists()
            assert any("replaying the whole log" in r.getMessage() for r in caplog.records)

    asyncio.run(scenario())


def test_a_start_from_a_checkpoint_walks_no_segment_it_vouches_for_unless_a_byte_of_the_last_changed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    walked: list[str] = []
    real_batches = reading.WindowedWalk.batches

    def noting(self: reading.WindowedWalk) -> Any:
        walked.append(self.path.name)
        return real_batches(self)

    monkeypatch.setattr(reading.WindowedWalk, "batches", noting)

    async def scenario() -> None:
        # given a log of several segments, and the checkpoint its clean stop wrote (with each segment's CRC-32)
        async with node(tmp_path, "w", segment_bytes=4096) as (replica, client, _):
            for round_ in range(6):
                await workload(client, round_)
            before = everything(replica)
            assert replica.log is not None and len(replica.log.segments) > 3
        found = read_checkpoint(tmp_path / "p0")
        assert found is not None and len(found.extents) == len(found.segments) > 3
        # when the worker starts again: no segment is walked frame by frame
        walked.clear()
        async with node(tmp_path, "w", segment_bytes=4096) as (replica, _, _):
            assert everything(replica) == before
            assert walked == []
        # and when a byte of the last segment changed since (sealed ones are checked after the start:
        # test_vouched_segments.py)
        last = tmp_path / "p0" / f"{found.segments[-1][0]:020d}.seg"
        frame = frames_of(last)[2]
        flip(last, frame.start + 12)
        async with node(tmp_path, "w", segment_bytes=4096) as (replica, _, _):
            # then that segment is walked at the start, and the damage is found as without a checkpoint
            assert walked == [last.name]
            assert replica.damage is not None and replica.refusing

    asyncio.run(scenario())


def test_a_checkpoint_is_loaded_and_written_without_its_payload_held_whole_in_memory(tmp_path: Path) -> None:
    async def scenario() -> None:
        async with node(tmp_path, "w") as (_, client, _):
            for round_ in range(200):
                batch = [message(f"m{round_}-{i}") for i in range(10)]
                await client.send(P, "q", batch, retention_seconds=RETENTION)

    asyncio.run(scenario())
    size = (tmp_path / "p0" / FILE_NAME).stat().st_size
    tracemalloc.start()
    try:
        found = read_checkpoint(tmp_path / "p0")
        kept, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert found is not None and found.state.table.live == 2000
    # beyond the state it built, the load held about the file's size at once (1.2 times here); reading the file
    # whole first, and copying it once more for the unpickler, held about three times it
    assert peak - kept < 2 * size, ((peak - kept) / size, kept / size)
    # and writing it again (as a stop or a checkpoint's child does) holds less than the file (at this size mostly
    # the pickler's own small objects); building the payload whole, beside a copy of every array, held 2.3 times it
    again = tmp_path / "again"
    again.mkdir()
    tracemalloc.start()
    try:
        written = checkpoint_module.write_checkpoint(again, found)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert written == size and _without_chain_id(again / FILE_NAME) == _without_chain_id(tmp_path / "p0" / FILE_NAME)
    assert peak < 1.2 * size, peak / size


def _without_chain_id(path: Path) -> bytes:
    """A checkpoint file's bytes with its chain id (drawn at random for each base) zeroed."""
    data = path.read_bytes()
    head = Head._make(HEAD.unpack_from(data))._replace(chain_id=0)
    return HEAD.pack(*head) + data[HEAD.size:]



def _load_accounts_open() -> int:
    """Descriptors of this process open on a thread's ``schedstat`` (what a load's account reads)."""
    found = 0
    for fd in os.listdir("/proc/self/fd"):
        with contextlib.suppress(OSError):
            found += os.readlink(f"/proc/self/fd/{fd}").endswith("/schedstat")
    return found


def test_a_start_leaves_no_descriptor_of_its_load_account_open_whatever_the_checkpoint(tmp_path: Path) -> None:
    async def scenario() -> None:
        before = _load_accounts_open()
        # given starts with no checkpoint, then with one, then with one that is not a checkpoint at all
        async with node(tmp_path, "w") as (_, client, _):
            await workload(client, 0)
        assert (tmp_path / "p0" / FILE_NAME).exists()
        async with node(tmp_path, "w"):
            pass
        (tmp_path / "p0" / FILE_NAME).write_bytes(b"FERRYCKP" + bytes(64))
        async with node(tmp_path, "w"):
            pass
        # then each closed what it opened to account for its load
        assert _load_accounts_open() == before

    asyncio.run(scenario())


def test_a_worker_started_from_a_checkpoint_maps_it_then_copies_it_into_its_own_memory_while_serving(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    # (chunks of a page and arrays of 1 KiB or more out of band: a few hundred messages make a mapped checkpoint)
    monkeypatch.setattr(checkpoint_chain, "CHUNK", mmap.PAGESIZE)
    monkeypatch.setattr(checkpoint_chain, "OUT_OF_BAND_MIN", 1024)
    monkeypatch.setattr(mapped_columns, "START_DELAY_SECONDS", 0.2)
    directory = tmp_path / "p0"

    async def scenario() -> None:
        async with node(tmp_path, "w") as (replica, client, _):
            for round_ in range(40):
                await workload(client, round_)
            before = everything(replica)
        # given a clean stop's checkpoint
        assert (directory / FILE_NAME).exists()
        caplog.clear()
        with caplog.at_level(logging.INFO, logger="ferrymq.storage.server.mapped_columns"):
            # when the worker starts again
            async with node(tmp_path, "w") as (replica, client, _):
                assert everything(replica) == before
                # then, while it serves, what its load mapped is copied into its own memory, a step at a time
                for _ in range(500):
                    if any("copied into the worker's own memory" in r.getMessage() for r in caplog.records):
                        break
                    await asyncio.sleep(0.01)
                else:
                    raise AssertionError("the mapped pages were never copied")
                assert mapped_chunks.mapped_bytes() == 0 and not mapped_files(directory)
                assert everything(replica) == before
                await workload(client, 99)

    asyncio.run(scenario())
