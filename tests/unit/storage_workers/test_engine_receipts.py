"""Receipt handles at the engine: superseded handles, as SQS documents and answers them, and handles only
the partition's key can mint."""

from __future__ import annotations

import base64

from ferrymq.clock import ManualClock
from ferrymq.errors import InvalidParameterValue, ReceiptHandleIsInvalid
from ferrymq.storage.engine import Engine
from ferrymq.storage.engine.records import DELETED, VISIBILITY
from tests.support.engine_requests import RECEIPT_KEY, RETENTION, bodies, plain_message, poll, unkeyed_handle

Q = "000000000000/orders/1"
OTHER_KEY = bytes(range(100, 132))


def invalid(handle: str) -> tuple[str, str]:
    return (ReceiptHandleIsInvalid.code, f'The input receipt handle "{handle}" is not a valid receipt handle.')


def expired(handle: str) -> tuple[str, str]:
    return (
        InvalidParameterValue.code,
        f"Value {handle} for parameter ReceiptHandle is invalid. Reason: The receipt handle has expired.",
    )


def received_twice(engine: Engine, clock: ManualClock) -> tuple[dict, dict]:
    """A message received, timed out, and received again (for 30 s): its first and its latest receive."""
    engine.send(Q, [plain_message("m")], RETENTION)
    (first,), _ = poll(engine, Q, visibility=1)
    clock.advance(1)
    (latest,), _ = poll(engine, Q, visibility=30)
    assert (first["receive_count"], latest["receive_count"]) == (1, 2)
    return first, latest


def test_deleting_with_a_superseded_handle_succeeds_and_deletes_nothing(
    engine: Engine, clock: ManualClock, records: list
) -> None:
    # given a message received twice, the second receive still in flight
    first, latest = received_twice(engine, clock)
    (seq,) = engine.queues[Q].msgs
    records.clear()
    # when it is deleted with the handle of the first receive
    results = engine.delete(Q, [first["receipt"]])
    # then the request succeeds, nothing is recorded, and the message is still in flight under the second
    assert results == [None]
    assert records == []
    assert engine.stats(Q, RETENTION) == (0, 1, 0)
    # and the latest handle deletes it
    assert engine.delete(Q, [latest["receipt"]]) == [None]
    assert records == [(DELETED, Q, [seq])]
    assert engine.stats(Q, RETENTION) == (0, 0, 0)


def test_a_superseded_handle_in_a_batch_leaves_its_message_and_the_others_are_deleted(
    engine: Engine, clock: ManualClock
) -> None:
    # given one message received twice and another received once
    first, _ = received_twice(engine, clock)
    engine.send(Q, [plain_message("other")], RETENTION)
    (other,), _ = poll(engine, Q)
    # when both are deleted in one batch, the first with its superseded handle
    assert engine.delete(Q, [first["receipt"], other["receipt"]]) == [None, None]
    # then only the other one is gone
    clock.advance(30)
    assert bodies(engine, Q) == ["m"]


def test_the_latest_handle_deletes_after_the_visibility_timeout_ran_out(engine: Engine, clock: ManualClock) -> None:
    # given a message whose visibility timeout ran out, visible again but not received again
    engine.send(Q, [plain_message("m")], RETENTION)
    (got,), _ = poll(engine, Q, visibility=5)
    clock.advance(5)
    assert engine.stats(Q, RETENTION) == (1, 0, 0)
    # when it is deleted with the handle of its (still latest) receive, then it is gone
    assert engine.delete(Q, [got["receipt"]]) == [None]
    assert engine.stats(Q, RETENTION) == (0, 0, 0)


def test_changing_visibility_with_a_superseded_handle_changes_the_current_receive(
    engine: Engine, clock: ManualClock, records: list
) -> None:
    # given a message received twice, the second receive in flight for 30 s
    first, _ = received_twice(engine, clock)
    (seq,) = engine.queues[Q].msgs
    records.clear()
    # when its visibility is ended with the first receive's handle
    assert engine.change_visibility(Q, [(first["receipt"], 0)]) == [None]
    # then AWS's rule holds: the message is visible at once
    assert records == [(VISIBILITY, Q, [(seq, engine.now_ms())])]
    assert bodies(engine, Q) == ["m"]


