"""The age of a queue's oldest message, as the engine reports it for the metrics: driven by a manual clock."""

from __future__ import annotations

from ferrymq.clock import ManualClock
from ferrymq.storage.engine import Engine
from tests.support.engine_requests import RETENTION, fifo_message, plain_message, poll

Q = "000000000000/ages/1"
F = "000000000000/ages.fifo/1"


def test_an_empty_or_unknown_queue_has_no_age(engine: Engine) -> None:
    assert engine.oldest_age_ms("never-used", RETENTION) == 0
    engine.send(Q, [plain_message("a")], RETENTION)
    got, _ = poll(engine, Q)
    engine.delete(Q, [got[0]["receipt"]])
    assert engine.oldest_age_ms(Q, RETENTION) == 0


def test_age_counts_from_the_oldest_message_held_in_flight_or_not(engine: Engine, clock: ManualClock) -> None:
    # given a message sent, and another one 5 s later
    engine.send(Q, [plain_message("first")], RETENTION)
    clock.advance(5)
    engine.send(Q, [plain_message("second")], RETENTION)
    clock.advance(2)
    # then the queue is as old as the first
    assert engine.oldest_age_ms(Q, RETENTION) == 7000
    # when the first is received (in flight, still held) it still counts
    got, _ = poll(engine, Q, n=1)
    assert got[0]["body"] == "first"
    assert engine.oldest_age_ms(Q, RETENTION) == 7000
    # and once it is deleted, the second is the oldest
    engine.delete(Q, [got[0]["receipt"]])
    assert engine.oldest_age_ms(Q, RETENTION) == 2000


def test_expired_messages_do_not_count(engine: Engine, clock: ManualClock) -> None:
    engine.send(Q, [plain_message("old")], 60)
    clock.advance(50)
    engine.send(Q, [plain_message("young")], 60)
    clock.advance(20)
    # the first is past its 60 s retention: only the second, 20 s old, is held
    assert engine.oldest_age_ms(Q, 60) == 20_000
    assert engine.stats(Q, 60) == (1, 0, 0)


def test_fifo_queues_report_their_oldest_message_too(engine: Engine, clock: ManualClock) -> None:
    engine.store(F, [fifo_message("g1", "a"), fifo_message("g2", "b")], RETENTION, fifo=True)
    clock.advance(3)
    assert engine.oldest_age_ms(F, RETENTION) == 3000
