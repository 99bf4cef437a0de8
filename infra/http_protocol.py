"""uvicorn's httptools protocol with the two limits it lacks: a header timeout and a per-client connection cap.

uvicorn times out only idle kept-alive connections; a client that trickles its request line and headers, a
byte now and then, holds a connection (and a file descriptor) forever.  Here every request must finish its
headers within ``header_timeout`` of its first byte, and a new connection must do so within
``header_timeout`` of being accepted; a connection that does not is closed without an answer, as there is no
complete request to answer.

Upgrades (WebSocket or any other) are off: a request asking for one is served as the plain HTTP request it
also is. llhttp ends such a request at its headers and leaves what follows unparsed, so its body (by its
Content-Length) is taken from the raw bytes here and handed to the request, and the parser starts afresh for
the next request on the connection.

Connections are counted per client address.  One over ``max_per_client`` is not refused outright: its request
is flagged in the scope (``ferrymq.frontend.transport_limits.OVER_CLIENT_CAP``) so that the front end can
answer in the request's protocol, and it is closed after that answer.  The app reads nothing of its body.
"""

from __future__ import annotations

import asyncio
from collections import Counter
from typing import Any

import httptools
from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

from ferrymq.frontend.transport_limits import OVER_CLIENT_CAP


class ClientConnections:
    """Open connections per client address, shared by every connection of one server."""

    def __init__(self, max_per_client: int) -> None:
        self.max_per_client = max_per_client
        self.open: Counter[str] = Counter()

    def opened(self, address: str) -> bool:
        """Count a new connection; whether it is within the cap."""
        self.open[address] += 1
        return self.open[address] <= self.max_per_client

    def closed(self, address: str) -> None:
        left = self.open[address] - 1
        if left > 0:
            self.open[address] = left
        else:
            del self.open[address]


class CoalescingTransport:
    """A transport whose writes within one turn of the event loop leave in one ``write``.

    uvicorn writes a response's head and its body separately, and the transport sends each at once: two
    system calls, and two TCP segments for the client to take in, for what is usually a few hundred bytes.
    Writes here are gathered and sent once the turn's callbacks have run, in the order they were made; a
    close sends what is gathered first.  Everything else is the transport's own."""

    __slots__ = ("_loop", "_out", "_transport")

    def __init__(self, transport: asyncio.Transport) -> None:
        self._transport = transport
        self._loop = asyncio.get_running_loop()
        self._out: list[bytes] = []

    def write(self, data: bytes) -> None:
        if not self._out:
            self._loop.call_soon(self._flush)
        self._out.append(data)

    def _flush(self) -> None:
        out, self._out = self._out, []
        if out and not self._transport.is_closing():
            self._transport.write(out[0] if len(out) == 1 else b"".join(out))

    def close(self) -> None:
        self._flush()
        self._transport.close()

    def __getattr__(self, name: str) -> Any:
        return getattr(self._transport, name)


# The event loop keeps time in milliseconds: a timer may fire up to one early.
_TIMER_SLACK = 0.001


def guarded_protocol(header_timeout: float, max_per_client: int) -> type[HttpToolsProtocol]:
    """A protocol class for ``uvicorn.Config(http=...)`` whose connections share one per-client count."""
    connections = ClientConnections(max_per_client)

    class GuardedHttpToolsProtocol(HttpToolsProtocol):
        _header_timer: asyncio.TimerHandle | None = None
        # When the headers being awaited must be complete (loop time); None while none are awaited.
        _header_deadline: float | None = None
        _client_address: str | None = None
        _over_cap = False
        _body_left = 0

        def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
            super().connection_made(transport)
            self.transport = CoalescingTransport(transport)  # type: ignore[assignment]
            if self.client is not None:
                self._client_address = self.client[0]
                self._over_cap = not connections.opened(self._client_address)
            self._await_headers()

        def connection_lost(self, exc: Exception | None) -> None:
            self._disarm_header_timer()
            if self._client_address is not None:
                connections.closed(self._client_address)
                self._client_address = None
            super().connection_lost(exc)

        def on_message_begin(self) -> None:
            super().on_message_begin()
            if self._over_cap:
                self.scope["extensions"] = {OVER_CLIENT_CAP: True}  # type: ignore[typeddict-unknown-key]
            if self._header_deadline is None:
                self._await_headers()

        def on_headers_complete(self) -> None:
            self._header_deadline = None
            super().on_headers_complete()
            self._body_left = _content_length(self.headers) if self._get_upgrade() is not None else 0

        def on_message_complete(self) -> None:
            if self._body_left > 0:
                return  # an upgrade request's body is still to come, raw (see data_received)
            super().on_message_complete()

        def data_received(self, data: bytes) -> None:
            if self._body_left > 0:
                self._raw_body(data)
                return
            self._unset_keepalive_if_required()
            try:
                self.parser.feed_data(data)
            except httptools.HttpParserError:
                # No warning per request: any client could fill the log with them.
                self.send_400_response("Invalid HTTP request received.")
            except httptools.HttpParserUpgrade as upgrade:
                # Upgrades are off: the request is plain HTTP, and what follows its headers is its body.
                self.parser = httptools.HttpRequestParser(self)
                offset = upgrade.args[0] if upgrade.args else len(data)
                rest = data[offset:]
                if self._body_left > 0:
                    self._raw_body(rest)
                elif rest:
                    self.data_received(rest)

        def _raw_body(self, data: bytes) -> None:
            chunk, rest = data[: self._body_left], data[self._body_left :]
            self._body_left -= len(chunk)
            if chunk:
                self.on_body(chunk)
            if self._body_left == 0:
                super().on_message_complete()
                if rest:
                    self.data_received(rest)

        def _await_headers(self) -> None:
            """Start the header clock. One timer serves every request of a kept-alive connection: it is not
            cancelled when headers complete, and on firing it looks at the deadline of the request then awaited
            (if any), so a request costs no timer of its own."""
            self._header_deadline = self.loop.time() + header_timeout
            if self._header_timer is None:
                self._header_timer = self.loop.call_at(self._header_deadline, self._headers_due)

        def _headers_due(self) -> None:
            self._header_timer = None
            deadline = self._header_deadline
            if deadline is None:
                return  # no request awaited: the next one starts the clock again
            if self.loop.time() + _TIMER_SLACK < deadline:
                self._header_timer = self.loop.call_at(deadline, self._headers_due)
            else:
                self._headers_too_slow()

        def _disarm_header_timer(self) -> None:
            if self._header_timer is not None:
                self._header_timer.cancel()
                self._header_timer = None

        def _headers_too_slow(self) -> None:
            self._header_deadline = None
            if not self.transport.is_closing():
                self.transport.close()

    return GuardedHttpToolsProtocol


def _content_length(headers: list[tuple[bytes, bytes]]) -> int:
    for name, value in headers:
        if name == b"content-length":
            return int(value) if value.isdigit() else 0
    return 0
