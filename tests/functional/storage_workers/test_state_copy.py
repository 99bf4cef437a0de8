"""Catch-up by a copy of the leader's state: a follower that lacks records the leader compacted away (a new
replica, or one far behind) installs the leader's state as a base segment and fetches on from there."""

from __future__ import annotations

import asyncio
from pathlib import Path

from ferrymq.replication_rules import Acks
from ferrymq.storage.replication import LeaderRole
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
            # when a new, empty replica starts following it
            async with node(tmp_path / "b", "b", follows=following(address, epoch=2), **COMPACTING) as (b, _, _):
                # then it installs a copy of the leader's state and goes on from the log
                await caught_up(a, b)
                assert b.follower is not None and b.follower.copies == 1
                assert b.engine.state() == a.engine.state()
                # and later sends reach it through the log as usual
                await client.send(P, "q", [message("after the copy")], retention_seconds=RETENTION)
                await caught_up(a, b)
                assert b.engine.state() == a.engine.state()
                assert b.follower.copies == 1

    asyncio.run(scenario())
