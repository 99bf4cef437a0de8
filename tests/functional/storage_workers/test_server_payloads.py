"""The worker RPC's payloads over loopback, against a real in-process worker: the forms front ends and peers of
before send are answered as before, RECEIVE and PEEK answers of version 2 say whether their rows are a FIFO
queue's, and a payload of any other shape gets InvalidParameterValue, changes nothing and leaves the worker and
the connection serving."""

from __future__ import annotations

import asyncio
import uuid
from pathlib import Path
from typing import Any

import pytest

from ferrymq.errors import InvalidParameterValue
from ferrymq.message_fields import FIFO_RECEIVED_MESSAGE_FIELDS, RECEIVED_MESSAGE_FIELDS
from ferrymq.rpc.client import WorkerClient
from ferrymq.rpc.codec import unpack_error
from ferrymq.rpc.framing import STATUS_ERROR, Op
from tests.functional.storage_workers.in_process import worker
from tests.functional.storage_workers.worker_calls import RETENTION

STANDARD_Q = "000000000000/plain/1"
FIFO_Q = "000000000000/orders.fifo/2"


def plain_row(body: str) -> list[Any]:
    return [str(uuid.uuid4()), body, {}, "md5", None, 0, {}]


def fifo_row(body: str) -> list[Any]:
    return [*plain_row(body), "group", f"dedup-{body}", None]


def test_the_payloads_of_before_are_answered_as_before(tmp_path: Path) -> None:
    async def scenario() -> None:
        async with worker(tmp_path) as (_, client):
            # given a standard and a FIFO queue, sent to as a front end of before sent, spelled as it was
            sent = await client._call(Op.SEND, [0, STANDARD_Q, [plain_row("s")], RETENTION])
            assert [len(row) for row in sent] == [2]
            stored = await client._call(Op.SEND, [0, FIFO_Q, [fifo_row("f")], RETENTION, True])
            assert [(len(row), len(row[2]), row[3]) for row in stored] == [(4, 20, False)]
            # when they are peeked and received as then
            peeked = await client._call(Op.PEEK, [0, FIFO_Q, 10, RETENTION])
            standard = await client._call(Op.RECEIVE, [0, STANDARD_Q, 10, 30, 0, RETENTION])
            fifo = await client._call(Op.RECEIVE, [0, FIFO_Q, 10, 30, 0, RETENTION, {"fifo": True}])
            # then the answers are the bare lists of rows a front end of before reads
            assert [len(row) for row in peeked] == [len(FIFO_RECEIVED_MESSAGE_FIELDS)]
            assert [(len(row), row[2]) for row in standard] == [(len(RECEIVED_MESSAGE_FIELDS), "s")]
            assert [(len(row), row[2], row[11]) for row in fifo] == [(len(FIFO_RECEIVED_MESSAGE_FIELDS), "f", "group")]
            stats = await client._call(Op.STATS, [0, STANDARD_Q, RETENTION])
            assert stats == [0, 1, 0]

    asyncio.run(scenario())


def test_receive_and_peek_answers_say_whether_their_rows_are_a_fifo_queues(tmp_path: Path) -> None:
    async def scenario() -> None:
        async with worker(tmp_path) as (_, client):
            await client.send(0, STANDARD_Q, [_message("s")], retention_seconds=RETENTION)
            await client.send(0, FIFO_Q, [_message("f", group="g")], retention_seconds=RETENTION, fifo=True)
            # when a front end asks for version 2 answers
            peeked = await client._call(Op.PEEK, [0, FIFO_Q, 10, RETENTION, 2])
            fifo = await client._call(Op.RECEIVE, [0, FIFO_Q, 10, 30, 0, RETENTION, None, 2])
            standard = await client._call(Op.RECEIVE, [0, STANDARD_Q, 10, 30, 0, RETENTION, None, 2])
            empty = await client._call(Op.RECEIVE, [0, STANDARD_Q, 10, 30, 0, RETENTION, None, 2])
            # then each says which rows it holds
            assert (peeked[0], [row[2] for row in peeked[1]]) == (True, ["f"])
            assert (fifo[0], [row[2] for row in fifo[1]]) == (True, ["f"])
            assert (standard[0], [row[2] for row in standard[1]]) == (False, ["s"])
            assert empty == [False, []]

    asyncio.run(scenario())


