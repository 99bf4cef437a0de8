"""A FIFO queue's groups in bytearrays (``ferrymq.storage.engine.fifo_groups``): send order, live and in-flight
counts, dead entries dropped from the front or rewritten away, nothing per group for the garbage collector to walk,
and a state pickled while groups were objects still answering as the same state built now."""

from __future__ import annotations

import gc
import pickle

import pytest

from ferrymq.clock import ManualClock
from ferrymq.storage.engine import Engine
from ferrymq.storage.engine.fifo import FifoQueue
from ferrymq.storage.engine.fifo_groups import Groups
from tests.fixtures.fifo_groups_v1 import STATE
from tests.fixtures.fifo_groups_v1.make_state import KEY, QUEUE, RETENTION, START_MS, scenario
from tests.support.engine_requests import fifo_message


def test_a_group_keeps_send_order_and_its_counts_and_goes_with_its_last_message() -> None:
    groups = Groups()
    groups.add("g", 5, in_flight=False)
    groups.add("g", 7, in_flight=True)
    groups.add("g", 9, in_flight=False)
    assert list(groups.seqs("g")) == [5, 7, 9] and groups.in_flight("g") == 1 and "g" in groups
    groups.flight("g", 1)
    assert groups.in_flight("g") == 2
    # the first removed: the entry stays until the front is looked for, the counts change at once
    assert groups.remove("g", in_flight=False)
    assert groups.first("g", lambda seq: seq != 5) == 7
    assert list(groups.seqs("g")) == [7, 9]
    assert groups.remove("g", in_flight=True) and groups.in_flight("g") == 1
    # the last removed: the group is gone, with its entries
    assert not groups.remove("g", in_flight=True)
    assert "g" not in groups and len(groups) == 0
    assert groups.first("g", lambda seq: True) is None and list(groups.seqs("g")) == []


def test_dead_entries_in_front_are_cut_off_and_dead_ones_behind_a_live_one_rewritten_away() -> None:
    groups = Groups()
    for seq in range(1, 20_001):
        groups.add("g", seq, in_flight=False)
    live = set(range(1, 20_001))
    # when the first 15,000 are removed from the front, a look at the front drops them (cut off in one move)
    for seq in range(1, 15_001):
        live.discard(seq)
        groups.remove("g", in_flight=False)
    assert groups.first("g", live.__contains__) == 15_001
    g = groups._by_name["g"]
    assert len(g) == 24 + 8 * 5_000
    # when the ones behind a live first message die, they are rewritten away once they outnumber it
    for seq in range(15_002, 20_001):
        live.discard(seq)
        groups.remove("g", in_flight=False)
    assert groups.first("g", live.__contains__) == 15_001
    assert list(groups.seqs("g")) == [15_001]


def test_a_fifo_queue_of_many_groups_keeps_nothing_per_group_the_collector_walks() -> None:
    # given an engine with a FIFO queue of one message
    engine = Engine(ManualClock(), KEY)
    engine.store(QUEUE, [fifo_message("first")], RETENTION, fifo=True)
    gc.collect()
    before = len(gc.get_objects())
    # when 20,000 messages are sent to as many groups, a few received
    for start in range(0, 20_000, 10):
        engine.store(QUEUE, [fifo_message(f"g{start + i}") for i in range(10)], RETENTION, fifo=True)
    engine.poll(QUEUE, 10, 600, RETENTION)
    gc.collect()
    # then the collector tracks about as many objects as before (groups of objects were three or four each)
    assert len(gc.get_objects()) - before < 1_000
    groups = engine.partition.queues[QUEUE].groups
    assert len(groups) == 20_001 and not gc.is_tracked(groups._by_name)


def _groups_of(q: FifoQueue) -> dict[str, tuple[list[int], int]]:
    return {name: (list(q.groups.seqs(name)), q.groups.in_flight(name)) for name in q.groups.names()}


def test_a_state_pickled_while_groups_were_objects_loads_and_answers_as_the_same_state_built_now() -> None:
    # given the state the fixture's scenario left, pickled by the version that held groups as objects
    loaded_partition = pickle.loads(STATE.read_bytes())
    loaded_queue = loaded_partition.queues[QUEUE]
    assert type(loaded_queue.groups) is dict and type(loaded_queue.dirty) is set
    for q in loaded_partition.queues.values():
        q.after_load()
    loaded = Engine(ManualClock(START_MS / 1000 + 2), KEY, partition=loaded_partition)
    # and the same scenario run now
    clock = ManualClock(START_MS / 1000)
    built = Engine(clock, KEY)
    scenario(built, clock)
    # then the loaded groups are the ones built now, dead entries and in-flight counts alike
    assert type(loaded_queue.groups) is Groups and type(loaded_queue.dirty) is dict
    assert _groups_of(loaded_queue) == _groups_of(built.partition.queues[QUEUE])
    assert sorted(loaded_queue.dirty) == sorted(built.partition.queues[QUEUE].dirty) == ["c"]
    # and both answer the same from here on: receives in group order, an attempt replayed, deletes
    for engine in (loaded, built):
        engine.clock.advance(1)  # type: ignore[attr-defined]
    for _ in range(3):
        got = [engine.poll(QUEUE, 10, 600, RETENTION).rows for engine in (loaded, built)]
        assert [row[0] for row in got[0]] == [row[0] for row in got[1]]
        for engine, rows in zip((loaded, built), got, strict=True):
            engine.delete(QUEUE, [row[1] for row in rows])
            engine.clock.advance(601)  # type: ignore[attr-defined]
    assert _groups_of(loaded_queue) == _groups_of(built.partition.queues[QUEUE])


@pytest.mark.parametrize("state", [
    [],
    {"g": b"\x18" + bytes(31)},  # bytes, not a bytearray
    {"g": bytearray(16)},  # shorter than the counts
    {"g": bytearray(b"\x18" + bytes(7) + b"\x01" + bytes(7) + bytes(8) + bytes(4))},  # not whole entries
    {"g": bytearray(b"\x30" + bytes(7) + b"\x01" + bytes(7) + bytes(8) + bytes(8))},  # starting past its end
    {"g": bytearray(b"\x18" + bytes(7) + b"\x02" + bytes(7) + bytes(8) + bytes(8))},  # more live than entries
    {"g": bytearray(b"\x18" + bytes(7) + b"\x01" + bytes(7) + b"\x02" + bytes(7) + bytes(8))},  # more in flight
    {"g": bytearray(b"\x18" + bytes(7) + bytes(8) + bytes(8) + bytes(8))},  # a group of no live message
    {1: bytearray(b"\x18" + bytes(7) + b"\x01" + bytes(7) + bytes(8) + bytes(8))},  # not named by a string
])
def test_groups_a_crafted_checkpoint_holds_are_refused_as_it_loads(state: object) -> None:
    groups = Groups.__new__(Groups)
    with pytest.raises(ValueError):
        groups.__setstate__(state)  # type: ignore[arg-type]


def test_groups_as_written_load_back_whole() -> None:
    groups = Groups.of([("a", [3, 4, 6], 2, 1), ("", [9], 1, 0)])
    groups.first("a", lambda seq: seq != 3)
    loaded = pickle.loads(pickle.dumps(groups, protocol=5))
    assert {name: (list(loaded.seqs(name)), loaded.in_flight(name)) for name in loaded.names()} == {
        "a": ([4, 6], 1), "": ([9], 0)}
