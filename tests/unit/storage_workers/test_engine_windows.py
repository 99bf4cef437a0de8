"""The engine's time windows and bounded memory: the resend window's boundary, and the sweep that forgets resend
ids, receive attempts and idle queues without a further request on the queue and without a record."""

from __future__ import annotations

import random

import pytest

from ferrymq.clock import ManualClock
from ferrymq.limits import DEDUP_WINDOW_SECONDS, RESEND_HORIZON_MS, RESEND_WINDOW_MS
from ferrymq.storage.engine import Engine
from ferrymq.storage.engine.fifo import ATTEMPT_WINDOW_MS, FifoQueue
from ferrymq.storage.engine.records import ATTEMPTS, QUEUE_META
from ferrymq.storage.log import records as codec
from tests.support.engine_requests import RECEIPT_KEY, RETENTION, bodies, fifo_message, plain_message, poll
from tests.support.engine_workload import ALL_QUEUES, drive

Q = "000000000000/orders.fifo/1"
PLAIN = "000000000000/orders/2"


def advance_ms(clock: ManualClock, engine: Engine, to_ms: int) -> None:
    clock.advance((to_ms - engine.now_ms()) / 1000)
    assert engine.now_ms() == to_ms


def test_a_front_end_retry_inside_its_dedup_window_always_finds_the_id() -> None:
    assert DEDUP_WINDOW_SECONDS * 1000 < RESEND_WINDOW_MS


def test_an_id_is_a_resend_until_the_window_ends_and_new_from_then_on(engine: Engine, clock: ManualClock) -> None:
    # given a message stored at t
    [(_, t, seq, _)] = engine.store(Q, [fifo_message("g", "first", message_id="id-1")], RETENTION, fifo=True)
    # when the same id comes 1 ms before the window ends, then it is a duplicate with the original's result
    advance_ms(clock, engine, t + RESEND_WINDOW_MS - 1)
    resent = engine.store(Q, [fifo_message("g", "again", message_id="id-1")], RETENTION, fifo=True)
    assert resent == [("id-1", t, seq, True)]
    # when it comes as the window ends, then it is stored anew
    advance_ms(clock, engine, t + RESEND_WINDOW_MS)
    [(_, sent_ts, new_seq, duplicate)] = engine.store(
        Q, [fifo_message("g", "later", message_id="id-1")], RETENTION, fifo=True
    )
    assert not duplicate and new_seq > seq and sent_ts == t + RESEND_WINDOW_MS
    assert bodies(engine, Q) == ["first", "later"]


def test_the_sweep_forgets_resend_ids_past_the_window_with_no_further_store(
    engine: Engine, clock: ManualClock, records: list
) -> None:
    # given a queue that stored two ids, one of them still there as a message
    [(_, t, _, _)] = engine.store(Q, [fifo_message("g", "a", message_id="id-a")], RETENTION, fifo=True)
    engine.store(Q, [fifo_message("h", "b", message_id="id-b")], RETENTION, fifo=True)
    (got, _), _ = poll(engine, Q, n=2)
    engine.delete(Q, [got["receipt"]])
    recorded = len(records)
    # when swept 1 ms before the window ends, then both ids are still remembered
    advance_ms(clock, engine, t + RESEND_WINDOW_MS - 1)
    engine.sweep()
    assert list(engine.queues[Q].recent) == ["id-a", "id-b"]
    # when swept as the window ends, with no store since, then they are forgotten; the queue stays for its message
    advance_ms(clock, engine, t + RESEND_WINDOW_MS)
    assert engine.sweep().forgotten == 0
    assert engine.queues[Q].recent == {}
    assert len(engine.queues[Q].msgs) == 1
    # and sweeping recorded nothing
    assert len(records) == recorded


def test_the_sweep_forgets_receive_attempts_past_their_window(engine: Engine, clock: ManualClock) -> None:
    # given a message received with an attempt id and kept in flight for longer than the attempt window
    [(_, t, _, _)] = engine.store(Q, [fifo_message("g", "m")], RETENTION, fifo=True)
    poll(engine, Q, visibility=3600, attempt_id="attempt")
    q = engine.queues[Q]
    assert isinstance(q, FifoQueue)
    # when swept as the attempt window ends, then the attempt is forgotten, and so is the message's tie to it
    advance_ms(clock, engine, t + ATTEMPT_WINDOW_MS - 1)
    engine.sweep()
    assert list(q.attempts) == ["attempt"]
    advance_ms(clock, engine, t + ATTEMPT_WINDOW_MS)
    engine.sweep()
    assert q.attempts == {}
    assert [m.attempt for m in q.msgs.values()] == [None]


