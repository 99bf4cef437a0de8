"""What replicating a record costs the leader and a follower when a client sends one message at a time: one
fetch per record, not a second one that could only come back empty while the follower's log syncs; and each
record decoded once in all, by the follower that applies it (the leader encoded it, it need not read it back)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest

from ferrymq.replication_rules import Acks
from ferrymq.rpc.client import WorkerClient
from ferrymq.storage.log import records as codec
from ferrymq.storage.replication import follower as follower_module
from ferrymq.storage.replication.roles import LeaderRole
from ferrymq.storage.server.damage import LOST_COPY_MARK
from ferrymq.storage.server.replica import PartitionReplica
from tests.functional.storage_workers.test_replication import ALL, P, caught_up, following, node
from tests.functional.storage_workers.test_server_fifo import message
from tests.functional.storage_workers.worker_calls import RETENTION

SENDS = 20


@asynccontextmanager
async def caught_up_pair(
    tmp_path: Path, leads: LeaderRole
) -> AsyncIterator[tuple[PartitionReplica, WorkerClient, PartitionReplica]]:
    """A leader (its replica and a client) and its follower's replica, the follower caught up on a first message."""
    async with (
        node(tmp_path / "l", "leader", leads=leads) as (leader, client, address),
        node(tmp_path / "f", "follower", follows=following(address)) as (follower, _, _),
    ):
        await client.send(P, "q", [message("first")], retention_seconds=RETENTION)
        await caught_up(leader, follower)
        yield leader, client, follower


def test_a_follower_sent_one_record_at_a_time_fetches_once_per_record(tmp_path: Path) -> None:
    async def scenario() -> None:
        # given a leader in acks=all and its follower, caught up
        async with caught_up_pair(tmp_path, ALL) as (leader, client, follower):
            assert follower.follower is not None
            before = follower.follower.fetches
            # when twenty sends go one at a time, each answered once the follower has its record durable
            for i in range(SENDS):
                await client.send(P, "q", [message(f"m{i}")], retention_seconds=RETENTION)
            # then the follower made one fetch per record (each bringing the record and acknowledging the one
            # before), not a second one per record that could only come back empty while its log synced
            assert follower.follower.fetches - before <= SENDS + 1
            await caught_up(leader, follower)
            assert follower.engine.state() == leader.engine.state()

    asyncio.run(scenario())


def test_each_replicated_record_is_decoded_once_by_the_follower_alone(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    decoded: list[int] = []
    decode = codec.decode

    def counting(payload: Any) -> Any:
        decoded.append(len(payload))
        return decode(payload)

    async def scenario() -> None:
        # given a leader in acks=all and its follower, caught up
        async with caught_up_pair(tmp_path, ALL) as (leader, client, follower):
            # when twenty sends are replicated, every decode of a log payload counted
            monkeypatch.setattr(codec, "decode", counting)
            for i in range(SENDS):
                await client.send(P, "q", [message(f"m{i}")], retention_seconds=RETENTION)
            await caught_up(leader, follower)
            monkeypatch.setattr(codec, "decode", decode)
            # then the follower holds them all, and each was decoded once: by the follower, to apply it
            assert follower.engine.state() == leader.engine.state()
            assert len(decoded) == SENDS

    asyncio.run(scenario())


def test_the_lost_copy_mark_is_looked_for_on_disk_once_not_before_every_fetch(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    looked: list[Path] = []
    exists = Path.exists

    def counting(path: Path) -> bool:
        if path.name == LOST_COPY_MARK:
            looked.append(path)
        return exists(path)

    async def scenario() -> None:
        # given a leader and its follower, with every look for the lost-copy mark counted
        monkeypatch.setattr(Path, "exists", counting)
        async with (
            node(tmp_path / "l", "leader", leads=ALL) as (leader, client, address),
            node(tmp_path / "f", "follower", follows=following(address)) as (follower, _, _),
        ):
            # when twenty sends are replicated, a fetch or more each
            for i in range(SENDS):
                await client.send(P, "q", [message(f"m{i}")], retention_seconds=RETENTION)
            await caught_up(leader, follower)
            assert follower.follower is not None and follower.follower.fetches >= SENDS
        # then the follower looked for the mark once (it has none: it never lost its copy)
        assert len(looked) == 1

    asyncio.run(scenario())


ALONE = LeaderRole(replicas=("leader", "follower"), acks=Acks.LEADER)


def test_a_follower_applying_a_long_fetch_lets_the_loop_turn_between_records(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    turns_at_apply: list[int] = []
    turns = 0

    async def ticker() -> None:
        nonlocal turns
        while True:
            turns += 1
            await asyncio.sleep(0)

    async def scenario() -> None:
        # given a follower paused while its leader (acknowledging alone) stores twenty records, so that one fetch
        # brings them all
        async with caught_up_pair(tmp_path, ALONE) as (leader, client, follower):
            assert follower.follower is not None
            follower.follower.pause()
            for i in range(SENDS):
                await client.send(P, "q", [message(f"m{i}")], retention_seconds=RETENTION)
            host = follower.follower.host
            apply = host.apply

            def applying(record: Any) -> None:
                turns_at_apply.append(turns)
                apply(record)

            monkeypatch.setattr(host, "apply", applying)
            # when it resumes with every record's work over the turn's time (a zero-second turn), beside a task
            # counting the loop's turns
            monkeypatch.setattr(follower_module, "APPLY_TURN_SECONDS", 0.0)
            counting = asyncio.get_running_loop().create_task(ticker())
            follower.follower.resume()
            await caught_up(leader, follower)
            counting.cancel()
            assert follower.engine.state() == leader.engine.state()

    asyncio.run(scenario())
    # then the loop turned between every two records applied, not once per fetch
    assert len(turns_at_apply) >= SENDS - 1  # (one fetch may have been under way when it paused)
    assert len(set(turns_at_apply)) == len(turns_at_apply)
