"""The queue engine's SQS semantics, driven with a manual clock: no disk, no socket, no sleeping."""

from __future__ import annotations

import contextlib
import random
import uuid

import pytest

from ferrymq.clock import ManualClock
from ferrymq.errors import InvalidParameterValue, QueueDoesNotExist, ReceiptHandleIsInvalid
from ferrymq.limits import RESEND_HORIZON_MS
from ferrymq.storage.engine import Engine
from ferrymq.storage.engine.messages import REINDEX_SLACK
from ferrymq.storage.engine.records import EXPIRED, PURGED, RECEIVED, SENT
from ferrymq.storage.engine.removed_ids import RemovedIds
from ferrymq.storage.log import records as codec
from tests.support.engine_requests import RECEIPT_KEY, RETENTION, poll

Q = "000000000000/orders/1"


def message(body: str = "hello", *, delay: int = 0, attrs: dict | None = None, system: dict | None = None) -> list:
    return [str(uuid.uuid4()), body, attrs or {}, f"md5-{body}", None, delay, system or {}]


def receive(
    engine: Engine, n: int = 10, visibility: int = 30, queue: str = Q, retention: int = RETENTION
) -> list[dict]:
    got, _ = poll(engine, queue, n, visibility, retention=retention)
    return got


def stats(engine: Engine, queue: str = Q, retention: int = RETENTION) -> tuple[int, int, int]:
    return engine.stats(queue, retention)


def test_received_messages_come_in_send_order_with_their_fields(engine: Engine, clock: ManualClock) -> None:
    # given three messages sent, one with attributes and system attributes
    attrs = {
        "colour": {"DataType": "String", "StringValue": "red"},
        "raw": {"DataType": "Binary", "BinaryValue": b"\0"},
    }
    sent = [message("a"), message("b", attrs=attrs, system={"SenderId": "AIDAEXAMPLE"}), message("c")]
    sent_ts = engine.send(Q, sent, RETENTION)
    clock.advance(2)
    # when they are received
    got = receive(engine)
    # then they come in send order, as sent, received once, just now
    assert [m["id"] for m in got] == [m[0] for m in sent]
    assert got[1]["body"] == "b" and got[1]["attrs"] == attrs and got[1]["system"] == {"SenderId": "AIDAEXAMPLE"}
    assert got[1]["md5_body"] == "md5-b" and got[1]["md5_attrs"] is None
    assert sent_ts == 1_700_000_000_000
    assert all(m["sent_ts"] == sent_ts for m in got)
    assert all(m["receive_count"] == 1 and m["first_receive_ts"] == sent_ts + 2000 for m in got)
    assert len({m["receipt"] for m in got}) == 3


def test_max_messages_is_honoured(engine: Engine) -> None:
    engine.send(Q, [message(str(i)) for i in range(5)], RETENTION)
    assert [m["body"] for m in receive(engine, n=2)] == ["0", "1"]
    assert [m["body"] for m in receive(engine, n=10)] == ["2", "3", "4"]
    assert receive(engine) == []


def test_receiving_an_unknown_queue_gives_nothing(engine: Engine) -> None:
    assert receive(engine, queue="nobody") == []
    assert stats(engine, queue="nobody") == (0, 0, 0)


def test_received_message_is_invisible_until_its_timeout(engine: Engine, clock: ManualClock) -> None:
    # given a message received with a 30 s visibility timeout
    engine.send(Q, [message()], RETENTION)
    first = receive(engine, visibility=30)[0]
    # when 29.9 s pass, then it is still in flight
    clock.advance(29.9)
    assert receive(engine) == []
    assert stats(engine) == (0, 1, 0)
    # when the timeout runs out, then it is received again, with a new receipt and its first-receive time kept
    clock.advance(0.1)
    again = receive(engine)[0]
    assert again["id"] == first["id"]
    assert again["receive_count"] == 2
    assert again["first_receive_ts"] == first["first_receive_ts"]
    assert again["receipt"] != first["receipt"]


def test_visibility_timeout_zero_leaves_the_message_visible(engine: Engine) -> None:
    engine.send(Q, [message()], RETENTION)
    assert receive(engine, visibility=0)[0]["receive_count"] == 1
    assert receive(engine, visibility=0)[0]["receive_count"] == 2


def test_messages_visible_again_come_before_later_ones(engine: Engine, clock: ManualClock) -> None:
    # given a received message whose timeout ran out, and a message sent after it
    engine.send(Q, [message("first")], RETENTION)
    receive(engine, visibility=5)
    engine.send(Q, [message("second")], RETENTION)
    clock.advance(5)
    # then the older one comes first (send order, best effort)
    assert [m["body"] for m in receive(engine)] == ["first", "second"]


