"""Replaying the records of FIFO queues, dead-letter redrive and move tasks, and their snapshots, rebuilds the
same state: what recovery and compaction rely on."""

from __future__ import annotations

import random

import pytest

from ferrymq.clock import ManualClock
from ferrymq.storage.engine import Engine, PartitionState
from ferrymq.storage.engine.records import RESENDS
from ferrymq.storage.log import records as codec
from tests.support.engine_requests import RECEIPT_KEY, fifo_message, plain_message, poll
from tests.support.engine_workload import ALL_QUEUES, RETENTION, drive


def _same_behaviour(a: Engine, b: Engine) -> None:
    for q in ALL_QUEUES:
        assert a.stats(q, RETENTION) == b.stats(q, RETENTION)
        assert a.poll(q, 10, 30, RETENTION, attempt_id="att-1") == b.poll(q, 10, 30, RETENTION, attempt_id="att-1")
        assert a.list_move_tasks(q) == b.list_move_tasks(q)


@pytest.mark.parametrize("seed", [11, 12, 13])
def test_replaying_the_records_rebuilds_the_same_state(seed: int) -> None:
    # given an engine driven through FIFO sends and receives, redrive, attempts and move tasks
    clock, records = ManualClock(), []
    engine = Engine(clock, RECEIPT_KEY, on_record=records.append)
    drive(engine, clock, random.Random(seed), 2500)
    # when its records, through the log codec, are replayed into a fresh engine
    replayed = Engine.replay(clock, [codec.decode(codec.encode(r)) for r in records], receipt_key=RECEIPT_KEY)
    # then messages, queue types, resend windows, attempts and tasks are the same, and so is what comes next
    assert replayed.state() == engine.state()
    assert replayed.meta_state() == engine.meta_state()
    assert replayed.next_seq == engine.next_seq
    assert any(fifo for fifo, *_ in engine.meta_state().values())
    _same_behaviour(replayed, engine)


@pytest.mark.parametrize("seed", [21, 22])
def test_a_snapshot_rebuilds_the_same_state(seed: int) -> None:
    # given a driven engine and its snapshot
    clock, records = ManualClock(), []
    engine = Engine(clock, RECEIPT_KEY, on_record=records.append)
    drive(engine, clock, random.Random(seed), 2500)
    snapshot = [codec.decode(codec.encode(r)) for r in engine.snapshot()]
    # when the snapshot is replayed, then it is the same state, and it behaves the same
    restored = Engine.replay(clock, snapshot, receipt_key=RECEIPT_KEY)
    assert restored.state() == engine.state()
    assert restored.meta_state() == engine.meta_state()
    assert restored.live_bytes == engine.live_bytes
    assert restored.next_seq == engine.next_seq
    _same_behaviour(restored, engine)


def test_an_attempt_survives_a_snapshot() -> None:
    # given a FIFO receive with an attempt id, then a snapshot of the engine
    clock = ManualClock()
    engine = Engine(clock, RECEIPT_KEY)
    engine.store("q.fifo", [fifo_message("g", "m")], RETENTION, fifo=True)
    first = engine.poll("q.fifo", 10, 30, RETENTION, attempt_id="attempt").rows
    restored = Engine.replay(clock, [codec.decode(codec.encode(r)) for r in engine.snapshot()], receipt_key=RECEIPT_KEY)
    # when the attempt is retried against the restored engine, then it returns the same message and handle
    clock.advance(10)
    assert restored.poll("q.fifo", 10, 30, RETENTION, attempt_id="attempt").rows == first


def test_a_large_resend_window_is_written_in_bounded_chunks() -> None:
    # given a FIFO queue that stored ten thousand messages within the resend window
    clock = ManualClock()
    engine = Engine(clock, RECEIPT_KEY)
    for _ in range(1000):
        engine.store("q.fifo", [fifo_message(f"g{k}") for k in range(10)], RETENTION, fifo=True)
    # when it is snapshotted, then the window goes out in several records of bounded size
    snapshot = list(engine.snapshot())
    resends = [r for r in snapshot if r[0] == RESENDS]
    assert len(resends) >= 3 and all(len(r[2]) <= 4096 for r in resends)
    # and it comes back whole
    restored = Engine.replay(clock, [codec.decode(codec.encode(r)) for r in snapshot], receipt_key=RECEIPT_KEY)
    assert restored.meta_state() == engine.meta_state()
    assert len(restored.queues["q.fifo"].recent) == 10_000


def test_removed_ids_survive_a_snapshot() -> None:
    # given a standard queue whose consumer deleted messages just after they were sent
    clock = ManualClock()
    engine = Engine(clock, RECEIPT_KEY)
    engine.send("q", [[f"id-{i}", "b", {}, "md5", None, 0, {}] for i in range(3)], RETENTION)
    (rows, _) = poll(engine, "q")
    engine.delete("q", [row["receipt"] for row in rows])
    # when it is snapshotted and restored (a compacted log, or a new replica's copy)
    restored = Engine.replay(clock, [codec.decode(codec.encode(r)) for r in engine.snapshot()], receipt_key=RECEIPT_KEY)
    # then a resend of them still stores nothing
    assert restored.meta_state() == engine.meta_state()
    restored.send("q", [["id-1", "b", {}, "md5", None, 0, {}]], RETENTION, resend=True)
    assert restored.stats("q", RETENTION) == (0, 0, 0)


