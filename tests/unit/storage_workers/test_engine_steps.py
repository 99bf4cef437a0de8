"""Work on a queue of many messages done a step at a time (``messages.STEP``): timers released, messages expired,
removed ids forgotten and the rows of a purged or dropped queue freed, so that no call holds a worker's loop for
long, and the answers are those of doing it all at once."""

from __future__ import annotations

import pickle
from collections import deque
from heapq import heapify

from ferrymq.clock import ManualClock
from ferrymq.limits import DROPPED_QUEUE_MEMORY_SECONDS, RESEND_HORIZON_MS
from ferrymq.storage.engine import Engine
from ferrymq.storage.engine.index_steps import WHOLE_HEAP
from ferrymq.storage.engine.messages import READY, STEP
from ferrymq.storage.engine.records import DELETED, EXPIRED
from ferrymq.storage.engine.state import PartitionState
from tests.support.engine_requests import RECEIPT_KEY, RETENTION, fifo_message, plain_message, poll

Q = "000000000000/big/1"
MANY = 2 * STEP + 100


def fill(engine: Engine, n: int = MANY, queue: str = Q, retention: int = RETENTION) -> None:
    for start in range(0, n, 10):
        engine.send(queue, [plain_message(f"m{start + i}") for i in range(min(10, n - start))], retention)


def receive_all(engine: Engine, queue: str = Q, visibility: int = 30, retention: int = RETENTION) -> list[dict]:
    got: list[dict] = []
    while batch := poll(engine, queue, 10, visibility, retention=retention)[0]:
        got.extend(batch)
    return got


def test_timers_that_ran_out_together_are_released_a_step_a_call_and_every_message_comes_back(
    engine: Engine, clock: ManualClock
) -> None:
    # given more messages than a step in flight, their visibility timeouts running out at the same moment
    fill(engine)
    assert len(receive_all(engine)) == MANY
    clock.advance(31)
    q = engine.partition.queues[Q]
    # when the queue's timers are released once
    q.release_due(engine.now_ms())
    # then one step of them is visible, the rest still waits on its timer
    assert q.counts[READY] == STEP
    # and receiving goes on releasing until every message came back, each once
    again = receive_all(engine)
    assert sorted(m["id"] for m in again) == sorted({m["id"] for m in again})
    assert len(again) == MANY


def test_messages_past_retention_expire_a_step_a_record_and_a_sweep_asks_to_be_called_again(
    engine: Engine, clock: ManualClock, records: list
) -> None:
    # given more messages than a step, all past their retention (60 s) and a queue nobody asks for since
    fill(engine, retention=60)
    clock.advance(61)
    # when the partition is swept until it says it is done
    sweeps = [engine.sweep()]
    while sweeps[-1].more:
        sweeps.append(engine.sweep())
    # then each sweep expired one step (one record each), and all of them expired in the end
    expiries = [r for r in records if r[0] == EXPIRED]
    assert [len(r[2]) for r in expiries] == [STEP, STEP, 100]
    assert [s.more for s in sweeps] == [True, True, False]
    assert engine.stats(Q, 60) == (0, 0, 0)


def test_a_receive_behind_more_expired_messages_than_a_step_finds_the_visible_ones_on_later_polls(
    engine: Engine, clock: ManualClock, records: list
) -> None:
    # given expired messages four steps long, then one message sent since
    fill(engine, 4 * STEP, retention=60)
    clock.advance(61)
    engine.send(Q, [plain_message("fresh")], 60)
    # when a consumer polls until it gets something
    polls, got = 0, []
    while not got:
        got = poll(engine, Q, 10, 30, retention=60)[0]
        polls += 1
    # then it got the fresh message after the expired ones went a step a record (none named twice)
    assert [m["body"] for m in got] == ["fresh"]
    expired = [seq for r in records if r[0] == EXPIRED for seq in r[2]]
    assert len(expired) == len(set(expired)) == 4 * STEP
    assert all(len(r[2]) <= STEP for r in records if r[0] == EXPIRED)
    assert polls > 1


def stepping(clock: ManualClock, records: list | None = None) -> Engine:
    """An engine freeing the rows of purged and dropped queues in steps, as a serving worker's does."""
    engine = Engine(clock, RECEIPT_KEY, on_record=None if records is None else records.append)
    engine.partition.free_in_steps = True
    return engine


def test_a_purge_of_a_queue_larger_than_a_step_empties_it_at_once_and_frees_its_rows_in_steps(
    clock: ManualClock, records: list
) -> None:
    engine = stepping(clock, records)
    # given a queue of more than a step, some in flight, and another queue
    fill(engine)
    in_flight = poll(engine, Q, 10, 30)[0]
    engine.send("other", [plain_message("kept")], RETENTION)
    table = engine.partition.table
    # when it is purged
    engine.purge(Q)
    # then it holds nothing at once, though its rows are not freed yet
    assert engine.stats(Q, RETENTION) == (0, 0, 0)
    assert poll(engine, Q, 10, 30)[0] == []
    assert table.live == MANY + 1
    # and a receipt handle from before the purge finds no message (it succeeds, as for one deleted, removing none)
    engine.delete(Q, [in_flight[0]["receipt"]])
    assert not [r for r in records if r[0] == DELETED]
    assert table.live == MANY + 1
    # and a message sent now is the only one a receive finds
    engine.send(Q, [plain_message("after")], RETENTION)
    # when the rows are freed a step at a time
    steps = 1
    while engine.partition.free_unowned():
        steps += 1
    # then it took as many steps as the rows needed, and only the new message and the other queue's are left
    assert steps == 3
    assert table.live == 2
    assert [m["body"] for m in receive_all(engine)] == ["after"]
    assert [m["body"] for m in receive_all(engine, "other")] == ["kept"]


