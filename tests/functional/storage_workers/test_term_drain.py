"""A leadership term drained before it is handed over: new requests are refused (nothing done), and the replies it
holds are answered once their records commit, instead of ServiceUnavailable with an outcome the client cannot
know (a receive's messages left in flight, unseen); a drain whose follower never comes back gives up in time."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from ferrymq.errors import NotLeader, ServiceUnavailable
from ferrymq.storage.server.replica import PartitionReplica
from tests.functional.storage_workers.test_replication import ALL, P, following, node
from tests.functional.storage_workers.test_server_fifo import message, receive
from tests.functional.storage_workers.worker_calls import RETENTION, eventually


async def held_reply(leader: PartitionReplica) -> None:
    async def waiting() -> bool:
        return leader.term is not None and leader.term.stream.tracker.waiting == 1

    await eventually(waiting)


def test_a_drained_term_refuses_new_requests_and_answers_the_ones_it_holds_once_committed(tmp_path: Path) -> None:
    async def scenario() -> None:
        # given a leader with acks=all whose follower has stopped fetching, and a receive it holds uncommitted
        async with (
            node(tmp_path / "l", "leader", leads=ALL) as (leader, client, address),
            node(tmp_path / "f", "follower", follows=following(address)) as (follower, _, _),
        ):
            await client.send(P, "q", [message(f"m{i}") for i in range(3)], retention_seconds=RETENTION)
            assert follower.follower is not None and leader.term is not None
            follower.follower.pause()
            receiving = asyncio.create_task(receive(client, "q", max_messages=10, visibility_timeout=300))
            await held_reply(leader)
            # when the term is drained for a hand-over
            term = leader.term
            draining = asyncio.create_task(term.drain("handed over to follower"))
            await asyncio.sleep(0.05)
            assert not draining.done()
            # then a new request is refused, with nothing done
            with pytest.raises(NotLeader, match="handing partition 0 over: handed over to follower"):
                await client.send(P, "q", [message("late")], retention_seconds=RETENTION)
            # and once the follower fetches again, the held receive is answered with its messages, and the
            # drain ends
            follower.follower.resume()
            got = await receiving
            assert sorted(m["body"] for m in got) == ["m0", "m1", "m2"]
            assert await draining is True
            # and the term, ended now, leaves nothing in flight unanswered
            await leader.stand_by("handed over to follower")
            assert leader.term is None

    asyncio.run(scenario())


def test_a_drain_whose_follower_never_fetches_gives_up_and_the_held_reply_is_unknown(tmp_path: Path) -> None:
    async def scenario() -> None:
        # given a held send whose follower is gone
        async with (
            node(tmp_path / "l", "leader", leads=ALL) as (leader, client, address),
            node(tmp_path / "f", "follower", follows=following(address)) as (follower, _, _),
        ):
            await client.send(P, "q", [message("warm-up")], retention_seconds=RETENTION)
            assert follower.follower is not None and leader.term is not None
            follower.follower.pause()
            sending = asyncio.create_task(client.send(P, "q", [message("held")], retention_seconds=RETENTION))
            await held_reply(leader)
            # when the drain's time runs out, then it says so
            assert await leader.term.drain("handed over to follower", timeout=0.2) is False
            # and ending the term answers the held send ServiceUnavailable, its outcome the next leader's
            await leader.stand_by("handed over to follower")
            with pytest.raises(ServiceUnavailable, match="stepped down before the request was committed"):
                await sending

    asyncio.run(scenario())


def test_a_drain_ended_by_the_term_and_a_resumed_term(tmp_path: Path) -> None:
    async def scenario() -> None:
        async with (
            node(tmp_path / "l", "leader", leads=ALL) as (leader, client, address),
            node(tmp_path / "f", "follower", follows=following(address)) as (follower, _, _),
        ):
            await client.send(P, "q", [message("warm-up")], retention_seconds=RETENTION)
            assert follower.follower is not None and leader.term is not None
            # given a drain that is resumed (the hand-over's release failed): requests are answered again
            term = leader.term
            assert await term.drain("handed over to follower") is True
            term.resume()
            await client.send(P, "q", [message("after")], retention_seconds=RETENTION)
            # given a drain waiting on a held send when the term ends under it
            follower.follower.pause()
            sending = asyncio.create_task(client.send(P, "q", [message("held")], retention_seconds=RETENTION))
            await held_reply(leader)
            draining = asyncio.create_task(term.drain("handed over to follower", timeout=30))
            await asyncio.sleep(0.05)
            await leader.stand_by("a newer epoch was claimed")
            # then the drain ends at once, not done, and the held send is answered as before
            assert await asyncio.wait_for(draining, 5) is False
            with pytest.raises(ServiceUnavailable):
                await sending

    asyncio.run(scenario())
