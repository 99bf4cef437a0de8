"""FIFO queues in the engine: group order and locking, idempotent resends, receive attempts, expired handles,
and the in-flight limit, driven with a manual clock."""

from __future__ import annotations

import pytest

from ferrymq.clock import ManualClock
from ferrymq.errors import InvalidParameterValue, OverLimit
from ferrymq.limits import RESEND_WINDOW_MS
from ferrymq.storage.engine import Engine
from ferrymq.storage.engine.answers import OVER_LIMIT_MESSAGE
from ferrymq.storage.engine.records import RECEIVED, RENEWED, STORED
from tests.support.engine_requests import RECEIPT_KEY, RETENTION, bodies, fifo_message, poll

Q = "000000000000/orders.fifo/1"


def send(engine: Engine, *messages: tuple) -> list[tuple[str, int, int, bool]]:
    return engine.store(Q, list(messages), RETENTION, fifo=True)


def expired_handle(handle: str) -> tuple[str, str]:
    return (
        InvalidParameterValue.code,
        f"Value {handle} for parameter ReceiptHandle is invalid. Reason: The receipt handle has expired.",
    )


def test_sends_get_increasing_sequence_numbers_and_receives_carry_group_fields(engine: Engine) -> None:
    # given two messages sent to a FIFO queue
    first, second = send(engine, fifo_message("g", "a", dedup_id="d-a"), fifo_message("g", "b", dedup_id="d-b"))
    # then each result has its own increasing sequence number and is not a duplicate
    assert first[1] == second[1] == 1_700_000_000_000
    assert first[2] < second[2] and not first[3] and not second[3]
    # when they are received, then they carry the 20-digit sequence number, the group and the dedup id
    got, _ = poll(engine, Q)
    assert [(m["body"], m["group"], m["dedup_id"]) for m in got] == [("a", "g", "d-a"), ("b", "g", "d-b")]
    assert [m["seq"] for m in got] == [f"{first[2]:020d}", f"{second[2]:020d}"]
    assert all(len(m["seq"]) == 20 for m in got)


def test_one_receive_takes_the_oldest_groups_first_and_several_messages_of_each_in_order(engine: Engine) -> None:
    # given messages of three groups, interleaved
    send(
        engine,
        fifo_message("b", "b1"),
        fifo_message("a", "a1"),
        fifo_message("b", "b2"),
        fifo_message("c", "c1"),
        fifo_message("a", "a2"),
    )
    # when up to four are received
    got = bodies(engine, Q, n=4)
    # then the group with the oldest message comes first, with as many of its messages as are visible, in order
    assert got == ["b1", "b2", "a1", "a2"]
    assert bodies(engine, Q) == ["c1"]


def test_a_group_with_a_message_in_flight_delivers_nothing_more_until_it_is_deleted(
    engine: Engine, clock: ManualClock
) -> None:
    # given two groups, the first one's first message received, and one more message sent to it since
    send(engine, fifo_message("a", "a1"), fifo_message("a", "a2"), fifo_message("b", "b1"))
    (a1,), _ = poll(engine, Q, n=1)
    send(engine, fifo_message("a", "a3"))
    # when receiving again, then only the other group's message comes: group a is locked
    assert bodies(engine, Q) == ["b1"]
    assert bodies(engine, Q) == []
    # when a1 is deleted, then a2 and a3 are next, in order
    assert engine.delete(Q, [a1["receipt"]]) == [None]
    assert bodies(engine, Q) == ["a2", "a3"]


def test_a_message_whose_visibility_runs_out_is_delivered_again_before_later_ones(
    engine: Engine, clock: ManualClock
) -> None:
    # given a group whose first message was received for 10 s
    send(engine, fifo_message("g", "m1"), fifo_message("g", "m2"))
    assert bodies(engine, Q, n=1, visibility=10) == ["m1"]
    # when 10 s pass without a delete, then m1 comes again, received twice, before m2
    clock.advance(10)
    got, _ = poll(engine, Q, n=1)
    assert [(m["body"], m["receive_count"]) for m in got] == [("m1", 2)]