def test_delayed_message_becomes_visible_after_its_delay(engine: Engine, clock: ManualClock) -> None:
    # given a message delayed 10 s and one not delayed
    engine.send(Q, [message("late", delay=10), message("now")], RETENTION)
    # then only the undelayed one is visible; the other counts as delayed
    assert stats(engine) == (1, 0, 1)
    assert [m["body"] for m in receive(engine)] == ["now"]
    clock.advance(9.999)
    assert receive(engine) == []
    # when the delay is over, then it is received
    clock.advance(0.001)
    assert [m["body"] for m in receive(engine)] == ["late"]
    assert engine.next_change(Q) == pytest.approx(clock.now() + 30)


def test_expired_messages_are_never_returned_and_are_dropped(engine: Engine, clock: ManualClock, records: list) -> None:
    # given a message sent, and a second one sent 50 s later, under a 60 s retention
    engine.send(Q, [message("old")], 60)
    clock.advance(50)
    engine.send(Q, [message("young")], 60)
    # when the first one's retention runs out
    clock.advance(10)
    # then it is neither counted nor returned, and it was dropped with a record
    assert stats(engine, retention=60) == (1, 0, 0)
    assert [m["body"] for m in receive(engine, retention=60)] == ["young"]
    assert any(r[0] == EXPIRED for r in records)
    assert len(engine.queues[Q].msgs) == 1


def test_expiry_follows_the_retention_given_with_each_request(engine: Engine, clock: ManualClock) -> None:
    # given messages received and visible again, out of send order in the visible index
    engine.send(Q, [message("a"), message("b")], RETENTION)
    receive(engine, n=1, visibility=1)
    clock.advance(100)
    # when retention has become shorter than their age, then receive skips them
    assert receive(engine, retention=60) == []
    assert stats(engine, retention=60) == (0, 0, 0)


def test_delete_removes_the_message(engine: Engine, clock: ManualClock) -> None:
    engine.send(Q, [message("a"), message("b")], RETENTION)
    a, _ = receive(engine, visibility=1)
    assert engine.delete(Q, [a["receipt"]]) == [None]
    clock.advance(1)
    assert [m["body"] for m in receive(engine)] == ["b"]
    assert stats(engine) == (0, 1, 0)


def test_garbled_or_foreign_receipts_are_invalid(engine: Engine) -> None:
    engine.send(Q, [message()], RETENTION)
    engine.send("other-queue", [message()], RETENTION)
    mine = receive(engine)[0]["receipt"]
    foreign = receive(engine, queue="other-queue")[0]["receipt"]
    flipped = mine[:10] + ("A" if mine[10] != "A" else "B") + mine[11:]
    results = engine.delete(Q, [foreign, flipped, "not-a-handle", mine])
    for handle, result in zip([foreign, flipped, "not-a-handle"], results, strict=False):
        assert result == (
            ReceiptHandleIsInvalid.code,
            f'The input receipt handle "{handle}" is not a valid receipt handle.',
        )
    assert results[3] is None
    # the foreign queue's message is untouched
    assert stats(engine, queue="other-queue") == (0, 1, 0)


def test_change_visibility_sets_a_new_deadline_from_now(engine: Engine, clock: ManualClock) -> None:
    engine.send(Q, [message()], RETENTION)
    got = receive(engine, visibility=30)[0]
    clock.advance(20)
    assert engine.change_visibility(Q, [(got["receipt"], 60)]) == [None]
    clock.advance(59)
    assert receive(engine) == []
    clock.advance(1)
    assert len(receive(engine)) == 1


def test_change_visibility_to_zero_makes_the_message_visible_at_once(engine: Engine) -> None:
    engine.send(Q, [message()], RETENTION)
    got = receive(engine, visibility=300)[0]
    assert engine.change_visibility(Q, [(got["receipt"], 0)]) == [None]
    assert stats(engine) == (1, 0, 0)
    assert receive(engine)[0]["id"] == got["id"]


