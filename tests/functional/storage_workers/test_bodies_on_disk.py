"""Message bodies live in the partition's log, not in the worker's memory (``ferrymq.storage.log.bodies``): a
worker whose body cache holds nothing answers every receive from disk, after a restart, during and after a
compaction, and as a follower from its own log; and a damaged record is refused, never answered as a body."""

from __future__ import annotations

import asyncio
import hashlib
import os
import threading
import uuid
from collections.abc import Awaitable, Callable
from pathlib import Path

import pytest

from ferrymq.errors import InternalError
from ferrymq.replication_rules import Acks
from ferrymq.storage.log import bodies as bodies_module
from ferrymq.storage.log.bodies import POSITION_BITS, BodyStore
from ferrymq.storage.log.compaction import Placement
from ferrymq.storage.replication import LeaderRole
from ferrymq.storage.server.replica import PartitionReplica
from tests.functional.storage_workers.test_replication import ALL, P, caught_up, following, node
from tests.functional.storage_workers.test_server_fifo import receive
from tests.functional.storage_workers.worker_calls import RETENTION, eventually

COLD = {"body_cache_bytes": 0}
COMPACTING = {"segment_bytes": 4096, "compact_min_bytes": 1, "compact_ratio": 1.0}


def message(body: str, *, canonical_md5: bool = True) -> dict:
    """A message as the front end sends it; with a canonical MD5 the table keeps nothing of it but columns."""
    md5 = hashlib.md5(body.encode()).hexdigest() if canonical_md5 else "md5"
    return {"id": str(uuid.uuid4()), "body": body, "md5_body": md5, "system": {"SenderId": "AIDA"}}


def bodies_of(replica: PartitionReplica) -> BodyStore:
    return replica.bodies


async def send_all(client: object, bodies: list[str]) -> None:
    for start in range(0, len(bodies), 10):
        chunk = bodies[start : start + 10]
        await client.send(  # type: ignore[attr-defined]
            P, "q", [message(b, canonical_md5=i % 3 != 0) for i, b in enumerate(chunk)], retention_seconds=RETENTION
        )


async def receive_all(client: object, expected: int) -> dict[str, str]:
    """Every visible message of ``q`` (put in flight), by id: body."""
    got: dict[str, str] = {}
    while len(got) < expected:
        rows = await receive(client, "q")  # type: ignore[arg-type]
        if not rows:
            break
        got.update({row["id"]: row["body"] for row in rows})
    return got


def texts(n: int, size: int = 150) -> list[str]:
    return [f"{i:05d}-" + "é" * (i % 7) + "x" * size for i in range(n)]


def test_with_no_cache_every_body_comes_back_from_the_log_and_none_is_kept_in_memory(tmp_path: Path) -> None:
    async def scenario() -> None:
        # given a worker whose body cache holds nothing
        async with node(tmp_path, "w", **COLD) as (replica, client, _):
            sent = texts(35)
            # when messages are sent and become durable
            await send_all(client, sent)
            assert replica.log is not None
            await replica.log.flush()
            table = replica.engine.partition.table
            store = bodies_of(replica)
            # then the table holds no body: the plain rows keep nothing beside their columns, and every row
            # knows where its body lies
            assert table.live == 35
            assert not any(isinstance(e, str) for e in table.extra)
            assert sum(e is None for e in table.extra) >= 20
            assert all(table.loc[table.slot(seq)] for seq in range(1, 36))
            assert store.cache.size == 0 and not store._pending
            # and a receive reads them back from disk, exactly, with their MD5s
            reads = store.reads
            rows = await receive(client, "q", max_messages=10)
            assert all(row["md5_body"] in (hashlib.md5(row["body"].encode()).hexdigest(), "md5") for row in rows)
            assert sum(row["md5_body"] != "md5" for row in rows) >= 5
            got = await receive_all(client, 25)
            assert sorted([*got.values(), *(row["body"] for row in rows)]) == sorted(sent)
            assert store.reads > reads

    asyncio.run(scenario())


