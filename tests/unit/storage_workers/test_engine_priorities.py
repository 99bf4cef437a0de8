"""Priority levels in the queue engine (``docs/design/priorities.md``): which level a receive serves, the
weighted shares, delays, visibility, redrive, and replay and snapshots keeping the scheduler's credits."""

from __future__ import annotations

import random
import uuid
from collections import Counter

import pytest

from ferrymq.clock import ManualClock
from ferrymq.priorities import SYSTEM_KEY, weight
from ferrymq.storage.engine import Engine, Redrive
from ferrymq.storage.engine.records import CREDITS
from ferrymq.storage.log import records as codec
from ferrymq.storage.server.handlers import check_send
from tests.support.engine_requests import RECEIPT_KEY, RETENTION, as_dicts
from tests.support.priority_workload import drive_priorities, leveled_message, same_picks

Q = "q"


message = leveled_message


def new_engine() -> tuple[Engine, ManualClock, list[tuple]]:
    clock, records = ManualClock(), []
    return Engine(clock, RECEIPT_KEY, on_record=records.append), clock, records


def fill(engine: Engine, counts: dict[int, int]) -> None:
    """``counts[level]`` messages of each level, bodies ``L<level>-<i>``, all levels sent one after another."""
    for level, n in counts.items():
        for start in range(0, n, 10):
            engine.send(Q, [message(f"L{level}-{i}", level) for i in range(start, min(n, start + 10))], RETENTION)


def receive(engine: Engine, n: int = 10, levels: int = 4, visibility: int = 30, **kwargs: object) -> list[dict]:
    return as_dicts(engine.poll(Q, n, visibility, RETENTION, priority_levels=levels, **kwargs).rows)  # type: ignore[arg-type]


def level_of(row: dict) -> int:
    return int(row["body"][1:].split("-")[0])


def test_the_higher_level_goes_first_and_gets_twice_the_share_of_the_lower() -> None:
    # given a queue with 300 messages of level 0 sent before 300 of level 1
    engine, _, _ = new_engine()
    fill(engine, {0: 300, 1: 300})
    # when 30 messages are received, ten at a time
    got = [row for _ in range(3) for row in receive(engine, levels=2)]
    # then the first is of the higher level, and the higher level has exactly two in three
    assert level_of(got[0]) == 1
    assert Counter(level_of(r) for r in got) == {1: 20, 0: 10}
    # and each level comes oldest first
    assert [r["body"] for r in got if level_of(r) == 0] == [f"L0-{i}" for i in range(10)]
    assert [r["body"] for r in got if level_of(r) == 1] == [f"L1-{i}" for i in range(20)]


def test_saturated_levels_share_deliveries_in_proportion_to_their_weights() -> None:
    # given four levels with more messages than will be received
    engine, _, _ = new_engine()
    fill(engine, {level: 200 for level in range(4)})
    # when one full round of the weights (1 + 2 + 4 + 8 = 15) is received twenty times over
    got = Counter(level_of(r) for _ in range(30) for r in receive(engine, levels=4))
    # then each level had exactly its weight's share
    assert got == {level: 20 * weight(level) for level in range(4)}


def test_the_lowest_level_is_not_starved_by_a_saturated_top_level() -> None:
    # given ten levels, the top one far fuller than the lowest
    engine, _, _ = new_engine()
    fill(engine, {0: 50, 9: 6000})
    # when 5130 messages are received while both still have visible messages
    got = Counter(level_of(r) for _ in range(513) for r in receive(engine, levels=10))
    # then the lowest level got its share, 1 in 513 (weights 1 and 512)
    assert got == {9: 5120, 0: 10}


def test_messages_without_a_level_are_level_0_and_a_queue_without_levels_serves_in_send_order() -> None:
    # given messages of a level sent after some without one
    engine, _, records = new_engine()
    engine.send(Q, [[str(uuid.uuid4()), f"plain-{i}", {}, "md5", None, 0, {}] for i in range(3)], RETENTION)
    fill(engine, {2: 3})
    # when a receive names one level (priorities off), then it is oldest first, whatever the levels
    assert [r["body"] for r in receive(engine, levels=1)] == ["plain-0", "plain-1", "plain-2", "L2-0", "L2-1", "L2-2"]
    # and off, there is no scheduler state to record
    assert not [r for r in records if r[0] == CREDITS]


