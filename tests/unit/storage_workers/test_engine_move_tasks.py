"""Message move tasks as engine state: start, progress, cancel, failure, listing and resuming after replay,
and the pacing of the mover, with a manual clock."""

from __future__ import annotations

import pytest

from ferrymq.clock import ManualClock
from ferrymq.errors import InvalidParameterValue, ResourceNotFound
from ferrymq.storage.engine import Engine
from ferrymq.storage.engine.records import BATCH, STORED, TASK_MOVED
from ferrymq.storage.engine.tasks import moved_copy, moved_message_id
from ferrymq.storage.log import records as codec
from ferrymq.storage.move_tasks import Pacer
from tests.support.engine_requests import RECEIPT_KEY, RETENTION, bodies, fifo_message, plain_message, poll

DLQ = "000000000000/work-dlq/2"
SRC = "000000000000/work/1"
DLQ_ARN = "arn:aws:sqs:us-east-1:000000000000:work-dlq"
SRC_ARN = "arn:aws:sqs:us-east-1:000000000000:work"


def task(handle: str = "task-1", *, rate: int | None = None) -> dict:
    return {
        "task_handle": handle,
        "source_arn": DLQ_ARN,
        "destination": None,
        "max_per_second": rate,
        "started_ts": 1_700_000_000_000,
    }


def dead_letters(engine: Engine, n: int) -> list[str]:
    """``n`` messages in the DLQ as redrive leaves them; returns their ids."""
    messages = [plain_message(f"dead {i}", system={"DeadLetterQueueSourceArn": SRC_ARN}) for i in range(n)]
    engine.send(DLQ, messages, RETENTION)
    return [m[0] for m in messages]


def test_a_task_counts_the_messages_present_when_it_starts(engine: Engine) -> None:
    # given three messages in the DLQ
    dead_letters(engine, 3)
    # when a task starts
    started = engine.start_move_task(DLQ, task(rate=5))
    # then it is RUNNING with three to move, as listed
    assert started == {
        "task_handle": "task-1",
        "status": "RUNNING",
        "source_arn": DLQ_ARN,
        "destination_arn": None,
        "max_per_second": 5,
        "moved": 0,
        "to_move": 3,
        "failure_reason": None,
        "started_ts": 1_700_000_000_000,
    }
    assert engine.list_move_tasks(DLQ) == [started]
    assert engine.active_move_tasks() == [(DLQ, "task-1")]


def test_only_one_task_runs_per_queue_and_a_retried_start_returns_the_same_task(engine: Engine) -> None:
    dead_letters(engine, 1)
    first = engine.start_move_task(DLQ, task("one"))
    with pytest.raises(InvalidParameterValue) as raised:
        engine.start_move_task(DLQ, task("two"))
    assert raised.value.message == (
        "There is already a task running. Only one active task is allowed for a source queue arn at a given time."
    )
    assert engine.start_move_task(DLQ, task("one")) == first


def test_messages_sent_after_the_start_are_not_moved(engine: Engine) -> None:
    # given a task started over two messages, and one more arriving after the start
    old = dead_letters(engine, 2)
    engine.start_move_task(DLQ, task())
    dead_letters(engine, 1)
    # then only the first two are candidates, oldest first
    assert [c.id for c in engine.move_candidates(DLQ, "task-1", 10)] == old


def test_messages_in_flight_wait_and_still_count_as_remaining(engine: Engine, clock: ManualClock) -> None:
    ids = dead_letters(engine, 2)
    engine.start_move_task(DLQ, task())
    poll(engine, DLQ, n=1, visibility=30)
    assert [c.id for c in engine.move_candidates(DLQ, "task-1", 10)] == ids[1:]
    assert engine.move_remaining(DLQ, "task-1") == 2
    clock.advance(30)
    assert [c.id for c in engine.move_candidates(DLQ, "task-1", 10)] == ids


