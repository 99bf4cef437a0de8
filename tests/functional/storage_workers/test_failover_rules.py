"""Failover on loopback, deterministically: roles are changed by hand in the order an election would change
them, so each interleaving is the one under test.

- A paused old leader that wakes up after a new leader was elected appends under its old epoch; nobody
  acknowledges that epoch any more, so none of its late writes is answered as a success, and when it learns
  of the new epoch it answers them "outcome unknown", cuts them from its log and follows.
- A replica that rejoins with a diverged tail (records of an epoch the new leader never saw) cuts exactly
  that tail, rebuilds its state from what is left, and ends with the leader's log and state.
"""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

import pytest

from ferrymq.errors import NotLeader, ServiceUnavailable
from ferrymq.replication_rules import Acks
from ferrymq.storage.replication import LeaderRole
from tests.functional.storage_workers.test_replication import P, caught_up, following, frames, node
from tests.functional.storage_workers.test_server_fifo import message, receive
from tests.functional.storage_workers.worker_calls import RETENTION, eventually

ABC = ("a", "b", "c")


def test_a_paused_old_leader_cannot_get_a_late_write_acknowledged(tmp_path: Path) -> None:
    async def scenario() -> None:
        # given a leads epoch 2 of a replica set of three with majority acks, b and c following
        async with (
            node(tmp_path / "a", "a", leads=LeaderRole(replicas=ABC, acks=Acks.MAJORITY, epoch=2)) as (
                a,
                a_client,
                a_addr,
            ),
            node(tmp_path / "b", "b", follows=following(a_addr, epoch=2)) as (b, b_client, b_addr),
            node(tmp_path / "c", "c", follows=following(a_addr, epoch=2)) as (c, _, _),
        ):
            (sent,) = await a_client.send(P, "q", [message("before")], retention_seconds=RETENTION)
            await caught_up(a, b)
            await caught_up(a, c)
            # when a pauses (its followers stop hearing from it), b is elected in epoch 3 and c follows b
            await b.lead(LeaderRole(replicas=ABC, isr=frozenset({"b", "c"}), acks=Acks.MAJORITY, epoch=3))
            await c.follow(following(b_addr, epoch=3))
            await b_client.send(P, "q", [message("after")], retention_seconds=RETENTION)
            # and a wakes up, still believing it leads epoch 2, and takes a write
            late = asyncio.ensure_future(a_client.send(P, "q", [message("late")], retention_seconds=RETENTION))
            await asyncio.sleep(0.5)
            # then the write is not acknowledged: no replica acknowledges epoch 2 any more
            assert not late.done()
            assert a.term is not None and a.log is not None
            assert a.term.stream.tracker.high_watermark < a.log.end_offset
            # and c, which follows b, refuses a's epoch: a FETCH under epoch 3 makes a say it is not the leader
            with pytest.raises(NotLeader):
                await a_client.fetch(P, "c", 3, 1, 1, max_bytes=1024, wait_ms=0)
            # when a learns of epoch 3 and follows b
            await a.follow(following(b_addr, epoch=3))
            # then the late write is answered "outcome unknown" (a 503, never a success)
            with pytest.raises(ServiceUnavailable) as refused:
                await late
            assert not isinstance(refused.value, NotLeader)
            # and a cut it (its epoch-2 history ends where b's epoch 3 starts): its log and state are b's

            async def reconciled() -> bool:
                return a.follower is not None and a.follower.truncated_to is not None

            await eventually(reconciled)
            await caught_up(b, a)
            assert frames(a) == frames(b)
            assert a.engine.state() == b.engine.state()
            bodies = [m["body"] for m in await receive(b_client, "q", max_messages=10)]
            assert sorted(bodies) == ["after", "before"]
            assert sent["id"]

    asyncio.run(scenario())