def test_a_first_message_made_visible_again_is_redelivered_while_later_ones_are_in_flight(
    engine: Engine, clock: ManualClock
) -> None:
    # given two messages of a group received together, the first then made visible again (AWS: g1-m1 comes
    # back on its own while g1-m2 is still in flight)
    send(engine, fifo_message("g", "m1"), fifo_message("g", "m2"), fifo_message("g", "m3"))
    m1, _, m3 = poll(engine, Q, visibility=60)[0]
    assert engine.change_visibility(Q, [(m1["receipt"], 0)]) == [None]
    assert engine.next_change(Q) == pytest.approx(clock.now())
    # when receiving, then m1 alone comes again: m2 is still in flight, so nothing after it does
    got, _ = poll(engine, Q)
    assert [(m["body"], m["receive_count"]) for m in got] == [("m1", 2)]
    assert bodies(engine, Q) == []
    # when a later message comes back while the first is in flight, then it waits for the first
    assert engine.change_visibility(Q, [(m3["receipt"], 0)]) == [None]
    assert bodies(engine, Q) == []


def test_a_first_message_whose_timeout_runs_out_is_redelivered_while_later_ones_are_in_flight(
    engine: Engine, clock: ManualClock
) -> None:
    # given m1 and m2 received together, m2's timeout then extended past m1's
    send(engine, fifo_message("g", "m1"), fifo_message("g", "m2"))
    _, m2 = poll(engine, Q, visibility=10)[0]
    assert engine.change_visibility(Q, [(m2["receipt"], 100)]) == [None]
    # when m1's timeout runs out, then m1 is delivered again, and m2 is not
    clock.advance(10)
    assert bodies(engine, Q) == ["m1"]


def test_groups_never_received_come_before_groups_with_a_redelivery(engine: Engine, clock: ManualClock) -> None:
    # given (as recorded against AWS) g1-m1, g1-m2 received, g2-m1 sent but not received, and g1-m1 reset
    send(engine, fifo_message("group-1", "g1-m1"), fifo_message("group-1", "g1-m2"))
    send(engine, fifo_message("group-2", "g2-m1"))
    clock.advance(1)
    g1m1, _ = poll(engine, Q, n=2)[0]
    clock.advance(1)
    engine.change_visibility(Q, [(g1m1["receipt"], 0)])
    # when receiving up to three, then the group never received comes first, then the redelivery
    assert bodies(engine, Q, n=3) == ["g2-m1", "g1-m1"]


def test_groups_received_with_no_visibility_come_back_behind_groups_never_received(engine: Engine) -> None:
    # given g1-m1, g2-m1, g2-m2, g3-m1, g1-m2 (AWS's recorded case), three received with visibility 0
    send(
        engine,
        fifo_message("group-1", "g1-m1"),
        fifo_message("group-2", "g2-m1"),
        fifo_message("group-2", "g2-m2"),
        fifo_message("group-3", "g3-m1"),
        fifo_message("group-1", "g1-m2"),
    )
    assert bodies(engine, Q, n=3, visibility=0) == ["g1-m1", "g1-m2", "g2-m1"]
    # when everything is received, then group 3 comes first, then the returned groups in the order they left
    assert bodies(engine, Q, n=10, visibility=0) == ["g3-m1", "g1-m1", "g1-m2", "g2-m1", "g2-m2"]


def test_groups_whose_timeouts_ran_out_come_back_in_the_order_they_ran_out(
    engine: Engine, clock: ManualClock
) -> None:
    # given four messages of group 1, one each of groups 2 and 3; two of group 1 received, then group 2's
    send(engine, *(fifo_message("group-1", f"g1-m{i}") for i in range(1, 5)))
    send(engine, fifo_message("group-2", "g2-m1"), fifo_message("group-3", "g3-m1"))
    assert bodies(engine, Q, n=2, visibility=1) == ["g1-m1", "g1-m2"]
    assert bodies(engine, Q, n=1, visibility=1) == ["g2-m1"]
    # when both timeouts have run out, then group 3 (never received) comes first, then group 1 whole, then 2
    clock.advance(2)
    assert bodies(engine, Q, n=10, visibility=0) == ["g3-m1", "g1-m1", "g1-m2", "g1-m3", "g1-m4", "g2-m1"]


