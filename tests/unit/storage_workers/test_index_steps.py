"""Index clean-ups a step at a time (``index_steps``): a heap pruned in place and a ring copied while both stay in
use, and a queue whose indexes fill with dead entries keeping them bounded without ever rebuilding one whole."""

from __future__ import annotations

import pickle
import random
from heapq import heappop, heappush

from ferrymq.clock import ManualClock
from ferrymq.storage.engine import Engine
from ferrymq.storage.engine.index_steps import STEP, WHOLE_HEAP, RingCopy, prune_heap
from ferrymq.storage.engine.messages import REINDEX_SLACK
from ferrymq.storage.engine.rings import Ring
from tests.support.engine_requests import RETENTION, plain_message, poll

Q = "000000000000/q/1"


def test_a_heap_pruned_in_steps_between_pushes_and_pops_loses_only_dead_entries_and_pops_in_order() -> None:
    rng = random.Random(7)
    heap: list[int] = []
    dead: set[int] = set()
    popped: list[int] = []
    # given a heap of which most entries are dead
    for value in rng.sample(range(10**9), 3 * WHOLE_HEAP):
        heappush(heap, value)
        if rng.random() < 0.8:
            dead.add(value)
    pushed = set(heap)
    dead_before = len(dead)

    def one_pass(busy: bool) -> int:
        at, steps = len(heap), 0
        while True:
            at = prune_heap(heap, lambda v: v not in dead, at)
            steps += 1
            if busy:
                for _ in range(50):
                    value = rng.randrange(10**9)
                    pushed.add(value)
                    heappush(heap, value)
                popped.append(heappop(heap))
            if not at:
                return steps

    # when it is pruned a step at a time while pushed to and popped from, then once more while quiet
    steps = one_pass(busy=True)
    dead_after_busy_pass = sum(v in dead for v in heap)
    one_pass(busy=False)
    # then the busy pass took steps of STEP places (the last one whole, once the heap was small), and most dead
    # entries (those moved past the walk wait for the next pass), the quiet one the rest
    assert 1 < steps <= 3 * WHOLE_HEAP // STEP
    assert dead_after_busy_pass < 0.2 * dead_before
    assert not any(v in dead for v in heap)
    # and no live entry was lost, and the heap still pops smallest first
    rest = [heappop(heap) for _ in range(len(heap))]
    assert rest == sorted(rest)
    assert set(rest) | set(popped) == {v for v in pushed if v not in dead} | {v for v in popped if v in dead}


def test_a_heap_of_a_few_steps_is_pruned_whole_in_one_call() -> None:
    heap = list(range(0, 2 * STEP))
    assert prune_heap(heap, lambda v: v % 2 == 0, len(heap)) == 0
    assert heap == list(range(0, 2 * STEP, 2))


def test_a_ring_copied_in_steps_while_taken_from_and_appended_to_ends_with_every_live_entry_in_order() -> None:
    ring = Ring(range(3 * STEP))
    dead = {v for v in range(3 * STEP) if v % 3}
    copy = RingCopy(ring)
    result = None
    appended = 3 * STEP
    while True:
        result = copy.step(lambda v: v not in dead)
        if result is not None:
            break  # put in the ring's place at once
        ring.popleft()
        ring.append(appended)
        appended += 1
    # the copy holds every live entry the ring holds, in order (and some it gave since, which are dropped as dead)
    live_now = [v for v in ring if v not in dead]
    copied = list(result)
    assert copied == sorted(copied)
    assert copied[-len(live_now):] == live_now


def test_a_rings_place_count_survives_its_front_being_cut_and_a_pickle_and_an_old_pickle_loads() -> None:
    ring = Ring(range(5000))
    for _ in range(3000):
        ring.popleft()  # cut off in one move past 1024
    assert ring.taken == 3000
    assert list(ring.chunk(3500, 3)[0]) == [3500, 3501, 3502] and ring.chunk(3500, 3)[1] == 3503
    assert list(ring.chunk(10, 2)[0]) == [3000, 3001]
    again = pickle.loads(pickle.dumps(ring))
    assert again.taken == 3000 and list(again) == list(ring)
    old = Ring.__new__(Ring)
    old.__setstate__((ring._a, ring._head))  # as a ring was pickled before the count was kept
    assert old.taken == 0 and list(old) == list(ring)


def test_the_send_order_behind_a_message_held_for_days_stays_bounded_and_is_never_rebuilt_whole(
    engine: Engine, clock: ManualClock
) -> None:
    # given one message at the front of a queue held in flight for hours (received, never deleted)
    engine.send(Q, [plain_message("held")], RETENTION)
    [held] = poll(engine, Q, 1, 43200)[0]
    q = engine.partition.queues[Q]
    copies = []
    real_step = RingCopy.step

    def counting(self: RingCopy, live: object) -> object:
        copies.append(self)
        return real_step(self, live)  # type: ignore[arg-type]

    RingCopy.step = counting  # type: ignore[method-assign]
    try:
        # when many more messages are sent, received and deleted behind it
        for _ in range(3 * (2 * REINDEX_SLACK + 4 * STEP) // 10):
            engine.send(Q, [plain_message() for _ in range(10)], RETENTION)
            engine.delete(Q, [m["receipt"] for m in poll(engine, Q, 10, 30)[0]])
            # then the send order never holds much more than its live messages and one step
            assert len(q.order) <= 2 * len(q.msgs) + REINDEX_SLACK + 2 * STEP
    finally:
        RingCopy.step = real_step  # type: ignore[method-assign]
    # and it was copied a step at a time, the held message first in it still
    assert copies
    assert next(iter(q.order)) == q.msgs[next(iter(q.order))].seq
    assert [m.id for m in q.msgs.values()] == [held["id"]]


def test_messages_deleted_after_their_visibility_ran_out_leave_the_visible_index_bounded(
    engine: Engine, clock: ManualClock
) -> None:
    # given consumers slower than the visibility timeout: each message comes back, then is deleted with its handle
    engine.send(Q, [plain_message(f"backlog{i}") for i in range(10)], RETENTION)
    q = engine.partition.queues[Q]
    for _ in range(3 * STEP // 10):
        engine.send(Q, [plain_message() for _ in range(10)], RETENTION)
        got = poll(engine, Q, 10, 1)[0]
        clock.advance(2)
        q.release_due(engine.now_ms())
        engine.delete(Q, [m["receipt"] for m in got])
        # then the visible indexes never hold much more than the queue's live messages and a step
        assert len(q.fresh) + len(q.returned) <= 2 * len(q.msgs) + REINDEX_SLACK + STEP
    # and every message still there is received, each once
    left = {m.id for m in q.msgs.values()}
    got_all: list[str] = []
    while batch := poll(engine, Q, 10, 600)[0]:
        got_all.extend(m["id"] for m in batch)
    assert sorted(got_all) == sorted(left)


def test_a_queue_pickled_before_clean_ups_were_kept_gets_none_under_way_once_loaded(engine: Engine) -> None:
    engine.send(Q, [plain_message("kept")], RETENTION)
    q = engine.partition.queues[Q]
    del q.tidying  # as a queue was pickled before the slot existed
    loaded = pickle.loads(pickle.dumps(engine.partition))
    queue = loaded.queues[Q]
    assert not hasattr(queue, "tidying")
    queue.after_load()
    assert queue.tidying == {}
    queue.tidy()
    assert [m.body for m in queue.msgs.values()] == ["kept"]
