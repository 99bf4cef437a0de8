"""The limits on reading a request body: the size cap, the gateway-wide budget and the body timeout."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

import pytest

from ferrymq.errors import BatchRequestTooLong, RequestEntityTooLarge, RequestTimeout, ServiceUnavailable, SqsError
from ferrymq.frontend.transport_limits import (
    BodyLease,
    BufferBudget,
    ClientGone,
    declared_length,
    read_body,
    too_large,
)

LIMIT = 100


def _receiver(*messages: dict[str, Any]) -> Callable[[], Any]:
    pending = list(messages)

    async def receive() -> dict[str, Any]:
        if not pending:
            await asyncio.Event().wait()  # a client that stops sending
        return pending.pop(0)

    return receive


def _chunk(body: bytes, more: bool) -> dict[str, Any]:
    return {"type": "http.request", "body": body, "more_body": more}


def _oversized(size: int) -> SqsError:
    return too_large({}, "", size, LIMIT)


def _read(receive: Callable[[], Any], lease: BodyLease, declared: int | None, timeout: float = 5.0,
          free_bytes: int = 0) -> bytes:
    return asyncio.run(read_body(receive, declared=declared, limit=LIMIT, lease=lease, timeout=timeout,
                                 oversized=_oversized, free_bytes=free_bytes))


def test_a_lease_takes_from_the_budget_and_gives_it_back_once() -> None:
    # given a budget of 100 bytes and a lease holding 60 of them
    budget = BufferBudget(100)
    lease = BodyLease(budget)
    lease.grow(60)
    # when another request asks for 50, then the first is released twice
    with pytest.raises(ServiceUnavailable) as refused:
        BodyLease(budget).grow(50)
    lease.release()
    lease.release()
    # then the second was refused with SQS's 503, and the budget is whole again, not over-credited
    assert refused.value.status == 503
    assert budget.in_use == 0
    assert budget.try_take(100) and not budget.try_take(1)


def test_a_body_is_read_whole_and_charged_as_it_arrives() -> None:
    # given a budget with room for exactly 10 bytes
    budget = BufferBudget(10)
    lease = BodyLease(budget)
    # when a declared 10-byte body arrives in three chunks
    body = _read(_receiver(_chunk(b"abc", True), _chunk(b"defg", True), _chunk(b"hij", False)), lease, 10)
    # then it is returned whole, and the lease holds its size until released
    assert body == b"abcdefghij"
    assert lease.held == 10 and budget.in_use == 10


def test_a_body_is_refused_once_what_arrived_exceeds_the_budget() -> None:
    # given a budget with 5 bytes left
    budget = BufferBudget(50)
    budget.try_take(45)
    lease = BodyLease(budget)
    # when a 10-byte body arrives as 3 then 7 bytes
    with pytest.raises(ServiceUnavailable):
        _read(_receiver(_chunk(b"abc", True), _chunk(b"defghij", False)), lease, 10)
    # then the first chunk was charged and the second refused: a slow sender holds only what it sent
    assert lease.held == 3 and budget.in_use == 48


def test_the_first_bytes_of_every_body_are_not_charged() -> None:
    # given a budget that is entirely spent
    budget = BufferBudget(0)
    # when bodies up to the free allowance arrive, then they are read without touching it
    assert _read(_receiver(_chunk(b"x" * 64, False)), BodyLease(budget), 64, free_bytes=64) == b"x" * 64
    # and one byte more is refused
    with pytest.raises(ServiceUnavailable):
        _read(_receiver(_chunk(b"x" * 32, True), _chunk(b"x" * 33, False)), BodyLease(budget), 65, free_bytes=64)


def test_a_chunked_body_over_the_limit_is_cut_off_with_the_size_error() -> None:
    # given a chunked body (no declared length) that grows past the limit
    budget = BufferBudget(1000)
    lease = BodyLease(budget)
    receive = _receiver(_chunk(b"x" * 60, True), _chunk(b"x" * 60, True), _chunk(b"x", False))
    # when it is read
    with pytest.raises(RequestEntityTooLarge) as refused:
        _read(receive, lease, None)
    # then the answer is AWS's 413, and only what was accepted was taken from the budget
    assert refused.value.status == 413
    assert refused.value.message == f"HTTP content length exceeded {LIMIT} bytes."
    assert lease.held == 60


def test_a_chunked_body_is_counted_chunk_by_chunk_against_the_budget() -> None:
    # given a budget of 80 bytes and a chunked body of 90
    lease = BodyLease(BufferBudget(80))
    receive = _receiver(_chunk(b"x" * 45, True), _chunk(b"x" * 45, False))
    # when it is read, then the second chunk finds the budget spent
    with pytest.raises(ServiceUnavailable):
        _read(receive, lease, None)


def test_a_chunked_body_within_the_limits_is_read() -> None:
    lease = BodyLease(BufferBudget(1000))
    assert _read(_receiver(_chunk(b"ab", True), _chunk(b"cd", False)), lease, None) == b"abcd"
    assert lease.held == 4


def test_a_body_that_stops_arriving_times_out_with_request_timeout() -> None:
    # given a client that sends part of its body and then nothing
    receive = _receiver(_chunk(b"abc", True))
    # when the body timeout passes
    with pytest.raises(RequestTimeout) as refused:
        _read(receive, BodyLease(BufferBudget(1000)), 10, timeout=0.05)
    # then the answer is a sender error
    assert refused.value.status == 400
    assert refused.value.code == "RequestTimeout"


def test_a_client_that_leaves_mid_body_is_reported_gone() -> None:
    receive = _receiver(_chunk(b"abc", True), {"type": "http.disconnect"})
    with pytest.raises(ClientGone):
        _read(receive, BodyLease(BufferBudget(1000)), 10)


@pytest.mark.parametrize(
    ("headers", "query", "error", "status"),
    [
        ({"x-amz-target": "AmazonSQS.SendMessageBatch"}, "", BatchRequestTooLong, 400),
        ({}, "Action=SendMessageBatch&Version=2012-11-05", BatchRequestTooLong, 400),
        ({"x-amz-target": "AmazonSQS.SendMessage"}, "", RequestEntityTooLarge, 413),
        ({}, "Action=SendMessage", RequestEntityTooLarge, 413),
        ({}, "", RequestEntityTooLarge, 413),
    ],
)
def test_the_size_error_names_a_batch_when_the_headers_do(headers: dict[str, str], query: str,
                                                         error: type[SqsError], status: int) -> None:
    refused = too_large(headers, query, 5000, LIMIT)
    assert type(refused) is error
    assert refused.status == status


def test_the_batch_size_error_words_it_as_sqs_does() -> None:
    refused = too_large({"x-amz-target": "AmazonSQS.SendMessageBatch"}, "", 2_000_000, LIMIT)
    assert refused.message == "Batch requests cannot be longer than 1048576 bytes. You have sent 2000000 bytes."
    assert refused.json_type == "com.amazonaws.sqs#BatchRequestTooLong"


@pytest.mark.parametrize(("value", "expected"), [("12", 12), ("0", 0), ("12, 12", 12), ("x", None), (None, None)])
def test_declared_length(value: str | None, expected: int | None) -> None:
    headers = {} if value is None else {"content-length": value}
    assert declared_length(headers) == expected