def test_the_sweep_forgets_a_queue_that_holds_nothing(engine: Engine, clock: ManualClock, records: list) -> None:
    # given a standard queue whose only message was received and deleted
    engine.send(PLAIN, [plain_message("m")], RETENTION)
    (got,), _ = poll(engine, PLAIN)
    engine.delete(PLAIN, [got["receipt"]])
    recorded = len(records)
    # when swept while a resend of that message could still come, then its id is kept
    assert engine.sweep().forgotten == 0
    # when swept past twice the resend horizon (the sweep goes by this worker's clock, which may run ahead
    # of the one that stamped the message), then its state is forgotten, without a record
    clock.advance(RESEND_HORIZON_MS / 1000 + 1)
    assert engine.sweep().forgotten == 0
    clock.advance(RESEND_HORIZON_MS / 1000)
    assert engine.sweep().forgotten == 1
    assert PLAIN not in engine.queues
    assert len(records) == recorded
    # and it answers as before: empty, and taking new messages
    assert engine.stats(PLAIN, RETENTION) == (0, 0, 0)
    engine.send(PLAIN, [plain_message("next")], RETENTION)
    assert bodies(engine, PLAIN) == ["next"]


def test_the_sweep_keeps_queues_that_hold_messages_resend_ids_attempts_or_move_tasks(
    engine: Engine, clock: ManualClock
) -> None:
    # given a queue with a message, one with only resend ids, one with only a finished move task, one with only
    # a receive attempt (as a snapshot may bring it back), and one that holds nothing
    engine.send("with-message", [plain_message("m")], RETENTION)
    engine.store("with-resends.fifo", [fifo_message("g", "m")], RETENTION, fifo=True)
    (got,), _ = poll(engine, "with-resends.fifo")
    engine.delete("with-resends.fifo", [got["receipt"]])
    engine.start_move_task("with-task", {"task_handle": "t", "source_arn": "arn", "destination": None})
    engine.end_move_task("with-task", "t", "COMPLETED")
    engine.apply((QUEUE_META, "with-attempt.fifo", True, []))
    engine.apply((ATTEMPTS, "with-attempt.fifo", [("attempt", engine.now_ms(), [])]))
    engine.send("idle", [plain_message("m")], RETENTION)
    engine.purge("idle")
    # when swept, then only the queue that holds nothing is forgotten
    assert engine.sweep().forgotten == 1
    assert sorted(engine.queues) == ["with-attempt.fifo", "with-message", "with-resends.fifo", "with-task"]
    # and once the resend and attempt windows are over, so are the queues that held only those
    clock.advance(RESEND_WINDOW_MS / 1000)
    assert engine.sweep().forgotten == 2
    assert sorted(engine.queues) == ["with-message", "with-task"]


@pytest.mark.parametrize("seed", [31, 32])
def test_a_swept_engine_behaves_as_the_replay_of_its_records(seed: int) -> None:
    # given an engine swept now and then through a random workload
    clock, records = ManualClock(), []
    engine = Engine(clock, RECEIPT_KEY, on_record=records.append)
    drive(engine, clock, random.Random(seed), 2500, sweeps=True)
    # when its records are replayed into a fresh engine that never swept
    replayed = Engine.replay(clock, [codec.decode(codec.encode(r)) for r in records], receipt_key=RECEIPT_KEY)
    # then, swept once now, it holds the same messages, and both answer the same
    replayed.sweep()
    engine.sweep()
    assert replayed.state() == engine.state()
    assert replayed.next_seq == engine.next_seq
    for q in ALL_QUEUES:
        assert replayed.stats(q, 120) == engine.stats(q, 120)
        assert replayed.poll(q, 10, 30, 120, attempt_id="att-1") == engine.poll(q, 10, 30, 120, attempt_id="att-1")
        assert replayed.list_move_tasks(q) == engine.list_move_tasks(q)