def test_the_client_reads_a_fifo_queues_rows_by_the_workers_word_not_by_what_it_asked(tmp_path: Path) -> None:
    async def scenario() -> None:
        async with worker(tmp_path) as (_, client):
            await client.send(0, FIFO_Q, [_message("f", group="g")], retention_seconds=RETENTION, fifo=True)
            # when a FIFO queue is peeked and then received without saying it is one
            (peeked,) = await client.peek(0, FIFO_Q, max_messages=10, retention_seconds=RETENTION)
            (got,) = await client.receive(0, FIFO_Q, max_messages=10, visibility_timeout=30, wait_seconds=0,
                                          retention_seconds=RETENTION)
            # then its messages carry their FIFO fields
            assert (peeked["group"], peeked["receipt"], len(peeked["seq"])) == ("g", None, 20)
            assert (got["body"], got["group"], got["seq"]) == ("f", "g", peeked["seq"])

    asyncio.run(scenario())


def test_a_long_poll_answers_in_the_version_it_was_asked_for(tmp_path: Path) -> None:
    async def scenario() -> None:
        async with worker(tmp_path) as (_, client):
            # given long polls on an empty queue, one asking for each version
            new = asyncio.ensure_future(client._call(Op.RECEIVE, [0, FIFO_Q, 10, 30, 5, RETENTION, None, 2], 5))
            old = asyncio.ensure_future(client._call(Op.RECEIVE, [0, FIFO_Q, 10, 30, 5, RETENTION], 5))
            await asyncio.sleep(0.1)
            # when a message comes, then the first gets it marked, or the second its bare row when it gets one (the
            # second message sent once one poll has answered: sent at once, both could reach the same poll)
            await client.send(0, FIFO_Q, [_message("f", group="g")], retention_seconds=RETENTION, fifo=True)
            await asyncio.wait([new, old], timeout=10, return_when=asyncio.FIRST_COMPLETED)
            await client.send(0, FIFO_Q, [_message("h", group="h")], retention_seconds=RETENTION, fifo=True)
            marked, bare = await asyncio.wait_for(asyncio.gather(new, old), 10)
            assert marked[0] is True and [len(row) for row in marked[1]] == [len(FIFO_RECEIVED_MESSAGE_FIELDS)]
            assert [len(row) for row in bare] == [len(FIFO_RECEIVED_MESSAGE_FIELDS)]

    asyncio.run(scenario())