def test_group_service_order_survives_replay(engine: Engine, clock: ManualClock, records: list) -> None:
    # given a group with a redelivery and one never received
    send(engine, fifo_message("a", "a1"), fifo_message("a", "a2"))
    send(engine, fifo_message("b", "b1"))
    clock.advance(1)
    a1, _ = poll(engine, Q, n=2)[0]
    clock.advance(1)
    engine.change_visibility(Q, [(a1["receipt"], 0)])
    # when a follower replays the records, then it serves the groups in the same order
    follower = Engine.replay(clock, list(records), receipt_key=RECEIPT_KEY)
    assert bodies(follower, Q, n=3) == bodies(engine, Q, n=3) == ["b1", "a1"]


def test_a_delayed_first_message_holds_up_its_group(engine: Engine, clock: ManualClock) -> None:
    # given a group whose first message is delayed (queue delay) and a later one that is not
    send(engine, fifo_message("g", "late", delay=5), fifo_message("g", "now"))
    # then nothing of the group is delivered before the first is visible, and then both come in order
    assert bodies(engine, Q) == []
    assert engine.next_change(Q) == pytest.approx(clock.now() + 5)
    clock.advance(5)
    assert bodies(engine, Q) == ["late", "now"]


def test_a_resend_with_a_known_id_stores_nothing_and_answers_with_the_original(
    engine: Engine, clock: ManualClock, records: list
) -> None:
    # given a message sent, received and deleted
    original = fifo_message("g", "once", message_id="id-1")
    [(_, sent_ts, seq, duplicate)] = send(engine, original)
    assert not duplicate
    (got,), _ = poll(engine, Q)
    engine.delete(Q, [got["receipt"]])
    stored_before = sum(1 for r in records if r[0] == STORED)
    # when the same id is sent again within the resend window
    clock.advance(RESEND_WINDOW_MS / 1000 - 1)
    again = send(engine, fifo_message("g", "once again", message_id="id-1"))
    # then it is a duplicate with the original's result, and nothing is stored
    assert again == [("id-1", sent_ts, seq, True)]
    assert sum(1 for r in records if r[0] == STORED) == stored_before
    assert bodies(engine, Q) == []
    # and once the window is over the id is new again
    clock.advance(1)
    [(_, _, new_seq, duplicate)] = send(engine, fifo_message("g", "later", message_id="id-1"))
    assert not duplicate and new_seq > seq
    assert bodies(engine, Q) == ["later"]


def test_a_resend_of_a_stored_message_and_a_repeated_id_in_one_batch_are_duplicates(engine: Engine) -> None:
    # given a message stored and not yet received
    [(_, _, seq, _)] = send(engine, fifo_message("g", "one", message_id="id-1"))
    # when it is resent in a batch that also names another id twice
    results = send(
        engine,
        fifo_message("g", "one", message_id="id-1"),
        fifo_message("g", "two", message_id="id-2"),
        fifo_message("g", "two", message_id="id-2"),
    )
    # then only the first occurrence of the new id is stored
    assert [(r[0], r[3]) for r in results] == [("id-1", True), ("id-2", False), ("id-2", True)]
    assert results[0][2] == seq and results[1][2] == results[2][2]
    assert bodies(engine, Q) == ["one", "two"]


def test_a_repeated_attempt_id_returns_the_same_messages_and_handles(
    engine: Engine, clock: ManualClock, records: list
) -> None:
    # given a receive made with an attempt id
    send(engine, fifo_message("a", "a1"), fifo_message("b", "b1"))
    first, _ = poll(engine, Q, visibility=30, attempt_id="attempt-1")
    # when the same attempt id comes again 20 s later
    clock.advance(20)
    again, _ = poll(engine, Q, visibility=30, attempt_id="attempt-1")
    # then the same messages come back with the same handles, not received once more
    assert again == first
    assert [m["receive_count"] for m in again] == [1, 1]
    assert records[-1][0] == RENEWED
    # and their visibility timeout starts again from the retry
    clock.advance(29)
    assert bodies(engine, Q) == []
    clock.advance(1)
    assert bodies(engine, Q) == ["a1", "b1"]


