"""A dropped queue id refuses late sends for a while, and sweeps expire messages of queues nobody asks for."""

from __future__ import annotations

import pytest

from ferrymq.clock import ManualClock
from ferrymq.errors import QueueDoesNotExist
from ferrymq.limits import DROPPED_QUEUE_MEMORY_SECONDS, MAX_RETENTION_SECONDS
from ferrymq.storage.engine import Engine, PartitionState
from ferrymq.storage.engine.records import EXPIRED, Record
from tests.support.engine_requests import RECEIPT_KEY, bodies, fifo_message, plain_message

Q = "000000000000/jobs/1"
FQ = "000000000000/jobs.fifo/2"


def test_a_dropped_queue_refuses_sends_until_its_memory_ends(engine: Engine, clock: ManualClock) -> None:
    # given a queue with a message, dropped
    engine.send(Q, [plain_message("before")], 3600)
    engine.drop_queue(Q)
    assert Q not in engine.queues
    # when a front end that still caches the queue sends to it, then the send is refused and nothing is stored
    with pytest.raises(QueueDoesNotExist):
        engine.send(Q, [plain_message("late")], 3600)
    with pytest.raises(QueueDoesNotExist):
        engine.store(Q, [fifo_message("g", "late")], 3600, fifo=False)
    assert Q not in engine.queues
    # when the memory has run out and a sweep forgot it, then the id is an ordinary unknown queue again
    clock.advance(DROPPED_QUEUE_MEMORY_SECONDS - 1)
    engine.sweep()
    with pytest.raises(QueueDoesNotExist):
        engine.send(Q, [plain_message("still late")], 3600)
    clock.advance(1)
    engine.sweep()
    engine.send(Q, [plain_message("after")], 3600)
    assert bodies(engine, Q) == ["after"]


def test_dropping_an_unknown_id_is_remembered_too(engine: Engine, records: list[Record]) -> None:
    # given a queue id this worker never held (its only messages went nowhere), dropped twice
    engine.drop_queue(FQ)
    engine.drop_queue(FQ)
    # then one record remembers it, and sends to it are refused
    assert len(records) == 1
    with pytest.raises(QueueDoesNotExist):
        engine.store(FQ, [fifo_message("g", "late")], 3600, fifo=True)


def test_dropped_ids_survive_replay_and_snapshots(engine: Engine, records: list[Record]) -> None:
    # given a dropped queue
    engine.send(Q, [plain_message("x")], 3600)
    engine.drop_queue(Q)
    # when the state is rebuilt from the log, and from a compaction's snapshot of it
    for rebuilt in (PartitionState.replay(records), PartitionState.replay(PartitionState.replay(records).snapshot())):
        restarted = Engine(ManualClock(engine.now_ms() / 1000), RECEIPT_KEY, partition=rebuilt)
        # then the id still refuses sends
        with pytest.raises(QueueDoesNotExist):
            restarted.send(Q, [plain_message("late")], 3600)


def test_a_sweep_expires_messages_of_a_queue_nobody_asks_for(
    engine: Engine, clock: ManualClock, records: list[Record]
) -> None:
    # given a queue with a 60 s retention that nobody receives from
    engine.send(Q, [plain_message("old")], 60)
    clock.advance(30)
    engine.send(Q, [plain_message("newer")], 60)
    # when a sweep runs after the first message's retention ended
    clock.advance(31)
    engine.sweep()
    # then that message is expired by a record, and the other one stays
    assert [r[0] for r in records].count(EXPIRED) == 1
    assert [m.body for m in engine.queues[Q].msgs.values()] == ["newer"]


def test_after_a_restart_sweeps_expire_by_the_longest_retention(records: list[Record]) -> None:
    # given messages sent with a 60 s retention, and a worker restarted from the log (no request since)
    clock = ManualClock()
    Engine(clock, RECEIPT_KEY, on_record=records.append).send(Q, [plain_message("m")], 60)
    restarted = Engine(clock, RECEIPT_KEY, partition=PartitionState.replay(records))
    # when sweeps run past 60 s, then nothing is expired: the queue's retention is unknown, so SQS's longest holds
    clock.advance(3600)
    restarted.sweep()
    assert len(restarted.queues[Q].msgs) == 1
    # and once that has passed, the message goes
    clock.advance(MAX_RETENTION_SECONDS)
    restarted.sweep()
    assert Q not in restarted.queues or not restarted.queues[Q].msgs
