"""WorkerClient's deadlines, on a connection whose socket is a stand-in: the test plays the worker by feeding
(or not feeding) response frames to the client's reader.  The real thing, a SIGSTOPped worker process, is in
``tests/integration/frontend/test_worker_rpc.py``."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable
from typing import Any, TypeVar

import pytest

from ferrymq.errors import ServiceUnavailable
from ferrymq.rpc.client import WorkerClient, WorkerTimeout, _Connection
from ferrymq.rpc.codec import pack
from ferrymq.rpc.framing import STATUS_OK, FrameDecoder, Op, encode_frame

T = TypeVar("T")

BOUND = 5.0
"""Upper bound on any wait in these tests, so a regression fails instead of hanging."""


class SilentTransport:
    def __init__(self, buffered: int = 0) -> None:
        self.buffered = buffered
        self.aborted = False

    def get_write_buffer_size(self) -> int:
        return self.buffered

    def abort(self) -> None:
        self.aborted = True


class SilentWriter:
    """A socket to a worker that reads nothing: writes pile up, drain never returns."""

    def __init__(self, buffered: int = 0) -> None:
        self.transport = SilentTransport(buffered)
        self.written = bytearray()

    def write(self, data: bytes) -> None:
        self.written += data

    async def drain(self) -> None:
        await asyncio.Event().wait()

    async def wait_closed(self) -> None:
        return None

    def requests(self) -> list[tuple[int, int, bytes]]:
        return FrameDecoder().feed(bytes(self.written))


async def bounded(call: Awaitable[T]) -> T:
    return await asyncio.wait_for(call, BOUND)


def connected(request_timeout: float, buffered: int = 0) -> tuple[WorkerClient, _Connection, asyncio.StreamReader,
                                                                   SilentWriter]:
    """A client already connected, over the stand-in socket, to a worker "w:1"."""
    client = WorkerClient("w", 1, request_timeout=request_timeout)
    reader, writer = asyncio.StreamReader(), SilentWriter(buffered)
    conn = _Connection(reader, writer, "w:1")  # type: ignore[arg-type]
    client._conn = conn
    return client, conn, reader, writer


def test_an_unanswered_request_fails_at_its_deadline_and_drops_the_connection() -> None:
    async def scenario() -> None:
        client, conn, reader, writer = connected(request_timeout=0.05)
        try:
            # given two requests outstanding, a ping and a long poll of 10 s
            ping = asyncio.ensure_future(client.ping())
            poll = asyncio.ensure_future(client.receive(0, "q", max_messages=1, visibility_timeout=30, wait_seconds=10,
                                                        retention_seconds=60))
            # when the worker answers neither
            with pytest.raises(WorkerTimeout) as timed_out:
                await bounded(ping)
            # then the ping fails as a 503 naming the worker and its deadline
            assert timed_out.value.status == 503
            assert "w:1" in timed_out.value.message and "0.05 s" in timed_out.value.message
            # and the connection is dropped, its socket aborted, the poll failed with it, nothing left pending
            with pytest.raises(ServiceUnavailable):
                await bounded(poll)
            assert conn.lost and writer.transport.aborted
            assert conn._pending == {}
            # and a late reply to the ping is ignored
            (ping_id, _, _) = writer.requests()[0]
            reader.feed_data(encode_frame(ping_id, STATUS_OK, pack({"worker_id": "late"})))
            await asyncio.sleep(0)
            assert conn._pending == {}
        finally:
            await client.close()

    asyncio.run(scenario())


def test_a_request_with_an_earlier_deadline_than_those_outstanding_fails_at_its_own() -> None:
    async def scenario() -> None:
        client, conn, _, _ = connected(request_timeout=0.05)
        try:
            # given a long poll of 10 s outstanding (the connection's timer is due at its deadline)
            poll = asyncio.ensure_future(client.receive(0, "q", max_messages=1, visibility_timeout=30, wait_seconds=10,
                                                        retention_seconds=60))
            await asyncio.sleep(0)
            # when a ping, due long before it, goes unanswered too
            ping = asyncio.ensure_future(client.ping())
            # then the ping fails at its own deadline (well within the bound), and takes the poll with it
            with pytest.raises(WorkerTimeout) as timed_out:
                await bounded(ping)
            assert "0.05 s" in timed_out.value.message
            with pytest.raises(ServiceUnavailable):
                await bounded(poll)
            assert conn.lost and conn._pending == {}
        finally:
            await client.close()

    asyncio.run(scenario())


def test_a_request_made_after_answered_ones_still_fails_at_its_deadline() -> None:
    async def scenario() -> None:
        client, conn, reader, writer = connected(request_timeout=0.1)
        try:
            # given a ping answered at once (the connection's timer stays due at its deadline)
            first = asyncio.ensure_future(client.ping())
            await asyncio.sleep(0)
            await asyncio.sleep(0)
            (first_id, _, _) = writer.requests()[0]
            reader.feed_data(encode_frame(first_id, STATUS_OK, pack({"worker_id": "w-1"})))
            assert await bounded(first) == {"worker_id": "w-1"}
            # when a second ping, made later, goes unanswered past the first one's deadline and its own
            await asyncio.sleep(0.05)
            second = asyncio.ensure_future(client.ping())
            # then it fails at its deadline all the same, and the connection is dropped
            with pytest.raises(WorkerTimeout):
                await bounded(second)
            assert conn.lost and conn._pending == {}
        finally:
            await client.close()

    asyncio.run(scenario())


def test_an_answer_before_the_deadline_is_returned_and_keeps_the_connection() -> None:
    async def scenario() -> None:
        client, conn, reader, writer = connected(request_timeout=0.5)
        try:
            # given a ping outstanding
            ping = asyncio.ensure_future(client.ping())
            await asyncio.sleep(0)
            await asyncio.sleep(0)
            # when the worker answers it at once
            (ping_id, op, _) = writer.requests()[0]
            assert op == Op.PING
            reader.feed_data(encode_frame(ping_id, STATUS_OK, pack({"worker_id": "w-1"})))
            # then the answer is returned, and the deadline passing later changes nothing
            assert await bounded(ping) == {"worker_id": "w-1"}
            await asyncio.sleep(0.6)
            assert not conn.lost and not writer.transport.aborted
        finally:
            await client.close()

    asyncio.run(scenario())


def test_a_long_poll_s_deadline_is_its_wait_plus_the_request_timeout() -> None:
    async def scenario() -> None:
        client, conn, reader, writer = connected(request_timeout=0.05)
        try:
            # given a long poll of 1 s, longer than the request timeout
            poll = asyncio.ensure_future(client.receive(0, "q", max_messages=1, visibility_timeout=30, wait_seconds=1,
                                                        retention_seconds=60))
            # when the request timeout has passed but not the wait, then it is still outstanding
            await asyncio.sleep(0.1)
            assert not poll.done() and not conn.lost
            # and when the worker answers it, it is returned
            (poll_id, _, _) = writer.requests()[0]
            reader.feed_data(encode_frame(poll_id, STATUS_OK, pack([])))
            assert await bounded(poll) == []
        finally:
            await client.close()

    asyncio.run(scenario())


def test_a_worker_that_takes_no_data_fails_a_call_waiting_to_write() -> None:
    async def scenario() -> None:
        # given a connection whose write buffer is full because the worker stopped reading
        client, conn, _, writer = connected(request_timeout=0.05, buffered=64 * 1024 * 1024)
        try:
            # when a call is made, then it fails at the deadline instead of waiting to write for ever
            with pytest.raises(WorkerTimeout, match="w:1"):
                await bounded(client.ping())
            assert conn.lost and writer.transport.aborted
        finally:
            await client.close()

    asyncio.run(scenario())


def test_a_closed_client_makes_no_new_connection() -> None:
    async def scenario() -> Any:
        client, _, _, _ = connected(request_timeout=1)
        await client.close()
        assert client.closed
        with pytest.raises(ServiceUnavailable, match="closed"):
            await bounded(client.ping())

    asyncio.run(scenario())