MALFORMED: list[tuple[int, list[Any]]] = [
    (Op.SEND, [0]),
    (Op.SEND, [0, STANDARD_Q, "not a list", RETENTION]),
    (Op.SEND, [0, STANDARD_Q, {"id": "x"}, RETENTION]),
    (Op.SEND, [0, STANDARD_Q, ["not a row"], RETENTION]),
    (Op.SEND, [0, STANDARD_Q, [plain_row("x")[:6]], RETENTION]),
    (Op.SEND, [0, STANDARD_Q, [[*plain_row("x"), "group"]], RETENTION]),
    (Op.SEND, [0, STANDARD_Q, [plain_row("x")], RETENTION, False, False, "extra"]),
    (Op.SEND, [0, STANDARD_Q, [plain_row("x")], "long"]),
    (Op.SEND, [0, 5, [plain_row("x")], RETENTION]),
    (Op.SEND, [0, FIFO_Q, [plain_row("x")], RETENTION, True]),
    (Op.RECEIVE, [0, STANDARD_Q, 10]),
    (Op.RECEIVE, [0, STANDARD_Q, "ten", 30, 0, RETENTION]),
    (Op.RECEIVE, [0, STANDARD_Q, 10, 30, 0, RETENTION, "options"]),
    (Op.RECEIVE, [0, STANDARD_Q, 10, 30, 0, RETENTION, None, 3]),
    (Op.RECEIVE, [0, STANDARD_Q, 10, 30, 0, RETENTION, None, 2, "extra"]),
    (Op.PEEK, [0, STANDARD_Q, 10, RETENTION, 2, "extra"]),
    (Op.PEEK, [0, STANDARD_Q, 10, RETENTION, "2"]),
    (Op.PEEK, [0, STANDARD_Q]),
    (Op.DELETE, [0, STANDARD_Q]),
    (Op.DELETE, [0, STANDARD_Q, "receipt"]),
    (Op.CHANGE_VISIBILITY, [0, STANDARD_Q, 5]),
    (Op.CHANGE_VISIBILITY, [0, STANDARD_Q, [[1, 2]]]),
    (Op.CHANGE_VISIBILITY, [0, STANDARD_Q, [["receipt"]]]),
    (Op.CHANGE_VISIBILITY, [0, STANDARD_Q, ["receipt"]]),
    (Op.STATS, [0, STANDARD_Q]),
    (Op.STATS, [0, STANDARD_Q, RETENTION, True, "extra"]),
    (Op.PURGE, [0]),
    (Op.PURGE, [0, STANDARD_Q, "extra"]),
    (Op.DROP_QUEUE, [0, 5]),
    (Op.START_MOVE_TASK, [0, STANDARD_Q, "task"]),
    (Op.LIST_MOVE_TASKS, [0, STANDARD_Q, "extra"]),
    (Op.CANCEL_MOVE_TASK, [0, STANDARD_Q]),
    (Op.FETCH, [0, "worker-2", 1]),
    (Op.OFFSET_FOR_EPOCH, [0, 1, 1, 1]),
    (Op.SNAPSHOT, [0, "worker-2"]),
    (Op.COPY_BASE, [0, "worker-2", 1]),
    (Op.COPY_BASE, [0, "worker-2", 1, 0, "0", 1024]),
]


@pytest.mark.parametrize(("op", "args"), MALFORMED, ids=[f"{Op(op).name}-{i}" for i, (op, _) in enumerate(MALFORMED)])
def test_a_malformed_request_is_invalid_and_changes_nothing(tmp_path: Path, op: int, args: list[Any]) -> None:
    async def scenario() -> None:
        async with worker(tmp_path) as (_, client):
            await client.send(0, STANDARD_Q, [_message("kept")], retention_seconds=RETENTION)
            with pytest.raises(InvalidParameterValue, match="Malformed worker request"):
                await client._call(op, args)
            await _still_serving(client)

    asyncio.run(scenario())


@pytest.mark.parametrize(
    "payload",
    [
        b"\xdd\xff\xff\xff\xff",  # an array of 4,294,967,295 elements, none of them there
        b"\x94\x00\xa1q\xdd\xff\xff\xff\xff",  # [0, "q", <that array>, ...]
        b"\xdf\xff\xff\xff\xff",  # a map of as many pairs
        b"\xc1",  # a byte msgpack never uses
        b"",
    ],
    ids=["huge-array", "huge-nested-array", "huge-map", "reserved-byte", "empty"],
)
def test_a_payload_announcing_more_than_it_holds_is_invalid_and_the_connection_serves_on(
    tmp_path: Path, payload: bytes
) -> None:
    async def scenario() -> None:
        async with worker(tmp_path) as (_, client):
            await client.send(0, STANDARD_Q, [_message("kept")], retention_seconds=RETENTION)
            for op in (Op.SEND, Op.RECEIVE, Op.FETCH):
                conn = await client._connection()
                status, answer = await conn.request(op, payload, 5)
                assert status == STATUS_ERROR
                assert unpack_error(answer).code == InvalidParameterValue.code
            await _still_serving(client)

    asyncio.run(scenario())


async def _still_serving(client: WorkerClient) -> None:
    """The worker answers on the same connection and its queue holds what it held."""
    assert (await client.ping())["worker_id"] == "worker-1"
    counts = await client.stats(0, STANDARD_Q, retention_seconds=RETENTION)
    assert counts == {"visible": 1, "in_flight": 0, "delayed": 0}


def _message(body: str, *, group: str | None = None) -> dict[str, Any]:
    return {"id": str(uuid.uuid4()), "body": body, "md5_body": "md5", "group": group,
            "dedup_id": None if group is None else f"dedup-{body}"}