def test_a_superseded_handle_may_extend_the_current_receive(engine: Engine, clock: ManualClock) -> None:
    first, _ = received_twice(engine, clock)
    assert engine.change_visibility(Q, [(first["receipt"], 60)]) == [None]
    clock.advance(59)
    assert bodies(engine, Q) == []
    clock.advance(1)
    assert bodies(engine, Q) == ["m"]


def test_a_superseded_handle_of_a_fifo_message_has_expired(engine: Engine, clock: ManualClock) -> None:
    # FIFO handles expire (AWS): a superseded consumer may not release the message of the group's current one
    fifo = "000000000000/orders.fifo/1"
    engine.store(fifo, [("id-1", "m", None, "md5", None, 0, {}, "g", "d", None)], RETENTION, fifo=True)
    (first,), _ = poll(engine, fifo, visibility=0)
    (latest,), _ = poll(engine, fifo, visibility=30)
    assert engine.change_visibility(fifo, [(first["receipt"], 0)]) == [expired(first["receipt"])]
    assert bodies(engine, fifo) == []
    assert engine.change_visibility(fifo, [(latest["receipt"], 0)]) == [None]
    assert bodies(engine, fifo) == ["m"]


def test_changing_visibility_of_a_deleted_message_names_the_reason(engine: Engine, clock: ManualClock) -> None:
    first, latest = received_twice(engine, clock)
    assert engine.delete(Q, [latest["receipt"]]) == [None]
    reason = "Reason: Message does not exist or is not available for visibility timeout change."
    for handle in (first["receipt"], latest["receipt"]):
        assert engine.change_visibility(Q, [(handle, 0)]) == [
            (InvalidParameterValue.code, f"Value {handle} for parameter ReceiptHandle is invalid. {reason}")]


def test_an_engine_with_another_key_refuses_the_handles(engine: Engine, records: list, clock: ManualClock) -> None:
    # given a message received, and an engine over the same records with another partition's key
    engine.send(Q, [plain_message("m")], RETENTION)
    (got,), _ = poll(engine, Q)
    other = Engine.replay(clock, list(records), receipt_key=OTHER_KEY)
    # when the handle is used there, then it is not a valid receipt handle and the message stays in flight
    assert other.delete(Q, [got["receipt"]]) == [invalid(got["receipt"])]
    assert other.change_visibility(Q, [(got["receipt"], 0)]) == [invalid(got["receipt"])]
    assert other.stats(Q, RETENTION) == (0, 1, 0)
    # and an engine over the same records with the same key accepts it
    same = Engine.replay(clock, list(records), receipt_key=RECEIPT_KEY)
    assert same.delete(Q, [got["receipt"]]) == [None]
    assert same.stats(Q, RETENTION) == (0, 0, 0)


def test_a_forged_handle_for_the_latest_receive_is_refused(engine: Engine, clock: ManualClock) -> None:
    # given a consumer holding the handle of a superseded receive
    first, _ = received_twice(engine, clock)
    # when it rewrites the receive number in that handle to the latest one (right structure, wrong MAC)
    raw = bytearray(base64.urlsafe_b64decode(first["receipt"]))
    raw[17:21] = (2).to_bytes(4, "big")
    forged = base64.urlsafe_b64encode(bytes(raw)).decode()
    # then delete and visibility change refuse it as an invalid handle, and the message stays
    assert engine.delete(Q, [forged]) == [invalid(forged)]
    assert engine.change_visibility(Q, [(forged, 0)]) == [invalid(forged)]
    assert engine.stats(Q, RETENTION) == (0, 1, 0)


def test_a_handle_minted_from_a_message_id_and_sequence_number_is_refused(engine: Engine) -> None:
    # given a message in flight whose id and sequence number someone knows
    message = plain_message("m")
    engine.send(Q, [message], RETENTION)
    poll(engine, Q)
    (seq,) = engine.queues[Q].msgs
    # when they mint a handle for it the way unkeyed handles were made
    minted = unkeyed_handle(Q, seq, 1, message[0])
    # then it is not a valid receipt handle, and the message stays
    assert engine.delete(Q, [minted]) == [invalid(minted)]
    assert engine.stats(Q, RETENTION) == (0, 1, 0)