def test_after_a_restart_the_bodies_are_read_where_recovery_found_them(tmp_path: Path) -> None:
    async def scenario() -> None:
        sent = texts(25)
        async with node(tmp_path, "w", **COLD) as (_, client, _):
            await send_all(client, sent)
        # when the worker starts again from its log (its cache may hold bodies)
        async with node(tmp_path, "w") as (replica, client, _):
            store = bodies_of(replica)
            # then recovery placed every message without keeping or caching a body, and receives read them
            # from disk
            assert not store._pending and store.cache.size == 0
            table = replica.engine.partition.table
            assert all(table.loc[table.slot(seq)] for seq in range(1, 26))
            got = await receive_all(client, 25)
            assert sorted(got.values()) == sorted(sent)
            assert store.reads >= 3

    asyncio.run(scenario())


def test_a_cache_serves_a_consumer_keeping_up_without_reading_the_disk(tmp_path: Path) -> None:
    async def scenario() -> None:
        async with node(tmp_path, "w") as (replica, client, _):
            sent = texts(30)
            await send_all(client, sent)
            store = bodies_of(replica)
            got = await receive_all(client, 30)
            assert sorted(got.values()) == sorted(sent)
            assert store.reads == 0 and store.cache.hits >= 30

    asyncio.run(scenario())


def test_receives_during_and_after_a_compaction_read_the_old_files_then_the_new_base(tmp_path: Path) -> None:
    async def scenario() -> None:
        async with node(tmp_path, "w", **COLD, **COMPACTING) as (replica, client, _):
            assert replica.compactor is not None
            store = bodies_of(replica)
            relocate = replica.compactor.relocate
            assert relocate is not None
            folded = asyncio.Event()
            go = asyncio.Event()

            async def paused(indexes: list[int], base: int, placed: list[Placement]) -> None:
                folded.set()
                await go.wait()
                await relocate(indexes, base, placed)

            replica.compactor.relocate = paused
            # given messages spread over many small segments, half of them deleted
            sent = texts(120)
            await send_all(client, sent)
            gone: set[str] = set()
            while len(gone) < 60:
                rows = await receive(client, "q")
                await client.delete(P, "q", [row["receipt"] for row in rows])
                gone |= {row["body"] for row in rows}
            kept = sorted(set(sent) - gone)
            # when a compaction has written its base and deleted the segments it folded, but not yet moved the
            # rows that point into them
            await asyncio.wait_for(folded.wait(), 30)
            assert len(store._files) > 2
            # then every message is still read, through the (deleted) files it was placed in
            got = await receive_all(client, 60)
            assert sorted(got.values()) == kept
            # and once the rows moved to the new base, the folded files are let go and every body is read there
            go.set()
            await eventually(_ran(replica))
            table = replica.engine.partition.table
            files = {table.loc[slot] >> POSITION_BITS for slot in map(table.slot, range(1, 121)) if slot >= 0}
            assert files <= set(store._files)
            assert replica.log is not None and len(store._files) <= len(replica.log.segments)
            reads = store.reads
            held = [m[2] for m in replica.engine.state()["q"]]
            assert sorted(held) == kept
            assert store.reads > reads

    asyncio.run(scenario())


