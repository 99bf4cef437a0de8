"""The worker RPC's payload shapes: every one round-trips, the forms peers of before send are read the same, and a
payload of another shape is refused with TypeError or ValueError (which the worker answers InvalidParameterValue)."""

from __future__ import annotations

from typing import Any

import pytest

from ferrymq.message_fields import FIFO_RECEIVED_MESSAGE_FIELDS, RECEIVED_MESSAGE_FIELDS
from ferrymq.rpc import shapes
from ferrymq.rpc.codec import pack, unpack
from ferrymq.rpc.framing import Op
from ferrymq.storage.replication.tail import TailBuffer

RET = 345600
STANDARD_ROW = ["id-1", "receipt", "body", {}, "md5", None, {"SenderId": "AIDA"}, 1_000, 0, 1]
FIFO_ROW = [*STANDARD_ROW, "00000000000000000007", "g", "d"]
STANDARD = dict(zip(RECEIVED_MESSAGE_FIELDS, STANDARD_ROW, strict=True))
FIFO = dict(zip(FIFO_RECEIVED_MESSAGE_FIELDS, FIFO_ROW, strict=True))


def sample(field: str) -> Any:
    """A value of the field's kind, so a payload of every field survives msgpack."""
    return {"queue_id": "q", "replica": "worker-2", "task_handle": "h", "messages": [], "receipts": [],
            "entries": [], "options": {"fifo": True}, "task": {"task_handle": "h"}}.get(field, 7)


@pytest.mark.parametrize("op", sorted(shapes.REQUESTS), ids=lambda op: Op(op).name)
def test_every_request_round_trips_through_msgpack_with_and_without_its_optional_fields(op: int) -> None:
    shape = shapes.REQUESTS[op]
    # given every field
    values = [sample(f) for f in shape.fields]
    # when built as a request about partition 3, sent and read as the worker reads it
    wire = unpack(pack(shape.request(3, *values)))
    # then the partition comes first and the fields follow, as they were
    assert wire[0] == 3 and list(shape.read(wire[1:])) == values
    # and with the optional fields at what their absence means, they are left out and read back the same
    required = values[: shape.required]
    short = shape.request(3, *required, *shape.absent)
    assert short == [3, *required]
    assert list(shape.read(unpack(pack(short))[1:])) == [*required, *shape.absent]


def test_every_operation_but_ping_has_a_request_shape_and_the_table_shows_each() -> None:
    assert set(shapes.REQUESTS) == set(Op) - {Op.PING}
    table = shapes.table()
    for op in Op:
        assert Op(op).name in table
    for shape in shapes.ANSWERS:
        assert f"{shape.name} " in table


@pytest.mark.parametrize("shape", shapes.ANSWERS, ids=lambda s: s.name)
def test_every_row_and_answer_shape_round_trips(shape: shapes.Shape) -> None:
    values = [sample(f) for f in shape.fields]
    assert list(shape.read(unpack(pack(shape.build(*values))))) == values


# --- what peers of before send, spelled as they sent it -----------------------------------------------------


@pytest.mark.parametrize(
    ("call", "wire"),
    [
        # a plain send, a FIFO send, a handed-over message to a standard queue, a resend
        ({"fifo": False, "resend": False}, [0, "q", [["id-1", "b", {}, "md5", None, 0, {}]], RET]),
        ({"fifo": True, "resend": False},
         [0, "q", [["id-1", "b", {}, "md5", None, 0, {}, "g", "d", None]], RET, True]),
        ({"fifo": False, "resend": True}, [0, "q", [["id-1", "b", {}, "md5", None, 0, {}]], RET, False, True]),
    ],
)
def test_a_send_is_built_exactly_as_version_1_built_it(call: dict[str, bool], wire: list[Any]) -> None:
    message = {"id": "id-1", "body": "b", "md5_body": "md5"}
    if call["fifo"]:
        message.update(group="g", dedup_id="d")
    args, stored = shapes.send_request(0, "q", [message], RET, call["fifo"], call["resend"])
    assert args == wire
    assert stored is call["fifo"]


def test_a_handed_over_message_is_built_with_its_origin_and_asks_for_stored_results() -> None:
    origin = {"sent_ts": 5, "receive_count": 2, "first_receive_ts": 6}
    message = {"id": "id-1", "body": "b", "md5_body": "md5", "origin": origin}
    args, stored = shapes.send_request(0, "q", [message], RET, False, False)
    assert args == [0, "q", [["id-1", "b", {}, "md5", None, 0, {}, None, None, origin]], RET, False]
    assert stored