def test_a_leader_whose_lease_ran_out_answers_nothing_not_even_a_request_that_writes_nothing(
    tmp_path: Path,
) -> None:
    async def scenario() -> None:
        # given a leads epoch 2 on a lease that lets it answer for half a second more, b and c following
        lease_end = int(time.monotonic() * 1000) + 500  # the answer window is on the monotonic clock
        async with (
            node(tmp_path / "a", "a", leads=LeaderRole(replicas=ABC, acks=Acks.MAJORITY, epoch=2,
                                                         answers_until_ms=lease_end)) as (a, a_client, a_addr),
            node(tmp_path / "b", "b", follows=following(a_addr, epoch=2)) as (b, b_client, b_addr),
            node(tmp_path / "c", "c", follows=following(a_addr, epoch=2)) as (c, _, _),
        ):
            await a_client.send(P, "q", [message("m")], retention_seconds=RETENTION)
            (first,) = await receive(a_client, "q", visibility_timeout=0)
            await caught_up(a, b)
            await caught_up(a, c)
            # when a is cut off, its lease runs out and b is elected in epoch 3, where the message is received
            # again: its newest receipt is one a never saw
            await asyncio.sleep(max(0.0, lease_end / 1000 - time.monotonic()) + 0.05)
            await b.lead(LeaderRole(replicas=ABC, isr=frozenset({"b", "c"}), acks=Acks.MAJORITY, epoch=3))
            await c.follow(following(b_addr, epoch=3))
            (second,) = await receive(b_client, "q", visibility_timeout=300)
            # then a, still believing it leads, refuses a delete by that receipt instead of answering it from its
            # stale state (where the receipt is an old one: "success", deleting nothing, with nothing to commit)
            with pytest.raises(NotLeader):
                await a_client.delete(P, "q", [second["receipt"]])
            # and its other answers too
            with pytest.raises(NotLeader):
                await receive(a_client, "q")
            # while the new leader still holds the message, and deletes it by that receipt
            assert await b_client.delete(P, "q", [second["receipt"]]) == [None]
            assert first["receipt"] != second["receipt"]

    asyncio.run(scenario())


def test_a_replica_rejoining_with_a_diverged_tail_cuts_exactly_that_tail(tmp_path: Path) -> None:
    async def scenario() -> None:
        # given a leads epoch 2 with follower b (acks=all), and both hold two acknowledged records
        both = LeaderRole(replicas=("a", "b"), acks=Acks.ALL, epoch=2)
        async with (
            node(tmp_path / "a", "a", leads=both) as (a, a_client, a_addr),
            node(tmp_path / "b", "b", follows=following(a_addr, epoch=2)) as (b, b_client, b_addr),
        ):
            for body in ("one", "two"):
                await a_client.send(P, "q", [message(body)], retention_seconds=RETENTION)
            await caught_up(a, b)
            # when b stops fetching (the fetch it has waiting at a still brings the next record, "three") and
            # a appends "four" as well, which only a holds; neither is acknowledged (acks=all)
            assert b.follower is not None and b.log is not None and a.log is not None
            b.follower.pause()
            common = a.log.end_offset + 1
            unacknowledged = [
                asyncio.ensure_future(a_client.send(P, "q", [message("three")], retention_seconds=RETENTION))
            ]

            async def b_has_three() -> bool:
                return b.log is not None and b.log.end_offset == common

            await eventually(b_has_three)
            unacknowledged.append(
                asyncio.ensure_future(a_client.send(P, "q", [message("four")], retention_seconds=RETENTION))
            )

            async def appended() -> bool:
                return a.log is not None and a.log.end_offset == common + 1

            await eventually(appended)
            # and b becomes leader in epoch 3 (it was in sync; alone in sync now, it acknowledges on its own)
            await b.lead(LeaderRole(replicas=("a", "b"), isr=frozenset({"b"}), acks=Acks.LEADER, epoch=3))
            await b_client.send(P, "q", [message("five")], retention_seconds=RETENTION)
            # and a rejoins as b's follower
            await a.follow(following(b_addr, epoch=3))
            # then a's record of epoch 2 past the common ground is cut, and nothing before it
            assert a.follower is not None

            async def reconciled() -> bool:
                return a.follower is not None and a.follower.truncated_to is not None

            await eventually(reconciled)
            assert a.follower.truncated_to == common
            for pending in unacknowledged:
                with pytest.raises(ServiceUnavailable):
                    await pending
            # and a ends with b's log and state: one, two, three, five
            # ("three" reached b before the election, so the next leader committed it: an unknown outcome)
            await caught_up(b, a)
            assert frames(a) == frames(b)
            assert a.engine.state() == b.engine.state()
            assert [e for e, _, _ in frames(a)][-1] == 3
            bodies = sorted(m["body"] for m in await receive(b_client, "q", max_messages=10))
            assert bodies == ["five", "one", "three", "two"]

    asyncio.run(scenario())