def test_change_visibility_reports_each_failure_by_its_cause(engine: Engine, clock: ManualClock) -> None:
    # given: one message visible again after its timeout (not received since), one deleted, one in flight
    engine.send(Q, [message("visible"), message("deleted"), message("flying")], RETENTION)
    visible, deleted = receive(engine, n=2, visibility=5)
    flying = receive(engine, n=1, visibility=100)[0]
    clock.advance(5)
    engine.delete(Q, [deleted["receipt"]])
    # when their visibility is changed with a garbled handle too
    results = engine.change_visibility(
        Q, [(visible["receipt"], 10), (deleted["receipt"], 10), ("garbled", 10), (flying["receipt"], 10)]
    )
    # then each entry gets its own answer: the latest handle of a message whose timeout ran out still works
    assert results[0] is None
    assert results[1] == (
        InvalidParameterValue.code,
        f"Value {deleted['receipt']} for parameter ReceiptHandle is invalid. Reason: Message does not exist or is "
        "not available for visibility timeout change.",
    )
    assert results[2] == (
        ReceiptHandleIsInvalid.code,
        'The input receipt handle "garbled" is not a valid receipt handle.',
    )
    assert results[3] is None
    assert stats(engine) == (0, 2, 0)


def test_an_earlier_handle_of_a_message_received_again_changes_its_visibility(
    engine: Engine, clock: ManualClock
) -> None:
    # given a message whose timeout ran out and which was received again
    engine.send(Q, [message()], RETENTION)
    first = receive(engine, visibility=1)[0]
    clock.advance(1)
    receive(engine, visibility=30)
    # when the first receive's handle ends its visibility, then AWS accepts it and the message is visible
    assert engine.change_visibility(Q, [(first["receipt"], 0)]) == [None]
    assert engine.stats(Q, RETENTION) == (1, 0, 0)


def test_purge_drops_every_message_of_the_queue_only(engine: Engine, records: list) -> None:
    engine.send(Q, [message(), message(delay=30)], RETENTION)
    receive(engine, n=1)
    engine.send("other", [message()], RETENTION)
    engine.purge(Q)
    assert records[-1] == (PURGED, Q)
    assert stats(engine) == (0, 0, 0)
    assert stats(engine, queue="other") == (1, 0, 0)
    # and the queue takes new messages afterwards
    engine.send(Q, [message("after")], RETENTION)
    assert [m["body"] for m in receive(engine)] == ["after"]


def test_drop_queue_forgets_it(engine: Engine) -> None:
    engine.send(Q, [message()], RETENTION)
    got = receive(engine)[0]
    engine.drop_queue(Q)
    assert Q not in engine.queues
    assert engine.live_bytes == 0
    assert engine.delete(Q, [got["receipt"]]) == [None]
    assert receive(engine) == []


def test_next_change_is_the_next_time_a_message_can_become_visible(engine: Engine, clock: ManualClock) -> None:
    # given a message received for 10 s and deleted, and one received for 60 s
    engine.send(Q, [message("gone"), message("flying")], RETENTION)
    gone = receive(engine, n=1, visibility=10)[0]
    receive(engine, n=1, visibility=60)
    engine.delete(Q, [gone["receipt"]])
    start = clock.now()
    # then the deleted message's old deadline does not count once it has passed
    clock.advance(11)
    assert engine.next_change(Q) == pytest.approx(start + 60)
    # and once the other's deadline passes, it is visible now
    clock.advance(50)
    assert engine.next_change(Q) == pytest.approx(clock.now())
    receive(engine)
    assert engine.next_change(Q) == pytest.approx(clock.now() + 30)
    # and a queue with no messages has no next change
    engine.purge(Q)
    assert engine.next_change(Q) is None
    assert engine.next_change("nobody") is None


def test_stats_count_visible_in_flight_and_delayed(engine: Engine, clock: ManualClock) -> None:
    engine.send(Q, [message(), message(), message(), message(delay=60)], RETENTION)
    receive(engine, n=2, visibility=10)
    assert stats(engine) == (1, 2, 1)
    clock.advance(10)
    assert stats(engine) == (3, 0, 1)
    clock.advance(50)
    assert stats(engine) == (4, 0, 0)


def test_requests_that_change_nothing_record_nothing(engine: Engine, records: list) -> None:
    engine.purge("nobody")
    engine.drop_queue("dropped")
    records.clear()
    engine.drop_queue("dropped")
    engine.delete(Q, ["garbled"])
    engine.change_visibility(Q, [("garbled", 5)])
    receive(engine)
    stats(engine)
    assert records == []


def test_each_change_is_recorded_with_its_timestamp(engine: Engine, clock: ManualClock, records: list) -> None:
    engine.send(Q, [message()], RETENTION)
    clock.advance(1)
    receive(engine, visibility=7)
    assert [r[0] for r in records] == [SENT, RECEIVED]
    assert records[0][2] == 1_700_000_000_000
    assert records[1][2:4] == (1_700_000_001_000, 1_700_000_008_000)