def test_a_queue_that_never_used_levels_takes_the_plain_path_and_records_no_credits() -> None:
    engine, _, records = new_engine()
    engine.send(Q, [[str(uuid.uuid4()), f"m{i}", {}, "md5", None, 0, {"SenderId": "x"}] for i in range(5)], RETENTION)
    assert engine.queues[Q].tiers is None
    assert [r["body"] for r in receive(engine, levels=4)] == [f"m{i}" for i in range(5)]
    assert engine.queues[Q].tiers is None
    assert not [r for r in records if r[0] == CREDITS]


def test_levels_above_the_queues_top_are_served_as_its_top() -> None:
    # given messages of levels 1 and 3 (sent while the queue had four levels), and level 0 ones
    engine, _, _ = new_engine()
    engine.send(Q, [message("L3-0", 3), message("L1-0", 1), message("L3-1", 3), message("L1-1", 1)], RETENTION)
    fill(engine, {0: 10})
    # when the queue now has two levels, then levels 1 and 3 are one level, oldest first, with its share
    got = [r["body"] for r in receive(engine, n=6, levels=2)]
    assert got == ["L3-0", "L0-0", "L1-0", "L3-1", "L0-1", "L1-1"]


def test_a_delayed_message_enters_its_level_when_its_delay_ends() -> None:
    # given low messages and a high one delayed by 10 s
    engine, clock, _ = new_engine()
    fill(engine, {0: 5})
    engine.send(Q, [message("L3-late", 3, delay=10)], RETENTION)
    # when received before the delay ends, then only low ones come
    assert [level_of(r) for r in receive(engine, n=1)] == [0]
    # and once it ends, the high one is served first
    clock.advance(10)
    assert [r["body"] for r in receive(engine, n=1)] == ["L3-late"]


def test_a_message_whose_visibility_ran_out_goes_back_to_its_level() -> None:
    # given a high message received with a 5 s visibility timeout and never deleted, and low messages
    engine, clock, _ = new_engine()
    engine.send(Q, [message("L2-0", 2)], RETENTION)
    fill(engine, {0: 5})
    assert [r["body"] for r in receive(engine, n=1, visibility=5)] == ["L2-0"]
    assert [level_of(r) for r in receive(engine, n=1)] == [0]
    # when its visibility runs out, then it is served ahead of the low messages again
    clock.advance(5)
    again = receive(engine, n=1)
    assert [r["body"] for r in again] == ["L2-0"] and again[0]["receive_count"] == 2


def test_redrive_keeps_receive_counts_and_the_level_in_the_dead_letter_queue_and_back() -> None:
    # given a source queue whose high message has been received as often as its redrive policy allows
    engine, clock, _ = new_engine()
    redrive = Redrive(2, "dlq", False, "arn:aws:sqs:us-east-1:000000000000:q", True)
    engine.send(Q, [message("L2-poison", 2)], RETENTION)
    fill(engine, {0: 3})
    for _ in range(2):
        assert [r["body"] for r in receive(engine, n=1, visibility=1, redrive=redrive)] == ["L2-poison"]
        clock.advance(1)
    # when the next receive moves it to the dead-letter queue
    assert sorted(r["body"] for r in receive(engine, redrive=redrive)) == ["L0-0", "L0-1", "L0-2"]
    # then there it keeps its level (served first among the DLQ's messages), attribute and receive count
    engine.send("dlq", [message("dlq-low", 0)], RETENTION)
    moved = as_dicts(engine.poll("dlq", 1, 0, RETENTION, priority_levels=4).rows)[0]
    assert moved["body"] == "L2-poison" and moved["receive_count"] == 3
    assert moved["system"][SYSTEM_KEY] == 2 and moved["attrs"]["FerryMQPriority"]["StringValue"] == "2"
    # and a redrive back to the source keeps them too
    engine.start_move_task("dlq", {"task_handle": "t1", "source_arn": "arn:dlq", "destination": None,
                                   "max_per_second": None, "started_ts": 1})
    batch = engine.move_candidates("dlq", "t1", 10)
    engine.move_locally("dlq", "t1", [c.seq for c in batch if c.body == "L2-poison"], Q, False)
    back = receive(engine, n=1)
    assert back[0]["body"] == "L2-poison" and back[0]["system"][SYSTEM_KEY] == 2


