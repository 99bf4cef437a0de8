"""Peeking at a queue in the engine: the visible messages, oldest first, and nothing changed or recorded."""

from __future__ import annotations

from ferrymq.clock import ManualClock
from ferrymq.storage.engine import Engine
from ferrymq.storage.engine.records import Record
from tests.support.engine_requests import RETENTION, as_dicts, fifo_message, plain_message, poll

Q = "000000000000/orders/1"
FIFO = "000000000000/orders.fifo/1"


def _fingerprint(engine: Engine, queue: str) -> tuple:
    """Everything a peek could disturb: counts, indexes, and each message's state, visibility and receives."""
    q = engine.queues[queue]
    messages = sorted((m.seq, m.state, m.visible_at, m.receive_count, m.token) for m in q.msgs.values())
    return (list(q.counts), list(q.order), list(q.timers), messages, engine.next_seq)


def test_a_peek_shows_visible_messages_oldest_first_and_changes_nothing(
    engine: Engine, clock: ManualClock, records: list[Record]
) -> None:
    # given a received message (in flight), a delayed one and two visible ones
    first, delayed, second, third = (plain_message(b) for b in ("first", "delayed", "second", "third"))
    delayed[5] = 60
    engine.send(Q, [first], RETENTION)
    engine.send(Q, [delayed], RETENTION)
    clock.advance(1)
    engine.send(Q, [second, third], RETENTION)
    received, _ = poll(engine, Q, n=1, visibility=30)
    assert [m["body"] for m in received] == ["first"]
    written, before = len(records), _fingerprint(engine, Q)
    # when the queue is peeked at
    shown = as_dicts(engine.peek(Q, 10, RETENTION))
    # then the visible ones come, oldest first, as received rows without a receipt handle
    assert [m["body"] for m in shown] == ["second", "third"]
    assert all(m["receipt"] is None and m["receive_count"] == 0 for m in shown)
    assert shown[0]["id"] == second[0] and shown[0]["md5_body"] == "md5-second"
    # and nothing changed and nothing was recorded
    assert (len(records), _fingerprint(engine, Q)) == (written, before)


def test_a_message_whose_visibility_or_delay_ran_out_is_visible_to_a_peek_before_a_receive_notices(
    engine: Engine, clock: ManualClock, records: list[Record]
) -> None:
    # given an in-flight message and a delayed one, both past their time, which no receive has released yet
    late, delayed = plain_message("late"), plain_message("delayed")
    delayed[5] = 5
    engine.send(Q, [late], RETENTION)
    poll(engine, Q, n=1, visibility=10)
    engine.send(Q, [delayed], RETENTION)
    clock.advance(11)
    written, before = len(records), _fingerprint(engine, Q)
    # when peeked at, then both show, the received one with its receive count
    shown = as_dicts(engine.peek(Q, 10, RETENTION))
    assert [(m["body"], m["receive_count"]) for m in shown] == [("late", 1), ("delayed", 0)]
    # and the peek released nothing itself
    assert (len(records), _fingerprint(engine, Q)) == (written, before)


def test_a_peek_leaves_out_expired_messages_and_stops_at_its_count(engine: Engine, clock: ManualClock) -> None:
    engine.send(Q, [plain_message("old")], 60)
    clock.advance(61)
    engine.send(Q, [plain_message(str(i)) for i in range(5)], 60)
    assert [m["body"] for m in as_dicts(engine.peek(Q, 3, 60))] == ["0", "1", "2"]
    assert engine.peek("000000000000/nothing/1", 10, RETENTION) == []


def test_a_fifo_peek_shows_group_fields_and_messages_behind_an_in_flight_one(
    engine: Engine, records: list[Record]
) -> None:
    # given a FIFO group whose first message is in flight
    engine.store(FIFO, [fifo_message("g", "a"), fifo_message("g", "b"), fifo_message("h", "c")], RETENTION, fifo=True)
    got, _ = poll(engine, FIFO, n=1)
    assert [m["body"] for m in got] == ["a"]
    written = len(records)
    # when peeked at, then the messages not in flight show, with their group, deduplication id and sequence number
    shown = as_dicts(engine.peek(FIFO, 10, RETENTION))
    assert [(m["body"], m["group"], m["dedup_id"]) for m in shown] == [("b", "g", "dedup-b"), ("c", "h", "dedup-c")]
    assert all(len(m["seq"]) == 20 for m in shown)
    assert len(records) == written