def test_an_attempt_id_after_a_delete_or_visibility_change_is_a_new_receive(engine: Engine) -> None:
    # given two attempts, one whose message is deleted and one whose message's visibility changes
    send(engine, fifo_message("a", "a1"), fifo_message("a", "a2"), fifo_message("b", "b1"))
    (a1, _), _ = poll(engine, Q, n=2, attempt_id="deleted")
    (b1,), _ = poll(engine, Q, n=1, attempt_id="changed")
    engine.delete(Q, [a1["receipt"]])
    engine.change_visibility(Q, [(b1["receipt"], 0)])
    # when the attempts are retried, then each is a new receive: only what is deliverable now comes
    retried, _ = poll(engine, Q, attempt_id="changed")
    assert [(m["body"], m["receive_count"]) for m in retried] == [("b1", 2)]
    assert bodies(engine, Q, attempt_id="deleted") == []


def test_an_attempt_id_older_than_five_minutes_is_a_new_receive(engine: Engine, clock: ManualClock) -> None:
    send(engine, fifo_message("g", "m"))
    first, _ = poll(engine, Q, visibility=600, attempt_id="attempt")
    clock.advance(300)
    # the message is still in flight from the first receive, so a new receive finds nothing
    assert poll(engine, Q, attempt_id="attempt")[0] == []
    assert first[0]["receive_count"] == 1


def test_an_attempt_whose_messages_were_received_again_is_not_replayed(engine: Engine, clock: ManualClock) -> None:
    # given an attempt whose message timed out and was received again by another consumer
    send(engine, fifo_message("g", "m"))
    first, _ = poll(engine, Q, visibility=5, attempt_id="attempt")
    clock.advance(5)
    second, _ = poll(engine, Q, visibility=5)
    # when the attempt is retried, then it does not hand out the other consumer's message
    assert poll(engine, Q, attempt_id="attempt")[0] == []
    assert second[0]["receive_count"] == 2 and second[0]["receipt"] != first[0]["receipt"]


def test_deleting_with_an_expired_handle_fails_on_a_fifo_queue(engine: Engine, clock: ManualClock) -> None:
    # given a message received for 10 s, whose timeout then ran out
    send(engine, fifo_message("g", "m"))
    (got,), _ = poll(engine, Q, visibility=10)
    clock.advance(10)
    # when it is deleted with that handle, then the handle has expired and the message stays
    assert engine.delete(Q, [got["receipt"]]) == [expired_handle(got["receipt"])]
    # and once received again, the old handle stays expired while the new one deletes it
    (again,), _ = poll(engine, Q, visibility=10)
    assert engine.delete(Q, [got["receipt"]]) == [expired_handle(got["receipt"])]
    assert engine.change_visibility(Q, [(got["receipt"], 5)]) == [expired_handle(got["receipt"])]
    assert engine.delete(Q, [again["receipt"]]) == [None]
    assert engine.stats(Q, RETENTION) == (0, 0, 0)


def test_changing_visibility_with_the_latest_handle_after_the_timeout_ran_out_is_accepted(
    engine: Engine, clock: ManualClock
) -> None:
    # given a message received for 1 s whose timeout ran out, not received since
    send(engine, fifo_message("g", "m"))
    (got,), _ = poll(engine, Q, visibility=1)
    clock.advance(1)
    # when its visibility is changed with that handle (a heartbeat running late), then it is accepted
    assert engine.change_visibility(Q, [(got["receipt"], 5)]) == [None]
    # and the message is in flight again until the new deadline
    assert engine.stats(Q, RETENTION) == (0, 1, 0)
    assert bodies(engine, Q) == []
    clock.advance(5)
    assert bodies(engine, Q) == ["m"]


