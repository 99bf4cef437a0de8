"""The pure parts of sharded queues: where sends go, handles that name their shard, and a gathering receive's
order of asking, with a scripted receive per shard."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from ferrymq.aws.queue_store import QueueRecord, Shard
from ferrymq.clock import ManualClock
from ferrymq.errors import ReceiptHandleIsInvalid
from ferrymq.frontend import sharded


def queue(shards: int) -> QueueRecord:
    return QueueRecord("000000000000", "q", "id", 0, more_shards=tuple(Shard(p) for p in range(1, shards)))


def test_a_fifo_batch_goes_by_group_and_a_standard_one_to_one_shard() -> None:
    q = queue(4)
    fifo = [{"group": g} for g in ("a", "b", "a", "c", "b")]
    groups = sharded.send_groups(q, fifo)
    assert sorted(p for positions in groups.values() for p in positions) == [0, 1, 2, 3, 4]
    for index, positions in groups.items():
        assert {sharded.shard_of_group(q, fifo[p]["group"]) for p in positions} == {index}
    standard = sharded.send_groups(q, [{"group": None}] * 3)
    assert len(standard) == 1 and next(iter(standard.values())) == [0, 1, 2]
    assert sharded.send_groups(queue(1), fifo) == {0: [0, 1, 2, 3, 4]}


@pytest.mark.parametrize("handle", ["s4.abc", "s.abc", "x1.abc", "s-1.abc", "s\u00b2.abc", "s01x.abc"])
def test_a_prefix_naming_no_shard_is_refused(handle: str) -> None:
    with pytest.raises(ReceiptHandleIsInvalid) as refused:
        sharded.split_handle(queue(4), handle)
    assert handle in refused.value.message


def test_handles_carry_their_shard_and_unprefixed_ones_are_the_first_shards() -> None:
    q = queue(3)
    assert sharded.split_handle(q, sharded.tag_handle(q, 2, "abc")) == (2, "abc")
    assert sharded.split_handle(q, "abc") == (0, "abc")
    # a queue of one shard takes and hands out the workers' handles as they are
    assert sharded.tag_handle(queue(1), 0, "abc") == "abc"
    assert sharded.split_handle(queue(1), "s1.abc") == (0, "s1.abc")


def test_each_shard_keeps_its_messages_under_an_id_of_its_own() -> None:
    q = queue(3)
    assert [q.storage_id(i) for i in range(3)] == ["id", "id#1", "id#2"]


def test_a_batch_is_one_call_per_shard_with_outcomes_in_entry_order() -> None:
    q = queue(3)
    calls: list[tuple[int, list[str]]] = []

    async def call(index: int, handles: list[str]) -> list[Any]:
        calls.append((index, handles))
        return [None if h.endswith("ok") else ("ReceiptHandleIsInvalid", h) for h in handles]

    handles = ["s1.a-ok", "s9.bad", "b-ok", "s1.c-no", "s2.d-ok"]
    outcomes = asyncio.run(sharded.per_shard(q, handles, lambda h: h, call))
    assert outcomes[0] is None and outcomes[2] is None and outcomes[4] is None
    assert outcomes[1] is not None and outcomes[1][0] == "ReceiptHandleIsInvalid"
    assert outcomes[3] == ("ReceiptHandleIsInvalid", "s1.c-no")
    assert sorted(calls) == [(0, ["b-ok"]), (1, ["s1.a-ok", "s1.c-no"]), (2, ["s2.d-ok"])]


def test_a_gathering_receive_asks_every_shard_then_long_polls_one_slice_at_a_time() -> None:
    q = queue(3)
    clock = ManualClock()
    asked: list[tuple[int, int, float]] = []
    arrivals = {2: [{"receipt": "late"}]}

    async def receive(index: int, wanted: int, wait: float) -> list[dict[str, Any]]:
        asked.append((index, wanted, wait))
        clock.advance(wait)
        # the message arrives on shard 2 once the receive has waited a second in all
        if clock.monotonic() - start >= 1.0 and index in arrivals:
            return arrivals.pop(index)
        return []

    start = clock.monotonic()
    got = asyncio.run(sharded.gather(q, receive, max_messages=5, wait_seconds=5, clock=clock, attempt_id="same"))
    assert got == [{"receipt": "s2.late"}]
    sweeps = [a for a in asked if a[2] == 0.0]
    slices = [a for a in asked if a[2] > 0]
    # every sweep asks each shard once, without waiting; slices wait at most half a second each
    assert len(sweeps) % 3 == 0 and {p for p, _, _ in sweeps} == {0, 1, 2}
    assert slices and all(w <= sharded.LONG_POLL_SLICE_SECONDS for _, _, w in slices)
    # a retried attempt asks the shards in the same order
    again: list[int] = []

    async def record(index: int, wanted: int, wait: float) -> list[dict[str, Any]]:
        again.append(index)
        return [{"receipt": "x"}] * wanted

    asyncio.run(sharded.gather(q, record, max_messages=1, wait_seconds=0, clock=clock, attempt_id="same"))
    assert again == [asked[0][0]]
