"""A follower whose worker set a damaged copy aside fetches again from an empty log: the leader's stream
forgets what it acknowledged before, drops it from the in-sync set at the next check (even when the rest
fall short of the acks mode: it already left the item's set, so it cannot be elected), and finds it caught
up, to be added back, only once it holds the committed records again."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from ferrymq.replication_rules import Acks
from ferrymq.storage.log.writer import LogWriter
from ferrymq.storage.replication import LeaderStream
from ferrymq.storage.replication.roles import LeaderRole
from tests.functional.storage_workers.test_in_sync_rule import Conn, fail, sent

MAX_LAG_MS = 1_000


def fetch(stream: LeaderStream, replica: str, from_offset: int, durable: int) -> asyncio.Task[None] | None:
    return stream.fetch(Conn(), 1, [replica, 1, from_offset, durable, 1 << 20, 0], fail)  # type: ignore[arg-type]


def test_a_follower_that_lost_its_copy_leaves_the_in_sync_set_and_rejoins_only_once_caught_up(
    tmp_path: Path,
) -> None:
    async def scenario() -> dict[str, Any]:
        # given a leader of an idle partition whose followers b and c hold and acknowledged every record
        stream, end = await _leading_five_records(tmp_path)
        for replica in ("b", "c"):
            await _done(fetch(stream, replica, end, end))
        seen: dict[str, Any] = {"hw": stream.tracker.high_watermark, "lagging_before": stream.lagging(MAX_LAG_MS)}
        # when b comes back with an empty log (its damaged copy set aside) and fetches from the start
        await _done(fetch(stream, "b", 1, 1))
        seen["acked_b"] = stream.tracker.acked["b"]
        seen["lagging"] = stream.lagging(MAX_LAG_MS)
        # (and the same with c already out of the set: a and b alone fall short of a majority of three)
        stream.set_isr(frozenset({"a", "b"}))
        seen["lagging_short"] = stream.lagging(MAX_LAG_MS)
        stream.set_isr(frozenset({"a"}))
        seen["caught_up_empty"] = stream.caught_up()
        # and once b has fetched everything back and reports it durable
        await _done(fetch(stream, "b", end, end))
        seen["caught_up_after"] = stream.caught_up()
        stream.close(RuntimeError("done"))
        await stream.log.close()
        return seen

    seen = asyncio.run(scenario())
    # then nobody lagged before; b's earlier acknowledgement no longer counts and it leaves the set, even
    # when that leaves the leader short of a majority; it is not caught up while empty, and is once it has it all
    assert seen["lagging_before"] == frozenset()
    assert seen["acked_b"] == 1
    assert seen["lagging"] == frozenset({"b"})
    assert seen["lagging_short"] == frozenset({"b"})
    assert "b" not in seen["caught_up_empty"]
    assert "b" in seen["caught_up_after"]
    assert seen["hw"] >= 5


async def _leading_five_records(directory: Path) -> tuple[LeaderStream, int]:
    """A term of leader a over replicas a, b, c (majority) whose log holds five durable records; its end offset."""
    writer = LogWriter(directory)
    stream = LeaderStream(1, "a", LeaderRole(replicas=("a", "b", "c"), acks=Acks.MAJORITY, epoch=1), writer,
                          now_ms=lambda: 0)
    for seq in range(1, 6):
        stream.append(sent(seq))
    await writer.flush()
    return stream, stream.log.end_offset


async def _done(task: asyncio.Task[None] | None) -> None:
    if task is not None:
        await task


def test_a_follower_reporting_its_lost_copy_to_a_term_that_counts_it_in_sync_is_dropped_and_rejoins_later(
    tmp_path: Path,
) -> None:
    async def scenario() -> dict[str, Any]:
        # given a term begun with b in sync (before b left the item's set) that has no acknowledgement of b yet
        stream, end = await _leading_five_records(tmp_path)
        seen: dict[str, Any] = {}
        # when b, its copy set aside, fetches from its empty log reporting offset 0 durable
        await _done(fetch(stream, "b", 1, 0))
        seen["lagging"] = stream.lagging(MAX_LAG_MS)
        stream.set_isr(frozenset({"a", "c"}))
        # and then fetches everything and reports it durable
        await _done(fetch(stream, "b", end, end))
        seen["caught_up"] = stream.caught_up()
        # (a follower outside the set reporting 0 changes nothing)
        await _done(fetch(stream, "b", end, 0))
        seen["lagging_outside"] = stream.lagging(MAX_LAG_MS)
        stream.close(RuntimeError("done"))
        await stream.log.close()
        return seen

    seen = asyncio.run(scenario())
    # then the leader drops it from the in-sync set, and finds it caught up once it holds everything
    assert seen["lagging"] == frozenset({"b"})
    assert seen["caught_up"] == frozenset({"b"})
    assert seen["lagging_outside"] == frozenset()