def test_the_partition_state_alone_rebuilds_what_compaction_writes() -> None:
    # given a driven engine's records
    clock, records = ManualClock(), []
    engine = Engine(clock, RECEIPT_KEY, on_record=records.append)
    drive(engine, clock, random.Random(41), 1500)
    # when they are applied to a bare partition state, as compaction's fold and followers do (no clock, no key)
    state = PartitionState.replay(codec.decode(codec.encode(r)) for r in records)
    # then it holds the engine's state and snapshots to the same records
    assert state.state() == engine.state()
    assert state.meta_state() == engine.meta_state()
    assert list(state.snapshot()) == list(engine.snapshot())


def test_a_follower_drops_the_entries_of_messages_received_elsewhere_as_it_applies_them() -> None:
    # given a leader that sent 3,000 messages, then received and deleted the first 1,500, and a follower applying
    # each of its records as they come
    clock, records = ManualClock(), []
    leader = Engine(clock, RECEIPT_KEY, on_record=records.append)
    follower = Engine(clock, RECEIPT_KEY)
    for start in range(0, 3000, 10):
        leader.send("q", [plain_message(f"m{i}") for i in range(start, start + 10)], RETENTION)
    for _ in range(150):
        got, _ = poll(leader, "q", 10)
        assert leader.delete("q", [m["receipt"] for m in got]) == [None] * 10
    for record in records:
        follower.apply(codec.decode(codec.encode(record)))
    # then the follower's index of visible messages and its send order hold only the 1,500 still there, not the
    # 1,500 received and deleted before them, which a follower made leader would otherwise walk in its first receive
    assert len(follower.queues["q"].fresh) == len(follower.queues["q"].order) == 1500
    assert len(leader.queues["q"].fresh) == len(leader.queues["q"].order) == 1500
    # and it answers as the leader would: the next message in send order
    assert [m["body"] for m in poll(follower, "q", 10)[0]] == [f"m{i}" for i in range(1500, 1510)]


def test_a_follower_drops_the_entries_of_the_oldest_messages_expired_by_retention() -> None:
    clock, records = ManualClock(), []
    leader = Engine(clock, RECEIPT_KEY, on_record=records.append)
    leader.send("q", [plain_message(f"old{i}") for i in range(10)], 60)
    clock.advance(30)
    leader.send("q", [plain_message("new")], 60)
    clock.advance(40)
    # when the leader finds the ten oldest past the queue's retention, and the follower applies what it wrote
    assert [m["body"] for m in poll(leader, "q", 10, retention=60)[0]] == ["new"]
    follower = Engine(clock, RECEIPT_KEY)
    for record in records:
        follower.apply(codec.decode(codec.encode(record)))
    # then none of the expired messages' entries is left in front of the follower's indexes
    assert len(follower.queues["q"].fresh) == 0
    assert list(follower.queues["q"].order) == list(leader.queues["q"].order) == [11]


def test_a_fifo_follower_drops_the_send_order_of_messages_deleted_elsewhere() -> None:
    clock, records = ManualClock(), []
    leader = Engine(clock, RECEIPT_KEY, on_record=records.append)
    for k in range(30):
        leader.store("q.fifo", [fifo_message(f"g{k}", f"m{k}", dedup_id=f"d{k}")], RETENTION, fifo=True)
    for _ in range(2):
        got, _ = poll(leader, "q.fifo", 10)
        assert leader.delete("q.fifo", [m["receipt"] for m in got]) == [None] * 10
    follower = Engine(clock, RECEIPT_KEY)
    for record in records:
        follower.apply(codec.decode(codec.encode(record)))
    assert len(follower.queues["q.fifo"].order) == 10


def test_a_snapshot_indexes_messages_never_received_nor_delayed_as_visible_not_as_timers() -> None:
    # given a queue of 1,000 plain messages, one delayed message and one received (in flight), and its snapshot
    clock = ManualClock()
    engine = Engine(clock, RECEIPT_KEY)
    for start in range(0, 1000, 10):
        engine.send("q", [plain_message(f"m{i}") for i in range(start, start + 10)], RETENTION)
    delayed = plain_message("later")
    delayed[5] = 60
    engine.send("q", [delayed], RETENTION)
    assert [m["body"] for m in poll(engine, "q", 1)[0]] == ["m0"]
    snapshot = [codec.decode(codec.encode(r)) for r in engine.snapshot()]
    # when a follower builds its state from the snapshot (a compacted base, a copied one)
    follower = Engine.replay(clock, snapshot, receipt_key=RECEIPT_KEY)
    # then only the delayed and the received message wait on timers: the first request on it as leader releases
    # two entries, not a thousand
    q = follower.queues["q"]
    assert len(q.timers) == 2
    assert len(q.fresh) == 999
    assert follower.stats("q", RETENTION) == engine.stats("q", RETENTION) == (999, 1, 1)
    # and it answers as the engine it was taken from, now and once the delay and the visibility timeout ran out
    for engine_ in (engine, follower):
        assert [m["body"] for m in poll(engine_, "q", 10)[0]] == [f"m{i}" for i in range(1, 11)]
    clock.advance(61)
    assert follower.stats("q", RETENTION) == engine.stats("q", RETENTION) == (1001, 0, 0)
    assert [m["body"] for m in poll(follower, "q", 10)[0]] == [m["body"] for m in poll(engine, "q", 10)[0]]
