"""Catch-up by a copy of the leader's state: a follower that lacks records the leader compacted away (a new
replica, or one far behind) installs the leader's first segment (a base holding the state, streamed as bytes)
and fetches on from there.  A leader of before COPY_BASE sends its state as records instead."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from ferrymq.errors import InvalidParameterValue, SnapshotNeeded, StaleEpoch
from ferrymq.replication_rules import Acks
from ferrymq.rpc.client import WorkerClient
from ferrymq.rpc.framing import Op
from ferrymq.storage.log.base_copy import MAX_COPY_READ, STAGED_COPY, BaseSource
from ferrymq.storage.replication import LeaderRole
from ferrymq.storage.server.handlers import PARTITION_OPS
from ferrymq.storage.server.replica import PartitionReplica
from tests.functional.storage_workers.test_replication import P, caught_up, following, node
from tests.functional.storage_workers.test_server_fifo import message, receive
from tests.functional.storage_workers.worker_calls import RETENTION, eventually

COMPACTING = {"segment_bytes": 4096, "compact_min_bytes": 1, "compact_ratio": 1.0}
"""A log that rolls every few KiB and is compacted as soon as it can be."""


def test_a_new_replica_catches_up_from_a_copy_of_the_leader_s_state_then_from_its_log(tmp_path: Path) -> None:
    async def scenario() -> None:
        both = LeaderRole(replicas=("a", "b"), isr=frozenset({"a"}), acks=Acks.LEADER, epoch=2)
        async with node(tmp_path / "a", "a", leads=both, **COMPACTING) as (a, client, address):
            # given a leader that took many sends and deletes and compacted its log
            for i in range(60):
                await client.send(P, "q", [message(f"m{i}-{'x' * 200}")], retention_seconds=RETENTION)
            got = await receive(client, "q", max_messages=10)
            await client.delete(P, "q", [m["receipt"] for m in got])

            async def compacted() -> bool:
                return a.log is not None and a.log.start_offset > 1

            await eventually(compacted)
            # (a compaction while the copy is taken makes it stale, and it is taken again: under load that can
            # happen, and this test counts copies)
            assert a.compactor is not None
            a.compactor.min_bytes = 1 << 40
            # when a new, empty replica starts following it
            async with node(tmp_path / "b", "b", follows=following(address, epoch=2), **COMPACTING) as (b, _, _):
                # then it installs a copy of the leader's state and goes on from the log
                await caught_up(a, b)
                assert b.follower is not None and b.follower.copies == 1
                assert b.follower.copied_bytes > 0
                assert b.engine.state() == a.engine.state()
                # and later sends reach it through the log as usual
                await client.send(P, "q", [message("after the copy")], retention_seconds=RETENTION)
                await caught_up(a, b)
                assert b.engine.state() == a.engine.state()
                assert b.follower.copies == 1

    asyncio.run(scenario())


BOTH = LeaderRole(replicas=("a", "b"), isr=frozenset({"a"}), acks=Acks.LEADER, epoch=2)
BODY = "x" * 2000


async def compacted_leader(a: PartitionReplica, client: WorkerClient, batches: int) -> None:
    """Fill the leader with ``batches`` sends of ten 2 KB messages, then have it compact once."""
    for i in range(batches):
        await client.send(P, "q", [message(f"m{i}-{j}-{BODY}") for j in range(10)], retention_seconds=RETENTION)
    assert a.compactor is not None
    # The live state is estimated a little above its bytes in the log: any ratio below 1 makes compaction due.
    a.compactor.min_bytes, a.compactor.ratio = 1, 0.5
    await client.send(P, "q", [message("sealing")], retention_seconds=RETENTION)

    async def compacted() -> bool:
        await client.send(P, "q", [message("more")], retention_seconds=RETENTION)
        return a.log is not None and a.log.start_offset > 1

    await eventually(compacted)
    # Compacting on every commit from here on would make this test's copies stale as fast as they are made.
    a.compactor.min_bytes = 1 << 40
    compactor = a.compactor

    # A compaction started by one of the sends above may still be running (its base is in place before it counts
    # itself): the tests count compactions from here, so it must be done first.
    async def settled() -> bool:
        return not compactor.running

    await eventually(settled)


def test_a_copy_streamed_while_writes_continue_holds_off_compaction_and_keeps_only_a_chunk_in_memory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("ferrymq.storage.replication.follower.COPY_CHUNK_BYTES", 64 * 1024)

    async def scenario() -> None:
        async with node(tmp_path / "a", "a", leads=BOTH, segment_bytes=1024 * 1024) as (a, client, address):
            # given a leader whose compacted base holds several MB
            await compacted_leader(a, client, 300)
            assert a.compactor is not None and a.log is not None
            base_bytes = a.log.segments[0].size
            assert base_bytes > 4 * 1024 * 1024
            runs_before = a.compactor.runs
            sent = 0
            runs_while_copying: set[int] = set()
            due_while_copying: set[bool] = set()

            async def keep_sending() -> None:
                nonlocal sent
                while True:
                    await client.send(P, "q", [message(f"during-{sent}")], retention_seconds=RETENTION)
                    sent += 1
                    assert a.term is not None
                    if a.term.copies.active:
                        assert a.compactor is not None
                        # Compaction is due on every commit from the copy's start on (one made due before it
                        # could start before the copy does, and end during it: nothing holds that off).
                        if not runs_while_copying:
                            a.compactor.min_bytes = 1
                        runs_while_copying.add(a.compactor.runs)
                        due_while_copying.add(a.compactor.due())

            # when a new replica copies it while sends go on
            async with node(tmp_path / "b", "b", follows=following(address, epoch=2)) as (b, _, _):
                sender = asyncio.create_task(keep_sending())

                async def copied() -> bool:
                    return b.follower is not None and b.follower.copies == 1

                await eventually(copied)
                await asyncio.sleep(0.2)
                sender.cancel()
                await asyncio.gather(sender, return_exceptions=True)
                a.compactor.min_bytes = 1 << 40
                await caught_up(a, b)
                # then it installed one copy, streamed in chunks, and holds every message the leader holds
                assert b.follower is not None and b.follower.copies == 1
                assert b.follower.copied_bytes >= base_bytes
                assert b.follower.copy_memory <= 3 * 1024 * 1024
                assert b.engine.state() == a.engine.state()
                assert sent > 0
                # and no compaction ran while the copy was being read, though one was due throughout
                assert runs_while_copying == {runs_before}, "a compaction ran while the copy was held"
                assert True in due_while_copying
                assert not (b.directory / STAGED_COPY).exists()

    asyncio.run(scenario())


def test_a_copy_damaged_on_the_way_is_thrown_away_and_taken_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    reads = 0
    real_read = BaseSource.read

    async def flipping(self: BaseSource, position: int, max_bytes: int) -> bytes:
        nonlocal reads
        data = await real_read(self, position, max_bytes)
        reads += 1
        if reads == 1:
            return data[:100] + bytes([data[100] ^ 0xFF]) + data[101:]
        return data

    monkeypatch.setattr(BaseSource, "read", flipping)

    async def scenario() -> None:
        async with node(tmp_path / "a", "a", leads=BOTH) as (a, client, address):
            await compacted_leader(a, client, 40)
            async with node(tmp_path / "b", "b", follows=following(address, epoch=2)) as (b, _, _):
                await caught_up(a, b)
                assert b.follower is not None
                assert b.follower.refused_copies == 1
                assert b.follower.copies == 1
                assert b.engine.state() == a.engine.state()
                assert not (b.directory / STAGED_COPY).exists()

    asyncio.run(scenario())


def test_a_follower_takes_the_state_as_records_from_a_leader_of_before_base_copies(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A worker of before COPY_BASE answers it as an operation it does not know.
    monkeypatch.setattr("ferrymq.storage.server.worker.PARTITION_OPS", PARTITION_OPS - {Op.COPY_BASE})

    async def scenario() -> None:
        async with node(tmp_path / "a", "a", leads=BOTH) as (a, client, address):
            await compacted_leader(a, client, 20)
            async with node(tmp_path / "b", "b", follows=following(address, epoch=2)) as (b, _, _):
                await caught_up(a, b)
                assert b.follower is not None and b.follower.copies == 1
                assert b.follower.copied_bytes == 0
                assert b.engine.state() == a.engine.state()

    asyncio.run(scenario())


def test_hostile_copy_requests_are_refused_and_the_leader_serves_on(tmp_path: Path) -> None:
    async def scenario() -> None:
        async with node(tmp_path / "a", "a", leads=BOTH) as (a, client, _):
            await compacted_leader(a, client, 20)
            # a copy begun by the follower it is for
            copy, offset, size, data = await client.copy_base(P, "b", 2, 0, 0, 1 << 30)
            assert offset >= 1 and len(data) == min(size, MAX_COPY_READ)
            with pytest.raises(InvalidParameterValue):
                await client.copy_base(P, "b", 2, copy, -1, 10)
            with pytest.raises(InvalidParameterValue):
                await client.copy_base(P, "b", 2, copy, size + 1, 10)
            with pytest.raises(InvalidParameterValue):
                await client.copy_base(P, "b", 2, copy, 0, 0)
            with pytest.raises(InvalidParameterValue):
                await client.copy_base(P, "a", 2, 0, 0, 10)  # the leader itself
            with pytest.raises(InvalidParameterValue):
                await client._call(Op.COPY_BASE, [P, "b", 2, "0", 0, 10])
            with pytest.raises(InvalidParameterValue):
                await client._call(Op.COPY_BASE, [P, "b", 2])
            with pytest.raises(StaleEpoch):
                await client.copy_base(P, "intruder", 2, 0, 0, 10)
            with pytest.raises(StaleEpoch):
                await client.copy_base(P, "b", 1, 0, 0, 10)
            # a copy id guessed, or another follower's, is not served
            with pytest.raises(SnapshotNeeded):
                await client.copy_base(P, "b", 2, copy + 1, 0, 10)
            # what was asked past the end is nothing
            assert (await client.copy_base(P, "b", 2, copy, size, 10))[3] == b""
            assert a.term is not None and a.term.copies.active
            # a fetch from the log lets the copy go, and the leader serves on
            await client.fetch(P, "b", 2, a.log.end_offset if a.log else 1, 0, max_bytes=10, wait_ms=0)
            assert not a.term.copies.active
            await client.send(P, "q", [message("still serving")], retention_seconds=RETENTION)

    asyncio.run(scenario())