def test_a_queue_dropped_and_made_again_under_its_id_never_sees_the_rows_still_to_free(clock: ManualClock) -> None:
    engine = stepping(clock)
    # given a FIFO queue of more than a step, dropped, and its drop forgotten since
    for start in range(0, MANY, 10):
        batch = [fifo_message(f"g{(start + i) % 7}", f"f{start + i}") for i in range(10)]
        engine.store(Q, batch, RETENTION, fifo=True)
    rows = engine.partition.table.live
    engine.drop_queue(Q)
    clock.advance(DROPPED_QUEUE_MEMORY_SECONDS + 1)
    engine.sweep()
    assert engine.partition.table.live == rows
    # when a queue of the same id is made again (its drop forgotten) and sent to, before the rows are freed
    engine.store(Q, [fifo_message("g0", "new")], RETENTION, fifo=True)
    # then it holds only its own message, before the rows are freed and after
    assert [m["body"] for m in receive_all(engine)] == ["new"]
    while engine.partition.free_unowned():
        pass
    assert engine.partition.table.live == 1


def test_a_small_queue_is_purged_at_once_even_when_rows_are_freed_in_steps(clock: ManualClock) -> None:
    engine = stepping(clock)
    fill(engine, 50)
    engine.purge(Q)
    assert not engine.partition.unowned and engine.partition.table.live == 0


def test_removed_ids_are_forgotten_a_step_per_removal_and_a_sweep_finishes_them(
    engine: Engine, clock: ManualClock
) -> None:
    # given more messages than a step sent and deleted within the resend horizon
    fill(engine)
    for m_batch in _batches(receive_all(engine)):
        engine.delete(Q, [m["receipt"] for m in m_batch])
    q = engine.partition.queues[Q]
    assert len(q.gone) == MANY
    # when a send comes after the horizon, and one message is removed
    clock.advance(RESEND_HORIZON_MS / 1000 + 1)
    engine.send(Q, [plain_message("late")], RETENTION)
    engine.delete(Q, [poll(engine, Q, 1, 30)[0][0]["receipt"]])
    # then that removal forgot one step of the old ids
    assert len(q.gone) == MANY - STEP + 1
    # and sweeps once the horizon passed twice forget the rest (a step and 101), saying when they are done
    clock.advance(2 * RESEND_HORIZON_MS / 1000 + 1)
    assert [engine.sweep().more, engine.sweep().more] == [True, False]
    assert not q.gone


def test_a_state_with_rows_still_to_free_pickles_with_them_and_one_from_before_the_backlog_loads(
    clock: ManualClock,
) -> None:
    engine = stepping(clock)
    fill(engine)
    engine.purge(Q)
    again = pickle.loads(pickle.dumps(engine.partition))
    # the backlog comes along; whether to free in steps is the loading worker's choice, not the file's
    assert len(again.unowned) == 1 and again.table.live == MANY
    assert not again.free_in_steps
    while again.free_unowned():
        pass
    assert again.table.live == 0
    # and a state pickled before the backlog existed loads with none
    old = engine.partition.__getstate__()
    del old["unowned"]
    loaded = PartitionState.__new__(PartitionState)
    loaded.__setstate__(old)
    assert loaded.unowned == deque()


def _batches(items: list[dict]) -> list[list[dict]]:
    return [items[i : i + 10] for i in range(0, len(items), 10)]


def test_a_fifo_queue_of_more_groups_than_a_step_is_served_a_step_of_groups_a_receive_each_group_in_order(
    engine: Engine,
) -> None:
    # given more one- and two-message groups than a step, all sent before anyone receives
    groups = STEP + 300
    for start in range(0, groups, 10):
        batch = [fifo_message(f"g{g}", f"{g}-first") for g in range(start, min(start + 10, groups))]
        engine.store(Q, batch, RETENTION, fifo=True)
    engine.store(Q, [fifo_message("g0", "0-second")], RETENTION, fifo=True)
    q = engine.partition.queues[Q]
    # when a consumer receives, deleting what it gets
    got: list[str] = []
    dirty_after_first = None
    for _ in range(2 * groups):
        rows = poll(engine, Q, 10, 30)[0]
        if dirty_after_first is None:
            dirty_after_first = len(q.dirty)
        if not rows:
            if not q.has_visible():
                break
            continue
        got.extend(m["body"] for m in rows)
        engine.delete(Q, [m["receipt"] for m in rows])
    # then the first receive looked at a step of the groups only, and in the end every message came once, each
    # group's in order
    assert dirty_after_first == groups - STEP
    assert sorted(got) == sorted([f"{g}-first" for g in range(groups)] + ["0-second"])
    assert got.index("0-first") < got.index("0-second")


def test_a_fifo_queues_ready_heap_full_of_stale_entries_is_pruned_a_step_at_a_time(engine: Engine) -> None:
    # given a FIFO queue of a few groups whose ready heap holds many entries of groups long gone
    engine.store(Q, [fifo_message(f"g{g}", f"m{g}") for g in range(3)], RETENTION, fifo=True)
    q = engine.partition.queues[Q]
    q.refresh()
    q.ready.extend((0, False, 10**9 + i, f"gone-{i}") for i in range(3 * WHOLE_HEAP))
    heapify(q.ready)
    # when the queue is tidied, once per record
    tidies = 0
    while len(q.ready) > 3:
        q.tidy()
        tidies += 1
        assert tidies < 100
    # then it took steps, and the live groups are still served
    assert tidies > 1
    assert sorted(m["body"] for m in poll(engine, Q, 10, 30)[0]) == ["m0", "m1", "m2"]