def test_a_short_poll_at_the_in_flight_limit_is_over_limit_and_a_long_poll_gets_nothing(
    engine: Engine, clock: ManualClock
) -> None:
    # given three messages of different groups, two of them in flight, under a limit of two
    send(engine, fifo_message("a", "a"), fifo_message("b", "b"), fifo_message("c", "c"))
    assert bodies(engine, Q, n=2, max_in_flight=3) == ["a", "b"]
    # when a short poll comes, then it is OverLimit
    with pytest.raises(OverLimit) as raised:
        poll(engine, Q, max_in_flight=2)
    assert raised.value.message == OVER_LIMIT_MESSAGE
    # and a long poll gets nothing, and is not told that something is visible now
    assert bodies(engine, Q, max_in_flight=2, short_poll=False) == []
    assert engine.next_change(Q, 2) == pytest.approx(clock.now() + 30)
    # when the in-flight messages time out, then receiving works again, the group never received first (AWS)
    clock.advance(30)
    assert bodies(engine, Q, n=1, max_in_flight=2) == ["c"]


def test_a_receive_near_the_in_flight_limit_takes_only_what_fits(engine: Engine) -> None:
    send(engine, *(fifo_message(f"g{i}", str(i)) for i in range(5)))
    assert bodies(engine, Q, n=10, max_in_flight=3) == ["0", "1", "2"]


def test_receives_are_recorded_with_their_attempt_id(engine: Engine, records: list) -> None:
    send(engine, fifo_message("g", "m"))
    poll(engine, Q, attempt_id="attempt")
    assert records[-1][0] == RECEIVED and records[-1][5] == "attempt"


def test_purge_forgets_groups_and_attempts(engine: Engine) -> None:
    send(engine, fifo_message("g", "old"))
    poll(engine, Q, attempt_id="attempt")
    engine.purge(Q)
    send(engine, fifo_message("g", "new"))
    assert bodies(engine, Q, attempt_id="attempt") == ["new"]


def test_purge_forgets_deduplication_so_the_same_message_id_is_stored_again(
    engine: Engine, clock: ManualClock, records: list
) -> None:
    # given a message stored and then purged
    (first,) = send(engine, fifo_message("g", "before", dedup_id="d", message_id="m-1"))
    clock.advance(1)
    engine.purge(Q)
    # when the same deduplication id comes again (a front end's claim from before the purge names "m-1")
    (again,) = send(engine, fifo_message("g", "after", dedup_id="d", message_id="m-1"))
    # then it is stored anew and delivered, as AWS delivers it after a purge
    assert not again[3] and again[2] > first[2]
    assert bodies(engine, Q, visibility=0) == ["after"]
    # and from then on that id deduplicates again
    (third,) = send(engine, fifo_message("g", "third", dedup_id="d", message_id="m-1"))
    assert third[3] and third[2] == again[2]
    # and a follower replaying the records agrees
    follower = Engine.replay(clock, list(records), receipt_key=RECEIPT_KEY)
    assert follower.meta_state() == engine.meta_state()
    assert bodies(follower, Q) == ["after"]


def test_a_busy_fifo_queue_keeps_its_indexes_small(engine: Engine, clock: ManualClock) -> None:
    # given many messages passing through a few groups
    for i in range(2000):
        send(engine, *(fifo_message(f"g{i % 7}", f"m{i}-{k}") for k in range(5)))
        got, _ = poll(engine, Q, visibility=600)
        engine.delete(Q, [m["receipt"] for m in got])
        clock.advance(0.01)
    # then the lazily cleaned indexes stay bounded by the live messages and groups, not by the traffic
    q = engine.queues[Q]
    assert len(q.msgs) == 0
    assert len(q.timers) <= 1024 + 10 and len(q.order) <= 1024 + 10
    assert len(q.ready) <= 1024 + 2 * 7  # type: ignore[attr-defined]
    assert not q.fresh and not q.returned
