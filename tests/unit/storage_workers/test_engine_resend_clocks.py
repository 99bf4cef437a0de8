"""Resends after an unknown outcome across a failover between workers whose clocks differ: the new leader
recognises what the first attempt stored by message id alone, whatever its clock says."""

from __future__ import annotations

import pytest

from ferrymq.clock import ManualClock
from ferrymq.storage.engine import Engine
from ferrymq.storage.engine.records import Record
from tests.support.engine_requests import RECEIPT_KEY, RETENTION, poll

Q = "000000000000/orders/1"


def message(message_id: str) -> list:
    return [message_id, f"body of {message_id}", {}, "md5", None, 0, {}]


def bodies(engine: Engine) -> list[str]:
    rows, _ = poll(engine, Q, 10)
    return sorted(row["body"] for row in rows)


@pytest.mark.parametrize("skew_seconds", [-10.0, 10.0])
def test_a_resend_to_a_leader_with_another_clock_brings_back_nothing_deleted_and_stores_no_copy(
    skew_seconds: float,
) -> None:
    # given leader A stored a send of a and b whose outcome its front end never learned, and a consumer
    # received a and deleted it
    records: list[Record] = []
    a_clock = ManualClock()
    a = Engine(a_clock, RECEIPT_KEY, on_record=records.append)
    a.send(Q, [message("a"), message("b")], RETENTION)
    a_clock.advance(1)
    rows, _ = poll(a, Q, 1)
    assert [row["body"] for row in rows] == ["body of a"]
    assert a.delete(Q, [rows[0]["receipt"]]) == [None]
    # when B, whose clock is ten seconds off A's, takes over with A's records, stores a send of its own,
    # and the front end's resend of a and b reaches it
    b_clock = ManualClock(start=a_clock.now() + skew_seconds)
    b = Engine.replay(b_clock, list(records), receipt_key=RECEIPT_KEY)
    b_clock.advance(2)
    b.send(Q, [message("c")], RETENTION)
    b.send(Q, [message("a"), message("b")], RETENTION, resend=True)
    # then a stays deleted and b is held once: only c is new
    assert bodies(b) == ["body of b", "body of c"]


@pytest.mark.parametrize("skew_seconds", [-10.0, 10.0])
def test_removed_ids_age_on_the_queues_record_timeline_not_a_workers_clock(skew_seconds: float) -> None:
    # given a message deleted just after it was sent on leader A
    records: list[Record] = []
    a_clock = ManualClock()
    a = Engine(a_clock, RECEIPT_KEY, on_record=records.append)
    a.send(Q, [message("a")], RETENTION)
    rows, _ = poll(a, Q)
    a.delete(Q, [rows[0]["receipt"]])
    # when B, its clock ten seconds off, takes over and sweeps (as leaders do now and then)
    b_clock = ManualClock(start=a_clock.now() + skew_seconds)
    b = Engine.replay(b_clock, list(records), receipt_key=RECEIPT_KEY)
    b.sweep()
    # then B still remembers the removed id, and a resend of it stores nothing
    b.send(Q, [message("a")], RETENTION, resend=True)
    assert bodies(b) == []
