"""A leadership term drained before it is handed over: new requests are refused (nothing done), and the replies it
holds are answered once their records commit, instead of ServiceUnavailable with an outcome the client cannot
know (a receive's messages left in flight, unseen); a drain whose follower never comes back gives up in time."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest

from ferrymq.errors import NotLeader, ServiceUnavailable
from ferrymq.rpc.client import WorkerClient
from ferrymq.storage.replication.follower import Follower
from ferrymq.storage.server.replica import PartitionReplica
from tests.functional.storage_workers.test_replication import ALL, P, following, node
from tests.functional.storage_workers.test_server_fifo import message, receive
from tests.functional.storage_workers.worker_calls import RETENTION, eventually

REASON = "handed over to follower"


@asynccontextmanager
async def replicating(tmp_path: Path) -> AsyncIterator[tuple[PartitionReplica, WorkerClient, Follower]]:
    """A leader with acks=all and its one follower, a message sent through both: the leader, its client and the
    follower's fetch loop."""
    async with (
        node(tmp_path / "l", "leader", leads=ALL) as (leader, client, address),
        node(tmp_path / "f", "follower", follows=following(address)) as (follower, _, _),
    ):
        await client.send(P, "q", [message("warm-up")], retention_seconds=RETENTION)
        assert follower.follower is not None and leader.term is not None
        yield leader, client, follower.follower


async def held(leader: PartitionReplica, fetches: Follower, request: Any) -> asyncio.Task[Any]:
    """``request`` started with the follower's fetches paused, once the leader holds its reply uncommitted."""
    fetches.pause()
    task = asyncio.create_task(request)

    async def waiting() -> bool:
        return leader.term is not None and leader.term.stream.tracker.waiting == 1

    await eventually(waiting)
    return task


def send(client: WorkerClient, body: str) -> Any:
    return client.send(P, "q", [message(body)], retention_seconds=RETENTION)


def test_a_drained_term_refuses_new_requests_and_answers_the_ones_it_holds_once_committed(tmp_path: Path) -> None:
    async def scenario() -> None:
        async with replicating(tmp_path) as (leader, client, fetches):
            # given a receive the leader holds uncommitted
            await client.send(P, "q", [message(f"m{i}") for i in range(3)], retention_seconds=RETENTION)
            receiving = await held(leader, fetches, receive(client, "q", max_messages=10, visibility_timeout=300))
            # when the term is drained for a hand-over
            assert leader.term is not None
            draining = asyncio.create_task(leader.term.drain(REASON))
            await asyncio.sleep(0.05)
            assert not draining.done()
            # then a new request is refused, with nothing done
            with pytest.raises(NotLeader, match=f"handing partition 0 over: {REASON}"):
                # Bounded: a request taken would wait for the paused follower.
                await asyncio.wait_for(send(client, "late"), 5)
            # and once the follower fetches again, the held receive is answered with its messages, and the
            # drain ends
            fetches.resume()
            got = await receiving
            assert sorted(m["body"] for m in got) == ["m0", "m1", "m2", "warm-up"]
            assert await draining is True
            # and the term then ends with nothing in flight unanswered
            await leader.stand_by(REASON)
            assert leader.term is None

    asyncio.run(scenario())


def test_a_drain_whose_follower_never_fetches_gives_up_and_the_held_reply_is_unknown(tmp_path: Path) -> None:
    async def scenario() -> None:
        async with replicating(tmp_path) as (leader, client, fetches):
            # given a held send whose follower is gone
            sending = await held(leader, fetches, send(client, "held"))
            # when the drain's time runs out, then it says so
            assert leader.term is not None
            assert await leader.term.drain(REASON, timeout=0.2) is False
            # and ending the term answers the held send ServiceUnavailable, its outcome the next leader's
            await leader.stand_by(REASON)
            with pytest.raises(ServiceUnavailable, match="stepped down before the request was committed"):
                await sending

    asyncio.run(scenario())


def test_a_drain_ended_by_the_term_and_a_resumed_term(tmp_path: Path) -> None:
    async def scenario() -> None:
        async with replicating(tmp_path) as (leader, client, fetches):
            # given a drain that is resumed (the hand-over's release failed): requests are answered again
            term = leader.term
            assert term is not None
            assert await term.drain(REASON) is True
            term.resume()
            await send(client, "after")
            # given a drain waiting on a held send when the term ends under it
            sending = await held(leader, fetches, send(client, "held"))
            draining = asyncio.create_task(term.drain(REASON, timeout=30))
            await asyncio.sleep(0.05)
            await leader.stand_by("a newer epoch was claimed")
            # then the drain ends at once, not done, and the held send is answered as before
            assert await asyncio.wait_for(draining, 5) is False
            with pytest.raises(ServiceUnavailable):
                await sending

    asyncio.run(scenario())