def test_purging_or_emptying_a_queue_forgets_its_levels_and_credits() -> None:
    engine, _, _ = new_engine()
    fill(engine, {0: 3, 1: 3})
    got = receive(engine, n=2, levels=2)
    q = engine.queues[Q]
    assert q.tiers is not None and q.credits is not None
    engine.delete(Q, [r["receipt"] for r in got] + [r["receipt"] for r in receive(engine, levels=2)])
    assert not q.msgs and q.tiers is None and q.credits is None
    fill(engine, {0: 3, 1: 3})
    receive(engine, n=2, levels=2)
    engine.purge(Q)
    assert q.tiers is None and q.credits is None


def test_many_dead_entries_in_a_level_rebuild_the_indexes_without_losing_an_order() -> None:
    # given 1500 high messages received, returned by their visibility timeout, and then deleted while visible
    engine, clock, _ = new_engine()
    fill(engine, {3: 1500, 0: 20})
    handles = [r["receipt"] for _ in range(150) for r in receive(engine, visibility=1, levels=4)]
    clock.advance(1)
    assert receive(engine, n=1, levels=1)  # notices the returns
    engine.delete(Q, handles)
    # when the rest is received, then the indexes were rebuilt and nothing is lost or repeated
    q = engine.queues[Q]
    assert sum(len(t) for t in q.tiers or [] if t is not None) + len(q.fresh) + len(q.returned) < 200
    rest = [r["body"] for _ in range(5) for r in receive(engine, levels=4)]
    assert len(rest) == len(set(rest)) == len(q.msgs) - 1  # the one noticing the returns holds one


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_replaying_the_records_rebuilds_the_same_levels_and_credits(seed: int) -> None:
    # given an engine driven through sends of every level and receives of varying level counts
    engine, clock, records = new_engine()
    drive_priorities(engine, clock, random.Random(seed), 3000)
    assert any(r[0] == CREDITS for r in records)
    # when its records, through the log codec, are replayed (as a follower or recovery does)
    replayed = Engine.replay(clock, [codec.decode(codec.encode(r)) for r in records], receipt_key=RECEIPT_KEY)
    # then messages and credits are the same, and the next receives pick the same messages
    assert replayed.state() == engine.state()
    assert replayed.partition.credits_state() == engine.partition.credits_state()
    same_picks(replayed, engine)


@pytest.mark.parametrize("seed", [4, 5])
def test_a_snapshot_keeps_the_levels_and_credits(seed: int) -> None:
    # given a driven engine with credits in use, and its snapshot (what compaction writes)
    engine, clock, _ = new_engine()
    drive_priorities(engine, clock, random.Random(seed), 3000)
    fill(engine, {0: 5, 1: 5, 3: 5})
    receive(engine, n=3)
    assert engine.partition.credits_state()
    snapshot = [codec.decode(codec.encode(r)) for r in engine.snapshot()]
    # when the snapshot is replayed, then it is the same state and it picks the same
    restored = Engine.replay(clock, snapshot, receipt_key=RECEIPT_KEY)
    assert restored.state() == engine.state()
    assert restored.partition.credits_state() == engine.partition.credits_state()
    same_picks(restored, engine)


def test_the_worker_refuses_a_level_that_is_not_one() -> None:
    good = message("ok", 3)
    assert check_send("q", [good], RETENTION, False)
    for bad in ("3", 10, -1, 2.0, True):
        broken = message("bad")
        broken[6][SYSTEM_KEY] = bad
        with pytest.raises(ValueError, match="priority"):
            check_send("q", [broken], RETENTION, False)
