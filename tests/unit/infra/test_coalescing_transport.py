"""The gateway's transport wrapper: a response's head and body leave in one write, in order, and nothing is lost
on close."""

from __future__ import annotations

import asyncio

from ferrymq.infra.http_protocol import CoalescingTransport


class RecordingTransport:
    def __init__(self) -> None:
        self.writes: list[bytes] = []
        self.closed = False
        self.extra = {"peername": ("127.0.0.1", 1)}

    def write(self, data: bytes) -> None:
        assert not self.closed, "a write after close"
        self.writes.append(data)

    def is_closing(self) -> bool:
        return self.closed

    def close(self) -> None:
        self.closed = True

    def get_extra_info(self, name: str) -> object:
        return self.extra.get(name)


async def _turn() -> None:
    await asyncio.sleep(0)


def test_writes_of_one_turn_leave_as_one_write_in_order() -> None:
    async def scenario() -> list[bytes]:
        inner = RecordingTransport()
        transport = CoalescingTransport(inner)  # type: ignore[arg-type]
        transport.write(b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\n")
        transport.write(b"{}")
        assert inner.writes == []
        await _turn()
        transport.write(b"next")
        await _turn()
        return inner.writes

    assert asyncio.run(scenario()) == [b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\n{}", b"next"]


def test_close_sends_what_was_gathered_before_closing() -> None:
    async def scenario() -> RecordingTransport:
        inner = RecordingTransport()
        transport = CoalescingTransport(inner)  # type: ignore[arg-type]
        transport.write(b"HTTP/1.1 400 Bad Request\r\n\r\n")
        transport.close()
        await _turn()  # the flush scheduled by the write finds nothing left and writes nothing after the close
        return inner

    inner = asyncio.run(scenario())
    assert inner.writes == [b"HTTP/1.1 400 Bad Request\r\n\r\n"]
    assert inner.closed


def test_writes_to_a_transport_the_peer_closed_are_dropped_and_the_rest_is_the_transports_own() -> None:
    async def scenario() -> tuple[RecordingTransport, CoalescingTransport]:
        inner = RecordingTransport()
        transport = CoalescingTransport(inner)  # type: ignore[arg-type]
        transport.write(b"late")
        inner.closed = True
        await _turn()
        return inner, transport

    inner, transport = asyncio.run(scenario())
    assert inner.writes == []
    assert transport.is_closing()
    assert transport.get_extra_info("peername") == ("127.0.0.1", 1)


def test_a_whole_response_written_now_leaves_at_once_or_after_what_was_gathered() -> None:
    async def scenario() -> list[list[bytes]]:
        inner = RecordingTransport()
        transport = CoalescingTransport(inner)  # type: ignore[arg-type]
        # given nothing gathered, a response written now leaves at once
        transport.write_now(b"first")
        seen = [list(inner.writes)]
        # and given a write gathered in this turn, one written now follows it in the same write
        transport.write(b"head")
        transport.write_now(b"second")
        seen.append(list(inner.writes))
        await _turn()
        seen.append(list(inner.writes))
        return seen

    assert asyncio.run(scenario()) == [[b"first"], [b"first"], [b"first", b"headsecond"]]