def test_busy_queue_keeps_its_indexes_small(engine: Engine, clock: ManualClock) -> None:
    # given a queue through which many messages pass: sent, received, deleted
    for _ in range(3000):
        engine.send(Q, [message() for _ in range(10)], RETENTION)
        got = receive(engine, visibility=600)
        engine.delete(Q, [m["receipt"] for m in got])
        clock.advance(0.01)
    # then the lazily cleaned indexes stay bounded by the live messages, not by the traffic
    q = engine.queues[Q]
    assert len(q.msgs) == 0
    assert len(q.timers) + len(q.fresh) + len(q.returned) <= 1024 + 10
    assert len(q.order) <= 1024 + 10


def _random_workload(engine: Engine, clock: ManualClock, rng: random.Random, steps: int) -> None:
    queues = ["q-a", "q-b", "q-c"]
    handles: dict[str, list[str]] = {q: [] for q in queues}
    for _ in range(steps):
        q = rng.choice(queues)
        op = rng.random()
        if op < 0.35:
            # A queue dropped a moment ago refuses sends, as the worker answers a late front end.
            with contextlib.suppress(QueueDoesNotExist):
                engine.send(
                    q,
                    [message(f"m{rng.random()}", delay=rng.choice([0, 0, 0, 2, 5])) for _ in range(rng.randint(1, 4))],
                    120,
                )
        elif op < 0.65:
            got = engine.poll(q, rng.randint(1, 10), rng.choice([0, 1, 3, 30]), 120).rows
            handles[q].extend(row[1] for row in got)
        elif op < 0.8 and handles[q]:
            engine.delete(q, rng.sample(handles[q], min(len(handles[q]), rng.randint(1, 3))))
        elif op < 0.9 and handles[q]:
            engine.change_visibility(q, [(h, rng.choice([0, 1, 10])) for h in rng.sample(handles[q], 1)])
        elif op < 0.92:
            engine.purge(q)
        elif op < 0.93:
            engine.drop_queue(q)
        else:
            engine.stats(q, rng.choice([120, 30]))
        clock.advance(rng.choice([0, 0.001, 0.5, 1, 3]))


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_replaying_the_records_rebuilds_the_same_state(
    seed: int, clock: ManualClock, records: list, engine: Engine
) -> None:
    # given an engine driven through a random workload
    _random_workload(engine, clock, random.Random(seed), 2000)
    # when its records, through the log codec, are replayed into a fresh engine
    replayed = Engine.replay(clock, [codec.decode(codec.encode(r)) for r in records], receipt_key=RECEIPT_KEY)
    # then the state is the same, and so is what both hand out next
    assert replayed.state() == engine.state()
    assert replayed.next_seq == engine.next_seq
    for q in ["q-a", "q-b", "q-c"]:
        assert replayed.stats(q, 120) == engine.stats(q, 120)
        assert replayed.poll(q, 10, 30, 120) == engine.poll(q, 10, 30, 120)


def test_a_snapshot_rebuilds_the_same_state(clock: ManualClock, records: list, engine: Engine) -> None:
    # given a driven engine and its snapshot
    _random_workload(engine, clock, random.Random(7), 1500)
    snapshot = [codec.decode(codec.encode(r)) for r in engine.snapshot()]
    # when the snapshot is replayed, then it is the same state
    restored = Engine.replay(clock, snapshot, receipt_key=RECEIPT_KEY)
    assert restored.state() == engine.state()
    assert restored.live_bytes == engine.live_bytes
    for q in list(engine.queues):
        assert restored.stats(q, 120) == engine.stats(q, 120)
        assert restored.poll(q, 10, 30, 120) == engine.poll(q, 10, 30, 120)
    # and new messages get sequence numbers never used before
    assert restored.next_seq == engine.next_seq


def test_a_resend_after_an_unknown_outcome_stores_only_what_the_first_attempt_did_not(
    engine: Engine, clock: ManualClock
) -> None:
    # given a send of two messages whose outcome the front end never learned (it was stored), and later ones
    first = [message("a"), message("b")]
    engine.send(Q, first, RETENTION)
    clock.advance(1)
    engine.send(Q, [message("c")], RETENTION)
    # when it is resent with the same ids, plus one message it lacked
    fresh = message("d")
    engine.send(Q, [*first, fresh], RETENTION, resend=True)
    # then only the new one is stored: no copy of what the first attempt stored
    assert sorted(m["body"] for m in receive(engine)) == ["a", "b", "c", "d"]