def test_moving_to_a_local_queue_is_one_record_and_the_message_arrives_new(
    engine: Engine, clock: ManualClock, records: list
) -> None:
    # given a message that was received three times before it was dead-lettered
    ids = dead_letters(engine, 1)
    (got,), _ = poll(engine, DLQ, visibility=1)
    clock.advance(60)
    engine.start_move_task(DLQ, task())
    (candidate,) = engine.move_candidates(DLQ, "task-1", 10)
    # when it is moved to a queue of this partition
    engine.move_locally(DLQ, "task-1", [candidate.seq], SRC, False)
    # then one record stored it there and removed it here
    assert records[-1][0] == BATCH and [r[0] for r in records[-1][1]] == [STORED, TASK_MOVED]
    assert engine.stats(DLQ, RETENTION) == (0, 0, 0)
    # and it arrives as a new message: new id, fresh send time, never received, no DLQ source, visible at once
    (moved,), _ = poll(engine, SRC)
    assert moved["id"] == moved_message_id("task-1", ids[0]) != ids[0]
    assert moved["sent_ts"] == int(clock.now() * 1000) and moved["receive_count"] == 1
    assert moved["body"] == got["body"] and "DeadLetterQueueSourceArn" not in moved["system"]
    assert engine.list_move_tasks(DLQ)[0]["moved"] == 1


def test_a_batch_handed_over_twice_is_stored_once(engine: Engine) -> None:
    # given a moved copy stored in its destination once already (a crash came before the move was recorded)
    dead_letters(engine, 1)
    engine.start_move_task(DLQ, task())
    (candidate,) = engine.move_candidates(DLQ, "task-1", 10)
    copy = moved_copy(candidate, "task-1")
    handed = (copy.id, copy.body, copy.attrs, copy.md5_body, copy.md5_attrs, 0, copy.system, None, None, (None, 0, 0))
    engine.store(SRC, [handed], RETENTION, fifo=False)
    # when the resumed task moves it again, then the destination keeps one copy
    engine.move_locally(DLQ, "task-1", [candidate.seq], SRC, False)
    assert engine.stats(SRC, RETENTION) == (1, 0, 0)
    assert engine.move_remaining(DLQ, "task-1") == 0


def test_moves_acknowledged_by_another_worker_remove_the_messages_and_count(engine: Engine) -> None:
    dead_letters(engine, 3)
    engine.start_move_task(DLQ, task())
    batch = engine.move_candidates(DLQ, "task-1", 2)
    engine.hold(DLQ, [c.seq for c in batch], 10)
    assert engine.move_candidates(DLQ, "task-1", 10)[0].body == "dead 2"
    engine.moved(DLQ, "task-1", [c.seq for c in batch])
    assert engine.list_move_tasks(DLQ)[0]["moved"] == 2
    assert engine.move_remaining(DLQ, "task-1") == 1


def test_a_fifo_dead_letter_queue_moves_a_group_only_in_order(engine: Engine, clock: ManualClock) -> None:
    # given a FIFO DLQ whose group g has its first message in flight
    fifo_dlq = "000000000000/dlq.fifo/9"
    engine.store(fifo_dlq, [fifo_message("g", "g1"), fifo_message("g", "g2"), fifo_message("h", "h1")], RETENTION,
                 fifo=True)
    engine.start_move_task(fifo_dlq, task())
    poll(engine, fifo_dlq, n=1, visibility=30)
    # then only the other group's message can be moved now
    assert [c.body for c in engine.move_candidates(fifo_dlq, "task-1", 10)] == ["h1"]
    clock.advance(30)
    assert [c.body for c in engine.move_candidates(fifo_dlq, "task-1", 10)] == ["g1", "g2", "h1"]