def test_the_worker_reads_a_version_1_send_as_before() -> None:
    # given the payloads a front end of before sent (after the partition)
    plain = ["q", [["id-1", "b", {}, "md5", None, 0, {}]], RET]
    resent = ["q", [["id-1", "b", {}, "md5", None, 0, {}]], RET, False, 1_700_000_000_000]
    handed = ["q", [["id-2", "b", {}, "md5", None, 0, {}, None, None,
                     {"sent_ts": 5, "receive_count": 2, "first_receive_ts": 6}]], RET, False]
    # then they read with the absent fields as False, the old resend time kept as it came (taken as true)
    assert list(shapes.SEND.read(plain)) == [*plain, False, False]
    assert list(shapes.SEND.read(resent)) == resent
    assert shapes.check_send("q", plain[1], RET, False) is True
    assert shapes.check_send("q", handed[1], RET, False) is False
    # and a handed-over message's origin map is read into the engine's tuple
    assert shapes.stored_messages(handed[1]) == [("id-2", "b", {}, "md5", None, 0, {}, None, None, (5, 2, 6))]
    assert shapes.stored_messages(plain[1]) == [("id-1", "b", {}, "md5", None, 0, {}, None, None, None)]


def test_the_worker_reads_a_version_1_receive_and_peek_and_answers_them_in_version_1() -> None:
    old_receive = ["q", 10, 30, 0, RET, {"fifo": True}]
    *_, options, version = shapes.RECEIVE.read(old_receive)
    assert (options, version) == ({"fifo": True}, 1)
    assert shapes.RECEIVE.read(["q", 10, 30, 0, RET])[5:] == [None, 1]
    assert shapes.PEEK.read(["q", 10, RET])[3] == 1
    # then the answer is the bare list of rows a front end of before reads
    assert shapes.received_answer(1, True, [FIFO_ROW]) == [FIFO_ROW]
    assert shapes.received_answer(2, True, [FIFO_ROW]) == [True, [FIFO_ROW]]


def test_a_version_2_answer_says_which_rows_it_holds() -> None:
    assert shapes.read_received([False, [STANDARD_ROW]]) == [STANDARD]
    assert shapes.read_received([True, [FIFO_ROW]]) == [FIFO]
    assert shapes.read_received([True, []]) == []
    # a row that does not have the shape the flag names is refused, whatever its length would suggest
    with pytest.raises(ValueError):
        shapes.read_received([False, [FIFO_ROW]])
    with pytest.raises(ValueError):
        shapes.read_received([True, [STANDARD_ROW]])


def test_a_version_1_answer_from_a_worker_of_before_is_read_by_its_rows() -> None:
    old = unpack(pack([STANDARD_ROW, FIFO_ROW]))
    assert shapes.read_received(old) == [STANDARD, FIFO]
    assert shapes.read_received([]) == []


def test_send_answers_read_as_their_request_declared() -> None:
    assert shapes.read_send_answer([["id-1", 5]], False, False) == [{"id": "id-1", "sent_ts": 5}]
    stored = shapes.stored_answer([("id-1", 5, 7, True)])
    assert stored == [["id-1", 5, "00000000000000000007", True]]
    assert shapes.read_send_answer(stored, True, True) == [
        {"id": "id-1", "sent_ts": 5, "seq": "00000000000000000007", "duplicate": True}
    ]
    assert shapes.read_send_answer(stored, True, False) == [{"id": "id-1", "sent_ts": 5, "duplicate": True}]
    assert shapes.send_answer([["id-1", "b"]], 9) == [["id-1", 9]]


def test_replication_answers_read_back() -> None:
    assert shapes.read_frames([[1, 2, b"x"]]) == [(1, 2, b"x")]
    assert shapes.read_epoch_end(shapes.EPOCH_END.build(3, 40)) == (3, 40)
    assert shapes.read_epoch_end(None) is None
    answer = unpack(pack(shapes.snapshot_answer(9, 2, [(1, 1), (2, 5)], 3, [b"a", b"b"])))
    assert shapes.read_snapshot_answer(answer) == (9, 2, [(1, 1), (2, 5)], 3, [b"a", b"b"])
    assert shapes.read_item_result(["InvalidParameterValue", "no"]) == ("InvalidParameterValue", "no")