def test_a_resend_does_not_bring_back_what_the_first_attempt_stored_and_a_consumer_deleted(
    engine: Engine, clock: ManualClock
) -> None:
    # given a send whose outcome its front end never learned, stored, then received and deleted by a consumer
    # before the front end resent it to the partition's next leader
    first = [message("a"), message("b")]
    engine.send(Q, first, RETENTION)
    clock.advance(2)
    got = receive(engine)
    assert engine.delete(Q, [m["receipt"] for m in got]) == [None, None]
    # when the resend comes
    clock.advance(3)
    engine.send(Q, first, RETENTION, resend=True)
    # then nothing is stored again: the deleted messages do not come back
    assert receive(engine) == []
    assert stats(engine) == (0, 0, 0)


def test_removed_ids_are_remembered_only_within_the_resend_horizon(engine: Engine, clock: ManualClock) -> None:
    # given a message deleted soon after it was sent, and one deleted long after
    late, soon = message("late"), message("soon")
    engine.send(Q, [late], RETENTION)
    clock.advance(RESEND_HORIZON_MS / 1000 + 1)
    engine.send(Q, [soon], RETENTION)
    engine.delete(Q, [m["receipt"] for m in receive(engine)])
    # then only the first is remembered, and only until the horizon has passed
    assert list(engine.queues[Q].gone) == [soon[0]]
    # (a sweep, timed by this worker's clock and not the records', waits a second horizon)
    clock.advance(RESEND_HORIZON_MS / 1000 + 1)
    engine.sweep()
    assert list(engine.queues[Q].gone) == [soon[0]]
    clock.advance(RESEND_HORIZON_MS / 1000)
    engine.sweep()
    assert Q not in engine.queues


def test_a_resend_looks_only_at_messages_sent_within_the_horizon(engine: Engine, clock: ManualClock) -> None:
    # given a message sent longer than the resend horizon before the queue's last send
    old = message("old")
    engine.send(Q, [old], RETENTION)
    clock.advance(RESEND_HORIZON_MS / 1000 + 1)
    engine.send(Q, [message("new")], RETENTION)
    # when a resend names its id, then it is not recognised as its first attempt (the walk stops at the horizon)
    engine.send(Q, [old], RETENTION, resend=True)
    assert sorted(m["body"] for m in receive(engine)) == ["new", "old", "old"]


def test_a_window_of_removed_ids_is_forgotten_whole_by_one_sweep_oldest_first(
    engine: Engine, clock: ManualClock
) -> None:
    # given thousands of messages deleted soon after they were sent, then no more sends
    sent = [message(f"m{i}") for i in range(3000)]
    for start in range(0, len(sent), 10):
        engine.send(Q, sent[start:start + 10], RETENTION)
    while got := receive(engine, n=10):
        engine.delete(Q, [m["receipt"] for m in got])
    gone = engine.queues[Q].gone
    # then each id is remembered once, in the order of removal, in a window that finds its oldest without walking
    # past what it forgot before (a plain dict would: forgetting a window at once was quadratic)
    assert type(gone) is RemovedIds
    assert sorted(gone) == sorted(m[0] for m in sent)
    # and a resend within the horizon stores nothing again
    engine.send(Q, sent[:10], RETENTION, resend=True)
    assert receive(engine) == []
    # when two horizons pass, one sweep forgets the whole window and the queue with it
    clock.advance(2 * RESEND_HORIZON_MS / 1000 + 1)
    engine.sweep()
    assert Q not in engine.queues


def test_deleted_in_flight_messages_leave_no_pile_of_timers_and_the_rest_still_come_back(
    engine: Engine, clock: ManualClock
) -> None:
    # given a large queue, of which thousands are received, most of them deleted and a few kept in flight
    for start in range(0, 6000, 10):
        engine.send(Q, [message(f"m{start + i}") for i in range(10)], RETENTION)
    kept: list[str] = []
    for _ in range(300):
        got = receive(engine, n=10, visibility=30)
        kept.append(got[0]["id"])
        engine.delete(Q, [m["receipt"] for m in got[1:]])
    q = engine.queues[Q]
    # then the timers of the deleted ones were dropped as they piled up, though the queue is far larger: what the
    # first receive after their visibility ran out would have popped at once
    assert len(q.timers) <= 2 * len(kept) + REINDEX_SLACK
    # and the messages kept in flight still come back once their visibility runs out
    clock.advance(31)
    back = []
    while got := receive(engine, n=10, visibility=300):
        back.extend(m["id"] for m in got)
    assert set(kept) <= set(back)
    assert len(back) == 6000 - 300 * 9
