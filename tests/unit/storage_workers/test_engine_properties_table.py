"""The partition's message table (``ferrymq.storage.engine.table``): every field comes back exactly as it went
in, whatever its form; the memory it holds follows what is stored, not what was sent; no stored message is a
Python object of its own.  And the rings its queues index messages with answer as a deque does."""

from __future__ import annotations

import gc
import hashlib
import os
import tracemalloc
import uuid
from collections import deque
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ferrymq.clock import ManualClock
from ferrymq.storage.engine import Engine, PartitionState
from ferrymq.storage.engine.records import DELETED, RESTORED, SENT, SEQUENCE, STORED
from ferrymq.storage.engine.rings import Ring
from ferrymq.storage.engine.table import MOVE_SPAN, MessageTable
from tests.fuzz.profiles import fuzz_settings
from tests.support.engine_requests import RECEIPT_KEY, RETENTION, as_dicts, plain_message, poll

Q = "000000000000/orders/1"
OTHER = "000000000000/other/1"
TS = 1_700_000_000_000

ids = st.one_of(
    st.uuids().map(str),
    st.uuids().map(lambda u: str(u).upper()),
    st.uuids().map(lambda u: "{" + str(u) + "}"),
    st.uuids().map(lambda u: u.hex),
    st.text(max_size=40),
    st.just("0" * 8 + "-" + "0" * 4 + "-" + "0" * 4 + "-" + "0" * 4 + "-" + "0" * 11 + " "),
)
md5s = st.one_of(
    st.binary(min_size=16, max_size=16).map(bytes.hex),
    st.binary(min_size=16, max_size=16).map(lambda b: b.hex().upper()),
    st.just(""),
    st.text(max_size=33),
    st.none(),
)
scalars = st.one_of(st.integers(-3, 3), st.booleans(), st.floats(allow_nan=False), st.text(max_size=5), st.none())
systems = st.one_of(
    st.just({}),
    st.dictionaries(st.sampled_from(["SenderId", "AWSTraceHeader", "Other"]), scalars, max_size=3),
    st.fixed_dictionaries({"SenderId": st.text(max_size=5), "FerryMQPriority": st.integers(0, 9)}),
    st.just({"k": [1, 2]}),
    st.none(),
)
attrs = st.one_of(
    st.just({}),
    st.just({"a": {"DataType": "String", "StringValue": "v"}}),
    st.none(),
)
bodies = st.one_of(st.text(max_size=20), st.binary(max_size=20))


dedup_ids = st.one_of(
    st.none(),
    st.text(max_size=8),
    st.binary(min_size=32, max_size=32).map(bytes.hex),
    st.binary(min_size=32, max_size=32).map(lambda b: b.hex().upper()),
)


@given(st.lists(st.tuples(ids, bodies, attrs, md5s, md5s, systems, dedup_ids), min_size=1, max_size=8),
       st.booleans())
@fuzz_settings(ci_examples=100)
def test_every_field_comes_back_exactly_as_it_was_stored(items: list[tuple], fifo: bool) -> None:
    # given messages whose ids, MD5s, attributes and system attributes take every form, canonical or not
    stored = [
        (message_id, body, a, md5_body, md5_attrs, system, TS - 5, TS, 2, TS - 1, "group" if fifo else None, dedup)
        for message_id, body, a, md5_body, md5_attrs, system, dedup in items
    ]
    state = PartitionState()
    # when they are stored, and then restored into a second state from the first one's snapshot
    state.apply((STORED, Q, TS, 1, fifo, stored))
    again = PartitionState.replay(list(state.snapshot()))
    # then each field comes back as it went in, with its type (1 is not True, None is not {})
    for got in (state.state()[Q], again.state()[Q]):
        for row, item in zip(got, stored, strict=True):
            want = (row[0], *item[:6], *item[6:10])
            assert _typed(row[:11]) == _typed(want)
            if fifo:
                assert row[11:13] == ("group", item[11])


def _typed(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _typed(v) for k, v in value.items()}, list(value)
    if isinstance(value, (list, tuple)):
        return [_typed(v) for v in value]
    return (type(value), value)


def test_a_message_held_while_millions_pass_keeps_the_table_small_and_is_still_found(clock: ManualClock) -> None:
    # given one message received and held, then 200,000 sent and deleted after it
    engine = Engine(clock, RECEIPT_KEY)
    engine.send(Q, [plain_message("stuck")], RETENTION)
    (held,), _ = poll(engine, Q, n=1, visibility=3600)
    table = engine.partition.table
    batch = [plain_message(f"m{i}") for i in range(10)]
    for seq in range(2, 200_002, 10):
        engine.partition.apply((SENT, OTHER, engine.now_ms(), seq, batch))
        engine.partition.apply((DELETED, OTHER, list(range(seq, seq + 10))))
    # then the table holds one row and a window far smaller than what was sent
    assert table.live == 1 and len(table.extra) <= 11
    assert len(table.window) < 100_000
    # and the held message is there as it was: its handle deletes it
    assert engine.delete(Q, [held["receipt"]]) == [None]
    assert table.live == 0 and len(table.window) == 0