def test_the_files_a_compaction_folded_are_closed_off_the_event_loop(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # the folded files are unlinked: the last close of each has the file system free the file's blocks, which for
    # segments of 64 MiB held a loop 97 ms
    closes: list[tuple[int, list[int]]] = []
    real = bodies_module._close_all

    def noting(fds: list[int]) -> None:
        closes.append((threading.get_ident(), list(fds)))
        real(fds)

    monkeypatch.setattr(bodies_module, "_close_all", noting)

    async def scenario() -> None:
        async with node(tmp_path, "w", **COLD, **COMPACTING) as (replica, client, _):
            loop_thread = threading.get_ident()
            # given messages over many small segments, half of them deleted: a compaction folds the segments
            await send_all(client, texts(120))
            deleted = 0
            while deleted < 60:
                rows = await receive(client, "q")
                await client.delete(P, "q", [row["receipt"] for row in rows])
                deleted += len(rows)
            await eventually(_ran(replica))
            # then the files it folded were closed, not on the loop's thread, and the store keeps no more files
            # than the log has segments
            folded = [(thread, fds) for thread, fds in closes if fds]
            assert folded and all(thread != loop_thread for thread, _ in folded)
            assert replica.log is not None and len(bodies_of(replica)._files) <= len(replica.log.segments)
            # and the bodies are still read, from the base
            assert len(await receive_all(client, 60)) == 60

    asyncio.run(scenario())


def _ran(replica: PartitionReplica) -> Callable[[], Awaitable[bool]]:
    async def check() -> bool:
        compactor = replica.compactor
        return compactor is not None and compactor.runs >= 1 and not compactor.running

    return check


def test_a_follower_reads_bodies_from_its_own_log(tmp_path: Path) -> None:
    async def scenario() -> None:
        async with (
            node(tmp_path / "l", "leader", leads=ALL) as (leader, client, address),
            node(tmp_path / "f", "follower", follows=following(address), **COLD) as (follower, _, _),
        ):
            await send_all(client, texts(40))
            await caught_up(leader, follower)
            store = bodies_of(follower)
            # then every file the follower reads bodies from is in its own directory
            for fd, _ in store._files.values():
                assert os.readlink(f"/proc/self/fd/{fd}").startswith(str(tmp_path / "f"))
            # and its state, bodies included, is the leader's
            assert follower.engine.state() == leader.engine.state()
            assert store.reads > 0

    asyncio.run(scenario())


def test_a_follower_caches_no_bodies_until_it_leads_and_then_answers_from_its_log(tmp_path: Path) -> None:
    async def scenario() -> None:
        async with (
            node(tmp_path / "l", "leader", leads=ALL) as (leader, client, address),
            node(tmp_path / "f", "follower", follows=following(address)) as (follower, follower_client, _),
        ):
            sent = texts(40)
            await send_all(client, sent)
            await caught_up(leader, follower)
            # the leader keeps the bodies it stored for its consumers; the follower, which answers none, keeps none
            assert bodies_of(leader).cache.size > 0
            store = bodies_of(follower)
            assert store.cache.size == 0 and not store._pending
            # once it leads, it answers every body from its own log and keeps what it read
            await follower.lead(LeaderRole(replicas=("leader", "follower"), acks=Acks.LEADER, epoch=1))
            got = await receive_all(follower_client, 40)
            assert sorted(got.values()) == sorted(sent)
            assert store.reads > 0 and store.cache.size > 0
            # and what it stores from then on is cached as it becomes durable
            before = store.cache.size
            await send_all(follower_client, texts(5, size=300))
            assert store.cache.size > before

    asyncio.run(scenario())


def test_a_damaged_record_is_refused_not_answered_as_a_body(tmp_path: Path) -> None:
    async def scenario() -> None:
        async with node(tmp_path, "w", **COLD) as (replica, client, _):
            await send_all(client, ["a" * 200, "b" * 200])
            assert replica.log is not None
            await replica.log.flush()
            # when a byte of the first body changes on disk (the same length: it still decodes)
            segment = tmp_path / "p0" / sorted(os.listdir(tmp_path / "p0"))[0]
            data = segment.read_bytes()
            at = data.index(b"a" * 200)
            segment.write_bytes(data[:at] + b"A" + data[at + 1 :])
            # then a receive of it fails instead of answering the damaged body
            with pytest.raises(InternalError):
                await receive(client, "q")
            # and the worker still answers
            assert await client.ping() is not None

    asyncio.run(scenario())