def test_cancel_asks_a_running_task_to_stop_and_only_a_running_one(engine: Engine) -> None:
    dead_letters(engine, 2)
    engine.start_move_task(DLQ, task())
    engine.move_locally(DLQ, "task-1", [engine.move_candidates(DLQ, "task-1", 1)[0].seq], SRC, False)
    # when cancelled, then it reports what it moved and is CANCELLING until the mover stops it
    assert engine.cancel_move_task(DLQ, "task-1") == 1
    assert engine.list_move_tasks(DLQ)[0]["status"] == "CANCELLING"
    with pytest.raises(ResourceNotFound) as raised:
        engine.cancel_move_task(DLQ, "task-1")
    assert raised.value.message == "Task does not exist."
    engine.end_move_task(DLQ, "task-1", "CANCELLED")
    assert engine.list_move_tasks(DLQ)[0]["status"] == "CANCELLED"
    assert engine.active_move_tasks() == []
    with pytest.raises(ResourceNotFound):
        engine.cancel_move_task(DLQ, "no-such-task")
    # and a new task may start
    assert engine.start_move_task(DLQ, task("task-2"))["to_move"] == 1


def test_a_failed_task_keeps_its_reason(engine: Engine) -> None:
    dead_letters(engine, 1)
    engine.start_move_task(DLQ, task())
    engine.end_move_task(DLQ, "task-1", "FAILED", "AWS.SimpleQueueService.NonExistentQueue")
    listed = engine.list_move_tasks(DLQ)[0]
    assert (listed["status"], listed["failure_reason"]) == ("FAILED", "AWS.SimpleQueueService.NonExistentQueue")
    assert engine.stats(DLQ, RETENTION) == (1, 0, 0)


def test_the_last_ten_tasks_are_listed_most_recent_first(engine: Engine) -> None:
    for i in range(12):
        engine.start_move_task(DLQ, task(f"task-{i}"))
        engine.end_move_task(DLQ, f"task-{i}", "COMPLETED")
    assert [t["task_handle"] for t in engine.list_move_tasks(DLQ)] == [f"task-{i}" for i in range(11, 1, -1)]


def test_a_replayed_log_resumes_the_task_where_it_stood(engine: Engine, clock: ManualClock, records: list) -> None:
    # given a task that moved two of four messages
    ids = dead_letters(engine, 4)
    engine.start_move_task(DLQ, task())
    engine.move_locally(DLQ, "task-1", [c.seq for c in engine.move_candidates(DLQ, "task-1", 2)], SRC, False)
    # when the records are replayed, as after a restart
    replayed = Engine.replay(clock, [codec.decode(codec.encode(r)) for r in records], receipt_key=RECEIPT_KEY)
    # then the task is still running with its counts, and only the other two are left to move
    assert replayed.active_move_tasks() == [(DLQ, "task-1")]
    assert replayed.list_move_tasks(DLQ) == engine.list_move_tasks(DLQ)
    assert [c.id for c in replayed.move_candidates(DLQ, "task-1", 10)] == ids[2:]
    assert bodies(replayed, SRC) == ["dead 0", "dead 1"]


def test_the_pacer_spaces_rounds_to_the_rate() -> None:
    # given a pacer for 5 messages a second
    clock = ManualClock()
    pacer = Pacer(5, clock)
    assert pacer.batch_size() == 5
    # when a batch of 5 goes at once, then the next may go one second later
    assert pacer.moved(5) == pytest.approx(1.0)
    clock.advance(1.0)
    assert pacer.moved(5) == pytest.approx(1.0)
    # and a slow round shortens the wait
    clock.advance(1.5)
    assert pacer.moved(5) == pytest.approx(0.5)
    # and after an idle pause the rate starts afresh instead of bursting
    clock.advance(60)
    pacer.idle()
    assert pacer.moved(5) == pytest.approx(1.0)


def test_an_unlimited_pacer_moves_big_batches_without_waiting() -> None:
    pacer = Pacer(None, ManualClock())
    assert pacer.batch_size() == 100
    assert pacer.moved(100) == 0.0
    assert Pacer(500, ManualClock()).batch_size() == 10