def test_messages_restored_queue_by_queue_out_of_sequence_order_come_back_in_order() -> None:
    # given two queues whose messages were sent interleaved, far into the partition's sequence numbers
    base = 10**9
    first = [_restored(base + 2 * i) for i in range(500)]
    second = [_restored(base + 2 * i + 1) for i in range(500)]
    # when records restore the other queue's newer half, then the first queue, then the other's older half
    chunks = [(RESTORED, OTHER, second[250:]), (RESTORED, Q, first), (RESTORED, OTHER, second[:250])]
    state = PartitionState.replay(chunks)
    # then every message is found under its own queue, and each queue keeps the order it was restored in
    assert [row[0] for row in state.state()[Q]] == [base + 2 * i for i in range(500)]
    assert [row[0] for row in state.state()[OTHER]] == [base + 2 * i + 1 for i in range(250, 500)] + [
        base + 2 * i + 1 for i in range(250)
    ]
    assert all(seq not in state.queues[OTHER].msgs for seq in range(base, base + 1000, 2))
    assert state.table.live == 1000 and len(state.table.window) < 10_000


def _restored(seq: int) -> tuple:
    return (seq, str(uuid.uuid4()), f"b{seq}", {}, "0" * 32, None, {"SenderId": "AIDA"}, TS, TS, 0, 0)


def test_a_stored_message_is_no_python_object_of_its_own(clock: ManualClock) -> None:
    # given an engine, and messages shaped as the front end sends them, made before counting
    engine = Engine(clock, RECEIPT_KEY)
    batches = [[[str(uuid.uuid4()), f"body {i}-{k}", {}, uuid.uuid4().hex, None, 0, {"SenderId": "AIDA"}]
                for k in range(10)] for i in range(500)]
    for batch in batches:
        engine.send(Q, batch, RETENTION)
    engine.purge(Q)
    gc.collect()
    before = len(gc.get_objects())
    # when 5,000 of them are stored
    for batch in batches:
        engine.send(Q, [list(m) for m in batch], RETENTION)
    del batch
    gc.collect()
    # then the objects the collector tracks grew by far fewer than one per message
    assert len(gc.get_objects()) - before < 100
    assert len(engine.queues[Q].msgs) == 5000


def _held_per_message(engine: Engine, batches: list[list[list]]) -> float:
    gc.collect()
    tracemalloc.start()
    before = tracemalloc.get_traced_memory()[0]
    for batch in batches:
        engine.send(Q, [list(m) for m in batch], RETENTION)
    gc.collect()
    held = tracemalloc.get_traced_memory()[0] - before
    tracemalloc.stop()
    return held / sum(len(b) for b in batches)


def test_an_encrypted_message_holds_no_more_than_its_columns_besides_its_envelope(clock: ManualClock) -> None:
    # given messages as an encrypting front end stores them: the envelope as the body, no attributes and
    # empty MD5s (they are inside the envelope), made before measuring
    engine = Engine(clock, RECEIPT_KEY)
    batches = [[[str(uuid.uuid4()), os.urandom(600), {}, "", None, 0, {"SenderId": "AIDA"}] for _ in range(10)]
               for _ in range(400)]
    # when 4,000 are stored, then the engine holds about what the table's columns and indexes cost for each
    assert _held_per_message(engine, batches) < 150


def test_a_fifo_message_keeps_a_content_based_deduplication_id_as_its_bytes(clock: ManualClock) -> None:
    # given FIFO messages as the front end stores them, with content-based deduplication ids (SHA-256 hex)
    engine = Engine(clock, RECEIPT_KEY)
    fifo = "000000000000/orders.fifo/1"
    texts = [f"body {i}" for i in range(4000)]
    gc.collect()
    tracemalloc.start()
    before = tracemalloc.get_traced_memory()[0]
    # when 4,000 are stored (each request's strings made and dropped as a worker decodes them)
    for k in range(0, len(texts), 10):
        engine.store(fifo, [
            [str(uuid.uuid4()), text, {}, hashlib.md5(text.encode()).hexdigest(), None, 0, {"SenderId": "AIDA"},
             f"g{i % 7}", hashlib.sha256(text.encode()).hexdigest(), None]
            for i, text in enumerate(texts[k:k + 10])
        ], RETENTION, fifo=True)
    engine.queues[fifo].recent.clear()  # the resend window: 5 minutes of ids, bounded by time, not backlog
    gc.collect()
    held = (tracemalloc.get_traced_memory()[0] - before) / len(texts)
    tracemalloc.stop()
    # then each holds its columns, its group's entry and its deduplication id's 32 bytes beside its body
    assert held < 280
    rows = as_dicts(engine.peek(fifo, 1, RETENTION))
    assert rows[0]["dedup_id"] == hashlib.sha256(b"body 0").hexdigest()