# --- hostile payloads ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("payload", [None, "q", 7, {"queue_id": "q"}, b"q"])
@pytest.mark.parametrize("op", sorted(shapes.REQUESTS), ids=lambda op: Op(op).name)
def test_a_request_that_is_not_an_array_is_a_type_error(op: int, payload: Any) -> None:
    with pytest.raises(TypeError, match="must be an array"):
        shapes.REQUESTS[op].read(payload)


@pytest.mark.parametrize("op", sorted(shapes.REQUESTS), ids=lambda op: Op(op).name)
def test_a_request_with_too_few_or_too_many_fields_is_a_value_error(op: int) -> None:
    shape = shapes.REQUESTS[op]
    with pytest.raises(ValueError, match=f"{shape.name} has"):
        shape.read([sample(f) for f in shape.fields[: shape.required - 1]])
    with pytest.raises(ValueError, match=f"{shape.name} has"):
        shape.read([*(sample(f) for f in shape.fields), "extra"])


def test_a_message_with_part_of_its_handover_fields_is_refused() -> None:
    with pytest.raises(ValueError):
        shapes.SENT_MESSAGE.read(["id", "b", {}, "md5", None, 0, {}, "g"])
    with pytest.raises(ValueError, match="malformed message"):
        shapes.check_send("q", [["id", "b", {}, "md5", None, 0, {}, "g"]], RET, True)


@pytest.mark.parametrize(
    "message",
    [
        "not a row",
        {"id": "id-1"},
        [],
        [1, "b", {}, "md5", None, 0, {}],
        ["id", 5, {}, "md5", None, 0, {}],
        ["id", "b", [], "md5", None, 0, {}],
        ["id", "b", {"a": "flat"}, "md5", None, 0, {}],
        ["id", "b", {}, None, None, 0, {}],
        ["id", "b", {}, "md5", 5, 0, {}],
        ["id", "b", {}, "md5", None, "0", {}],
        ["id", "b", {}, "md5", None, 901, {}],
        ["id", "b", {}, "md5", None, -1, {}],
        ["id", "b", {}, "md5", None, 2**63, {}],
        ["id", "b", {}, "md5", None, 0, []],
        ["id", "b", {}, "md5", None, 0, {}, 5, None, None],
        ["id", "b", {}, "md5", None, 0, {}, None, None, [1, 2, 3]],
    ],
)
def test_a_malformed_message_is_refused(message: Any) -> None:
    with pytest.raises((TypeError, ValueError)):
        shapes.check_send("q", [message], RET, False)


def test_messages_that_are_not_a_list_and_a_fifo_message_without_a_group_are_refused() -> None:
    with pytest.raises(TypeError):
        shapes.check_send("q", {"id": "x"}, RET, False)
    with pytest.raises(ValueError, match="needs a group"):
        shapes.check_send("q", [["id", "b", {}, "md5", None, 0, {}]], RET, True)


@pytest.mark.parametrize("version", [0, 3, 2**40, "2", None, True, 2.0])
def test_an_answer_version_the_worker_cannot_give_is_refused(version: Any) -> None:
    with pytest.raises(ValueError, match="answer version"):
        shapes.check_answer_version(version)


def test_a_version_2_answer_of_another_shape_is_refused() -> None:
    with pytest.raises(ValueError):
        shapes.read_received([True, [FIFO_ROW], "extra"])
    with pytest.raises(TypeError):
        shapes.read_received([True, 5])


def test_the_tail_buffers_frames_go_out_as_record_frames() -> None:
    # given frames the leader appended, answered to a FETCH as the tail holds them
    tail = TailBuffer(1024)
    tail.add(3, 10, b"first")
    tail.add(3, 11, b"second")
    answer = unpack(pack(tail.read(10, 1024)))
    # then the follower reads each field where RECORD_FRAME declares it
    assert [dict(zip(shapes.RECORD_FRAME.fields, row, strict=True)) for row in answer] == [
        {"epoch": 3, "offset": 10, "payload": b"first"}, {"epoch": 3, "offset": 11, "payload": b"second"}
    ]
    assert shapes.read_frames(answer) == [(3, 10, b"first"), (3, 11, b"second")]
