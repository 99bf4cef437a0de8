"""Replication of a partition from a leader worker to a follower worker on loopback (static roles): replies
gated by the acks mode, the follower's state and log equal to the leader's, catch-up after a restart, and
the refusals of FETCH and of client requests sent to a follower."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest

from ferrymq.errors import NotLeader, StaleEpoch
from ferrymq.replication_rules import Acks
from ferrymq.rpc.client import WorkerClient
from ferrymq.storage.log import records as codec
from ferrymq.storage.replication import FollowerRole, LeaderRole
from ferrymq.storage.server import StorageWorker, WorkerConfig
from ferrymq.storage.server.replica import PartitionReplica
from tests.functional.storage_workers.test_server_fifo import fifo_message, message, receive
from tests.functional.storage_workers.worker_calls import RETENTION, eventually
from tests.support.engine_requests import RECEIPT_KEY

P = 0
ALL = LeaderRole(replicas=("leader", "follower"), acks=Acks.ALL)


@asynccontextmanager
async def node(
    data_dir: Path,
    worker_id: str,
    *,
    leads: LeaderRole | None = None,
    follows: FollowerRole | None = None,
    **config_fields: Any,
) -> AsyncIterator[tuple[PartitionReplica, WorkerClient, tuple[str, int]]]:
    """A worker with the given role for partition 0 (and ``config_fields`` of its WorkerConfig), its replica
    of it, a client and its address."""
    config = WorkerConfig(
        data_dir=data_dir,
        worker_id=worker_id,
        partitions=(P,),
        register=False,
        leads={P: leads} if leads is not None else {},
        follows={P: follows} if follows is not None else {},
        **{"transfer_hold_seconds": 1, **config_fields},
    )
    server = StorageWorker(config, {P: RECEIPT_KEY})
    address = await server.start()
    client = WorkerClient(*address, connect_timeout=1.0)
    try:
        yield server.replicas[P], client, address
    finally:
        await client.close()
        await server.close()


def following(address: tuple[str, int], **kwargs: object) -> FollowerRole:
    return FollowerRole(leader=address, retry_seconds=0.05, **kwargs)  # type: ignore[arg-type]


async def caught_up(leader: PartitionReplica, follower: PartitionReplica) -> None:
    """Until the follower's log ends where the leader's does (each replica's log as it is at each look: a
    follower that installs a copy of the leader's state gets a new one), both flushed."""

    async def same_end() -> bool:
        return (
            leader.log is not None and follower.log is not None and follower.log.end_offset == leader.log.end_offset
        )

    await eventually(same_end)
    assert leader.log is not None and follower.log is not None
    await leader.log.flush()
    await follower.log.flush()


def frames(replica: PartitionReplica) -> list[tuple[int, int, bytes]]:
    assert replica.log is not None
    with replica.log.read_from(replica.log.start_offset) as reader:
        return [(epoch, offset, bytes(payload)) for epoch, offset, payload in reader]


def test_with_acks_all_a_send_is_answered_only_once_the_follower_has_it(tmp_path: Path) -> None:
    async def scenario() -> None:
        # given a leader with acks=all and its one follower, replicating
        async with (
            node(tmp_path / "l", "leader", leads=ALL) as (leader, client, address),
            node(tmp_path / "f", "follower", follows=following(address)) as (follower, _, _),
        ):
            await client.send(P, "q", [message("warm-up")], retention_seconds=RETENTION)
            assert leader.log is not None and follower.follower is not None and leader.term is not None
            # when the follower stops fetching and a send arrives
            follower.follower.pause()
            end = leader.log.end_offset
            sending = asyncio.create_task(client.send(P, "q", [message("held")], retention_seconds=RETENTION))

            async def appended() -> bool:
                return leader.log is not None and leader.log.end_offset > end

            await eventually(appended)
            # then, with the leader's log durable and a later request on the same connection answered,
            await leader.log.flush()
            await client.ping()
            # the send is still not answered
            assert not sending.done()
            assert leader.term.stream.tracker.waiting == 1
            # when the follower fetches again, then it is answered
            follower.follower.resume()
            [result] = await sending
            assert result["id"]
            assert leader.term.stream.tracker.high_watermark == leader.log.end_offset

    asyncio.run(scenario())


def test_after_a_mixed_workload_the_followers_state_and_log_equal_the_leaders(tmp_path: Path) -> None:
    async def scenario() -> None:
        # given a leader with acks=all and its follower
        async with (
            node(tmp_path / "l", "leader", leads=ALL) as (leader, client, address),
            node(tmp_path / "f", "follower", follows=following(address)) as (follower, _, _),
        ):
            # when standard and FIFO queues get sends, receives, deletes and visibility changes
            await client.send(P, "q", [message(f"m{i}") for i in range(5)], retention_seconds=RETENTION)
            await client.send(P, "fifo.fifo", [fifo_message("g1", "f1"), fifo_message("g2", "f2")],
                              retention_seconds=RETENTION, fifo=True)
            got = await receive(client, "q", max_messages=3)
            await client.delete(P, "q", [got[0]["receipt"]])
            await client.change_visibility(P, "q", [(got[1]["receipt"], 0)])
            fifo_got = await receive(client, "fifo.fifo", fifo=True, attempt_id="attempt-1")
            await client.delete(P, "fifo.fifo", [fifo_got[0]["receipt"]])
            await caught_up(leader, follower)
            # then the follower holds the same messages and queue state as the leader
            assert follower.engine.state() == leader.engine.state()
            assert follower.engine.meta_state() == leader.engine.meta_state()
            assert leader.engine.state()["q"]
            # and the same log, record for record
            assert frames(follower) == frames(leader)

    asyncio.run(scenario())


def test_a_restarted_follower_catches_up_from_its_log_end_without_duplicates(tmp_path: Path) -> None:
    async def scenario() -> None:
        # given a leader in acks=leader whose tail buffer holds only a record or two, and a follower
        role = LeaderRole(replicas=("leader", "follower"), acks=Acks.LEADER, tail_bytes=64)
        async with node(tmp_path / "l", "leader", leads=role) as (leader, client, address):
            async with node(tmp_path / "f", "follower", follows=following(address)) as (follower, _, _):
                await client.send(P, "q", [message(f"a{i}") for i in range(3)], retention_seconds=RETENTION)
                await caught_up(leader, follower)
                assert follower.log is not None
                stopped_at = follower.log.end_offset
            # when the leader appends more while the follower is down
            for i in range(5):
                await client.send(P, "q", [message(f"b{i}")], retention_seconds=RETENTION)
            await receive(client, "q", max_messages=4)
            # (so far behind that what it lacks is no longer in the leader's tail buffer, but in its log)
            assert leader.term is not None and leader.term.stream.tail is not None
            tail = leader.term.stream.tail
            assert tail.first_offset is not None and tail.first_offset > stopped_at
            # and the follower restarts on its own log
            async with node(tmp_path / "f", "follower", follows=following(address)) as (follower, _, _):
                assert follower.log is not None and leader.log is not None
                assert follower.log.end_offset == stopped_at
                await caught_up(leader, follower)
                # then it fetched from its log end on: the logs match record for record, offsets dense
                assert frames(follower) == frames(leader)
                assert [offset for _, offset, _ in frames(follower)] == list(range(1, leader.log.end_offset))
                assert follower.engine.state() == leader.engine.state()
                assert follower.engine.meta_state() == leader.engine.meta_state()

    asyncio.run(scenario())


def test_with_acks_leader_sends_are_answered_without_any_follower(tmp_path: Path) -> None:
    async def scenario() -> None:
        # given a leader of two replicas in acks=leader whose follower never runs
        role = LeaderRole(replicas=("leader", "follower"), acks=Acks.LEADER)
        async with node(tmp_path / "l", "leader", leads=role) as (leader, client, _):
            # when messages are sent, then they are answered and stored
            await client.send(P, "q", [message("alone")], retention_seconds=RETENTION)
            assert [m["body"] for m in await receive(client, "q")] == ["alone"]
            assert leader.term is not None and leader.term.stream.tracker.acked == {}

    asyncio.run(scenario())


def test_a_fetch_waits_for_the_next_append_and_carries_the_logs_payload(tmp_path: Path) -> None:
    async def scenario() -> None:
        # given a leader with a follower replica that is not running, and a fetch from its log end
        async with node(tmp_path / "l", "leader", leads=ALL) as (leader, client, _):
            assert leader.term is not None and leader.log is not None
            start = leader.log.end_offset
            fetching = asyncio.create_task(client.fetch(P, "follower", 0, start, 1, max_bytes=1 << 20,
                                                        wait_ms=60_000))

            async def parked() -> bool:
                return leader.term is not None and leader.term.stream.waiting_fetches == 1

            await eventually(parked)
            assert not fetching.done()
            # when a send appends (its reply waits for the follower, so it is not awaited here)
            sending = asyncio.create_task(client.send(P, "q", [message("woken")], retention_seconds=RETENTION))
            # then the fetch is answered with that record, its bytes as the log stores them
            [(epoch, offset, payload)] = await fetching
            assert (epoch, offset) == (0, start)
            await leader.log.flush()
            assert frames(leader)[-1] == (epoch, offset, payload)
            assert codec.decode(payload)[0] == codec.decode(frames(leader)[-1][2])[0]
            # and the next fetch, acknowledging it, commits the send
            assert not sending.done()
            assert await client.fetch(P, "follower", 0, start + 1, start + 1, max_bytes=1 << 20, wait_ms=0) == []
            await sending

    asyncio.run(scenario())


def test_a_fetch_of_another_epoch_or_replica_is_refused_and_records_nothing(tmp_path: Path) -> None:
    async def scenario() -> None:
        # given a leader in epoch 3
        role = LeaderRole(replicas=("leader", "follower"), acks=Acks.ALL, epoch=3)
        async with node(tmp_path / "l", "leader", leads=role) as (leader, client, _):
            assert leader.term is not None
            # when a follower fetches under epoch 2, then it is fenced
            with pytest.raises(StaleEpoch):
                await client.fetch(P, "follower", 2, 1, 1, max_bytes=1024, wait_ms=0)
            # under epoch 4, this leader is the stale one
            with pytest.raises(NotLeader):
                await client.fetch(P, "follower", 4, 1, 1, max_bytes=1024, wait_ms=0)
            # a worker outside the replica set is refused as one whose view is stale (it may have been added a
            # moment ago, and asks again once the leader knows)
            with pytest.raises(StaleEpoch):
                await client.fetch(P, "stranger", 3, 1, 1, max_bytes=1024, wait_ms=0)
            # and none of them counted as an acknowledgement
            assert leader.term.stream.tracker.acked == {}
            # while the current epoch is answered
            assert await client.fetch(P, "follower", 3, 1, 1, max_bytes=1024, wait_ms=0) == []
            assert leader.term.stream.tracker.acked == {"follower": 1}

    asyncio.run(scenario())


def test_client_requests_to_a_follower_get_not_leader_and_change_nothing(tmp_path: Path) -> None:
    async def scenario() -> None:
        # given a follower of a running leader
        async with (
            node(tmp_path / "l", "leader", leads=ALL) as (_, _, address),
            node(tmp_path / "f", "follower", follows=following(address)) as (follower, client, _),
        ):
            assert follower.log is not None
            end = follower.log.end_offset
            # when it is sent a send, a receive, a stats and a fetch, then each is NotLeader
            for call in (
                client.send(P, "q", [message("astray")], retention_seconds=RETENTION),
                receive(client, "q"),
                client.stats(P, "q", retention_seconds=RETENTION),
                client.fetch(P, "leader", 0, 1, 1, max_bytes=1024, wait_ms=0),
            ):
                with pytest.raises(NotLeader):
                    await call
            # and its log and state are unchanged
            assert follower.log.end_offset == end
            assert follower.engine.state() == {}
            assert (await client.ping())["partitions"]["0"]["role"] == "follower"

    asyncio.run(scenario())


def test_roles_are_only_given_for_served_partitions_and_one_each(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="not served"):
        WorkerConfig(data_dir=tmp_path, partitions=(0,), leads={1: LeaderRole()})
    with pytest.raises(ValueError, match="both led and followed"):
        WorkerConfig(data_dir=tmp_path, partitions=(0,), leads={0: LeaderRole()},
                     follows={0: FollowerRole(leader=("127.0.0.1", 1))})
    config = WorkerConfig(data_dir=tmp_path, partitions=(0, 1), follows={1: FollowerRole(leader=("127.0.0.1", 1))})
    assert config.role(0) == LeaderRole() and isinstance(config.role(1), FollowerRole)