@given(st.lists(st.one_of(st.integers(0, 2**64 - 1), st.integers(1, 3000).map(lambda n: -n)), max_size=60))
@fuzz_settings(ci_examples=100)
def test_a_ring_answers_as_a_deque(steps: list[int]) -> None:
    # given a ring and a deque, fed the same appends (a value) and takes from the front (-n: take n)
    ring, reference = Ring(), deque[int]()
    for step in steps:
        if step >= 0:
            ring.append(step)
            reference.append(step)
            continue
        for _ in range(-step):
            if not reference:
                with pytest.raises(IndexError):
                    ring.popleft()
                break
            assert ring.popleft() == reference.popleft()
        # when the two are looked at after every step, then they hold the same, front, back and in both orders
        assert (len(ring), bool(ring), list(ring), list(reversed(ring))) == (
            len(reference), bool(reference), list(reference), list(reversed(reference)))
        if reference:
            assert (ring[0], ring[-1]) == (reference[0], reference[-1])
        else:
            with pytest.raises(IndexError):
                ring[-1]


def test_a_ring_cuts_what_it_gave_out_and_keeps_the_rest() -> None:
    # given a ring of 10,000 values, 9,000 taken from its front
    ring = Ring(range(10_000))
    for i in range(9_000):
        assert ring.popleft() == i
    # then the array under it holds about what is left, not all that was ever appended
    assert len(ring._a) < 6_000
    assert list(ring) == list(range(9_000, 10_000))


def test_a_shared_system_attribute_set_freed_and_its_number_reused_is_not_handed_to_a_later_message() -> None:
    # given a message whose system attributes were shared, removed (the set freed), and a message with other
    # system attributes that took the freed set's number
    state = PartitionState()
    sender_a = {"SenderId": "a"}
    state.apply((SENT, Q, TS, 1, [(str(uuid.uuid4()), "first", {}, "", None, 0, dict(sender_a))]))
    state.apply((DELETED, Q, [1]))
    state.apply((SENT, Q, TS, 2, [(str(uuid.uuid4()), "second", {}, "", None, 0, {"FerryMQPriority": 1})]))
    # when a third message names the first one's set again
    state.apply((SENT, Q, TS, 3, [(str(uuid.uuid4()), "third", {}, "", None, 0, dict(sender_a))]))
    # then each message keeps its own system attributes
    assert [(row[2], row[6]) for row in state.state()[Q]] == [("second", {"FerryMQPriority": 1}),
                                                              ("third", sender_a)]


def test_a_straggler_is_still_found_after_the_window_grows_back_over_it() -> None:
    # given a message left behind in the overflow while 70,000 later ones came and went, all but one
    state = PartitionState()
    state.apply((SENT, Q, TS, 1, [plain_message("straggler")]))
    batch = [plain_message(f"m{i}") for i in range(10)]
    kept = 40_000
    for seq in range(2, 70_002, 10):
        state.apply((SENT, OTHER, TS, seq, batch))
        state.apply((DELETED, OTHER, [s for s in range(seq, seq + 10) if s != kept]))
    table = state.table
    assert 1 in table.overflow and table.base > 1
    # when a message is restored just below the window's front, so that the window grows back down over it
    state.apply((RESTORED, OTHER, [_restored(table.base - 5)]))
    assert table.base <= 1
    # then the straggler is found where it is, and removed by its record
    assert [row[2] for row in state.state()[Q]] == ["straggler"]
    state.apply((DELETED, Q, [1]))
    assert Q not in state.state() and table.live == 2


def _moving_stragglers() -> tuple[PartitionState, list[int], int]:
    """A partition whose table has begun moving more stragglers than a step of the window holds (one number in
    eight of the first 4 * MOVE_SPAN) to the overflow; and the next sequence number."""
    state = PartitionState()
    sent = range(1, 4 * MOVE_SPAN + 1)
    stragglers = [s for s in sent if (s - 1) % 8 == 0]
    for seq in range(sent.start, sent.stop, 8):
        state.apply((SENT, Q, TS, seq, [plain_message(f"q{seq + i}") for i in range(8)]))
        state.apply((DELETED, Q, list(range(seq + 1, seq + 8))))
    seq = sent.stop
    while state.table._moving is None:
        state.apply((SENT, OTHER, TS, seq, [plain_message("o")] * 10))
        state.apply((DELETED, OTHER, list(range(seq, seq + 10))))
        seq += 10
    return state, stragglers, seq


