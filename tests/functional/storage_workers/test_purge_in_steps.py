"""A purge of a queue larger than a step (``messages.STEP``) on serving workers: the queue is empty at once on the
leader and its follower, each frees the rows in steps of its own, and rows still to free survive a restart."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from ferrymq.storage.engine.messages import STEP
from ferrymq.storage.log.checkpoint import read_checkpoint
from ferrymq.storage.server.replica import PartitionReplica
from tests.functional.storage_workers.test_checkpoints import everything, full_replay_of
from tests.functional.storage_workers.test_replication import ALL, P, caught_up, following, node
from tests.functional.storage_workers.test_server_fifo import message, receive
from tests.functional.storage_workers.worker_calls import RETENTION, drain, eventually

BIG = STEP + 500
NO_MESSAGES = {"visible": 0, "in_flight": 0, "delayed": 0}


async def fill(client: object, queue_id: str, n: int) -> None:
    for start in range(0, n, 50):
        batch = [message(f"{queue_id}-{start + i}") for i in range(min(50, n - start))]
        await client.send(P, queue_id, batch, retention_seconds=RETENTION)  # type: ignore[attr-defined]


def rows_left(replica: PartitionReplica, n: int) -> object:
    async def freed() -> bool:
        return replica.engine.partition.table.live == n and not replica.engine.partition.unowned

    return freed


def test_a_large_purge_empties_the_queue_at_once_and_leader_and_follower_each_free_its_rows(
    tmp_path: Path,
) -> None:
    async def scenario() -> None:
        # given a leader with acks=all and its follower, a queue larger than a step, part of it in flight
        async with (
            node(tmp_path / "l", "leader", leads=ALL) as (leader, client, address),
            node(tmp_path / "f", "follower", follows=following(address)) as (follower, _, _),
        ):
            await fill(client, "big", BIG)
            await fill(client, "kept", 3)
            await receive(client, "big", max_messages=10)
            # when it is purged and a message sent to it after
            await client.purge(P, "big")
            assert await client.stats(P, "big", retention_seconds=RETENTION) == NO_MESSAGES
            await client.send(P, "big", [message("after")], retention_seconds=RETENTION)
            # then both replicas free the purged rows, keeping the other queue's and the new message
            await eventually(rows_left(leader, 4))
            await caught_up(leader, follower)
            await eventually(rows_left(follower, 4))
            assert follower.engine.state() == leader.engine.state()
            # and a receive finds the new message alone
            assert [m["body"] for m in await drain(client, "big")] == ["after"]
            assert len(await drain(client, "kept")) == 3

    asyncio.run(scenario())


def test_rows_still_to_free_at_a_stop_are_freed_after_the_next_start_and_nothing_else_changes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    async def purge_and_stop() -> None:
        # given a worker that is stopped before it frees anything (its freeing held back)
        with monkeypatch.context() as held:
            held.setattr(PartitionReplica, "_free_unowned_soon", lambda self: None)
            async with node(tmp_path, "w") as (replica, client, _):
                await fill(client, "big", BIG)
                await fill(client, "kept", 3)
                await client.purge(P, "big")
                assert replica.engine.partition.table.live == BIG + 3

    async def restart() -> tuple[object, ...]:
        async with node(tmp_path, "w") as (replica, client, _):
            # then the next start frees them, without a request
            await eventually(rows_left(replica, 3))
            assert await client.stats(P, "big", retention_seconds=RETENTION) == NO_MESSAGES
            return everything(replica)

    asyncio.run(purge_and_stop())
    # the clean stop's checkpoint holds the rows still to free
    found = read_checkpoint(tmp_path / "p0")
    assert found is not None and found.state.unowned and found.state.table.live == BIG + 3
    restarted = asyncio.run(restart())
    # and the state is the one a replay of the whole log makes
    assert restarted == asyncio.run(full_replay_of(tmp_path))
