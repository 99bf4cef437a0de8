"""Compaction's fold leaving out the messages sent and removed within what it folds
(``ferrymq.storage.engine.fold``): over random histories, the state it makes snapshots record for record as a full
replay's does, and serves alike."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ferrymq.clock import ManualClock
from ferrymq.limits import RESEND_HORIZON_MS
from ferrymq.storage.engine import Engine, PartitionState
from ferrymq.storage.engine.fold import LeftOutMismatch, Removals, folded
from ferrymq.storage.engine.records import CREDITS, DELETED, PURGED, RESTORED, SENT, Record
from tests.fuzz.profiles import fuzz_settings
from tests.support.engine_requests import RECEIPT_KEY
from tests.unit.storage_workers.test_engine_properties import Run, _same_answers, histories

Q = "000000000000/q/1"


def _removals(records: list[Record]) -> Removals:
    removals = Removals()
    for record in records:
        removals.note(record)
    return removals


@given(histories, st.integers(0, 100))
@fuzz_settings(ci_examples=150)
def test_a_fold_leaving_out_removed_messages_is_the_state_a_full_replay_gives(history: list[tuple], cut: int) -> None:
    # given a random history's records, split where a compaction before left a base: its snapshot, then the rest
    run = Run()
    for op in history:
        run.step(op)
    at = cut * len(run.records) // 100
    base = list(PartitionState.replay(run.records[:at]).snapshot())
    records = base + run.records[at:]
    # when they are folded with what the records after the base remove left out (the first pass reads no base)
    state = folded(records, _removals(run.records[at:]))
    full = PartitionState.replay(records)
    # then it snapshots as the full replay, record for record
    assert list(state.snapshot()) == list(full.snapshot())
    # and engines on the state it makes, and on its snapshot replayed (a start from the new base), answer alike
    now = run.clock.now()
    _same_answers([
        Engine(ManualClock(now), RECEIPT_KEY, partition=full),
        Engine(ManualClock(now), RECEIPT_KEY, partition=state),
        Engine(ManualClock(now), RECEIPT_KEY, partition=PartitionState.replay(list(state.snapshot()))),
    ])


def _sent(seq: int, ts: int, *ids: str) -> Record:
    return (SENT, Q, ts, seq, [(message_id, "body", {}, "md5", None, 0, {}) for message_id in ids])


def test_a_message_sent_and_deleted_within_the_fold_takes_no_row_and_leaves_its_id_for_resends() -> None:
    # given a queue where "a", "b" and "c" are sent, "a" and "b" deleted soon after, and "d" sent long after
    records = [_sent(1, 1_000, "a", "b", "c"), (DELETED, Q, [1, 2]), _sent(4, 1_000 + 2 * RESEND_HORIZON_MS, "d")]
    # when folded with what the records remove
    state = folded(records, _removals(records))
    full = PartitionState.replay(records)
    # then "a" and "b" never took a row (a full replay used three), and the state is the full replay's
    assert len(state.table.extra) == 2 and len(full.table.extra) == 3
    assert [row[1] for row in state.state()[Q]] == ["c", "d"]
    assert list(state.snapshot()) == list(full.snapshot())
    # and their ids were kept as removed soon after they were sent, as a full replay keeps them
    early = folded(records[:2], _removals(records[:2]))
    assert list(early.queues[Q].gone.items()) == [("a", 1_000), ("b", 1_000)]
    assert early.queues[Q].gone == PartitionState.replay(records[:2]).queues[Q].gone


def test_a_queue_with_priority_credits_is_replayed_in_full() -> None:
    # given a base holding message x and the queue's credits, then "a" sent, x deleted, "y" sent and "a" deleted
    x = (1, "x", "body", {}, "md5", None, {}, 500, 500, 0, 0)
    base: list[Record] = [(RESTORED, Q, [x]), (CREDITS, Q, [1, 2])]
    after = [_sent(2, 1_000, "a"), (DELETED, Q, [1]), _sent(3, 1_001, "y"), (DELETED, Q, [2])]
    # when folded, the credits coming from the base, which the first pass does not read
    state = folded(base + after, _removals(after))
    # then "a" took its row, so deleting x did not empty the queue and reset its credits, as in a full replay
    full = PartitionState.replay(base + after)
    assert full.queues[Q].credits == [1, 2]
    assert state.queues[Q].credits == [1, 2]
    assert list(state.snapshot()) == list(full.snapshot())


def test_a_message_left_out_of_a_queue_purged_before_its_delete_leaves_no_removed_id() -> None:
    # given a message sent, its queue purged, and then a delete naming it (which finds nothing, as in a full replay)
    records = [_sent(1, 1_000, "a", "b"), (PURGED, Q), (DELETED, Q, [1])]
    # when folded
    state = folded(records, _removals(records))
    # then no removed id is kept for it: the purge dropped it, as a full replay has it
    assert not state.queues[Q].gone
    assert list(state.snapshot()) == list(PartitionState.replay(records).snapshot())


def test_removals_before_the_first_send_are_not_noted_and_the_bits_hold_what_was_added() -> None:
    # given removals of messages sent before the folded records (a base's), then a send, then removals
    removals = _removals([(DELETED, Q, [3, 7]), _sent(10, 1_000, "a", "b"), (DELETED, Q, [11, 2, 10_000])])
    bits = removals.seqs
    # then only those from the first send on are noted, however far apart, and nothing else reads as noted
    assert bits is not None and bits.first == 10
    assert [seq for seq in range(0, 10_010) if seq in bits] == [11, 10_000]
    assert bits.count() == 2 and 12 not in bits and -5 not in bits and 10**9 not in bits


def test_a_message_left_out_whose_removal_comes_in_another_queue_fails_the_fold() -> None:
    # given a message sent to Q and a delete of its number under another queue (no log the engine writes)
    records = [_sent(1, 1_000, "a"), (SENT, "other", 1_000, 2, [("b", "body", {}, "md5", None, 0, {})]),
               (DELETED, "other", [1, 2])]
    # then the fold says its state is not the full replay's, rather than losing "a"
    with pytest.raises(LeftOutMismatch, match="1 messages left out"):
        folded(records, _removals(records))
    assert [row[1] for row in PartitionState.replay(records).state()[Q]] == ["a"]