def test_many_stragglers_move_to_the_overflow_a_step_at_a_time_and_every_message_is_found_meanwhile() -> None:
    # given a move of stragglers begun (other messages came and went until the window was mostly dead)
    state, stragglers, seq = _moving_stragglers()
    table = state.table
    # then the move goes on a step per removal, each straggler found all along, one removed and one sent meanwhile
    state.apply((DELETED, Q, [stragglers[0]]))
    steps = 1
    while table._moving is not None:
        assert [row[0] for row in state.state()[Q]] == stragglers[1:]
        state.apply((SENT, OTHER, TS, seq, [plain_message("o")]))
        state.apply((DELETED, OTHER, [seq]))
        seq += 1
        steps += 1
    assert steps >= 3
    # and those below the window's new front are in the overflow, no other
    assert table.overflow and set(table.overflow) == {s for s in stragglers[1:] if s < table.base}
    assert [row[0] for row in state.state()[Q]] == stragglers[1:]


def test_a_message_restored_where_a_move_of_stragglers_has_been_finishes_the_move_first() -> None:
    state, stragglers, _ = _moving_stragglers()
    table = state.table
    # when a message is restored among the numbers the move has passed, while it is under way
    restored = stragglers[0] + 1
    assert table._moving is not None and restored - table.base < table._moving[0]
    state.apply((RESTORED, OTHER, [_restored(restored)]))
    # then the move was finished first, and every message is found
    assert table._moving is None
    assert [row[0] for row in state.state()[Q]] == stragglers
    assert [row[0] for row in state.state()[OTHER]] == [restored]


def test_a_message_sent_long_after_those_kept_does_not_stretch_the_window_over_the_numbers_between() -> None:
    # given a partition restored from a snapshot: a few old messages kept, ten million numbers used since
    state = PartitionState.replay([(RESTORED, Q, [_restored(seq) for seq in (3, 5, 8)]), (SEQUENCE, 10_000_000)])
    # when a message is sent after them
    state.apply((SENT, Q, TS, state.next_seq, [plain_message("new")]))
    # then the table spans what it holds, not the ten million numbers between, and finds all four
    assert len(state.table.window) < 100_000
    assert [row[0] for row in state.state()[Q]] == [3, 5, 8, 10_000_000]
    state.apply((DELETED, Q, [5, 10_000_000]))
    assert [row[0] for row in state.state()[Q]] == [3, 8]


seq_ops = st.lists(
    st.one_of(
        st.tuples(st.just("insert"), st.integers(1, 3_000_000)),
        st.tuples(st.just("insert_run"), st.integers(1, 3_000_000), st.integers(1, 2_000)),
        st.tuples(st.just("free"), st.integers(0, 10**6)),
        st.tuples(st.just("free_run"), st.integers(0, 10**6), st.integers(1, 2_000)),
    ),
    max_size=40,
)


@given(seq_ops)
@fuzz_settings(ci_examples=200)
def test_the_table_finds_every_live_row_by_its_number_whatever_the_order(ops: list[tuple]) -> None:
    # given rows inserted and freed in any order: runs and single numbers, ahead of the window, behind it and
    # far from it (what restores, stragglers and sends after a restore do)
    table = MessageTable()
    live: dict[int, int] = {}
    for op in ops:
        if op[0].startswith("insert"):
            first, count = op[1], op[2] if len(op) > 2 else 1
            for seq in range(first, first + count):
                if seq not in live:
                    live[seq] = table.insert(seq, 7, None, f"b{seq}", {}, None, None, {}, seq, 0, 0, 0, None,
                                             None, 1, 0, 0)
        else:
            ordered = sorted(live)
            if not ordered:
                continue
            at = op[1] % len(ordered)
            for seq in ordered[at:at + (op[2] if len(op) > 2 else 1)]:
                table.free(seq, live.pop(seq))
            table.tidy()
        # then every live row is found by its number, with its own fields, and no freed number is
        for seq, slot in live.items():
            assert table.slot(seq) == slot and table.sent[slot] == seq and table.body(slot) == f"b{seq}"
        assert table.live == len(live)
    for seq in range(1, 50):
        if seq not in live:
            assert table.slot(seq) == -1


def test_a_system_attribute_dict_changed_by_its_sender_afterwards_changes_no_stored_message() -> None:
    # given two messages sent with one system attribute dict, then that dict changed by the code that sent it
    state = PartitionState()
    shared = {"SenderId": "a"}
    state.apply((SENT, Q, TS, 1, [(str(uuid.uuid4()), "one", {}, "", None, 0, shared),
                                  (str(uuid.uuid4()), "two", {}, "", None, 0, {"SenderId": "a"})]))
    shared["SenderId"] = "changed"
    # then both messages keep the attributes they were sent with
    assert [row[6] for row in state.state()[Q]] == [{"SenderId": "a"}, {"SenderId": "a"}]
