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

Requests read whole, without ASGI.  Given the front end's :class:`~ferrymq.frontend.asgi.Gateway`, a POST whose
declared body is within ``Gateway.direct_limit`` (what a server buffers anyway), on a connection within the cap,
without ``Expect: 100-continue``, an upgrade or a transfer encoding, to a path ``Gateway.serves_read`` takes, is
not started as an ASGI task when its headers are parsed, and uvicorn makes no cycle for it: it gets a
:class:`DirectCycle`, which holds the state uvicorn's protocol reads of a request's cycle and none of the ASGI
parts, and its headers as the front end reads them, made in the same pass that decides the way (uvicorn's scope is
made only for a request that goes the ASGI way). Once its body is whole (with the headers, or in later packets:
many clients send it apart), ``Gateway.answer_read`` answers it from one task and the answer is written here, as
uvicorn's cycle would write it (its default headers, lower-case names, ``content-length``, ``connection: close``
when the connection is not kept alive); the cycle is completed as uvicorn's ``send`` would complete it, so
keep-alive, pipelining, flow control and the graceful stop go on as they do for every request (a request pipelined
behind one under way goes the ASGI way, as uvicorn starts it later). A body that does not arrive within
``Gateway.body_timeout`` gets the ASGI app's answer to that (``Gateway.answer_unread``), and the connection is
closed. Such a body is within what the ASGI app would buffer without charging the budget, so no other limit of the
app's applies to it.
"""

from __future__ import annotations

import asyncio
from collections import Counter
from typing import TYPE_CHECKING, Any
from urllib.parse import unquote

import httptools
from uvicorn.protocols.http.flow_control import HIGH_WATER_LIMIT
from uvicorn.protocols.http.httptools_impl import (
    HEADER_VALUE_RE,
    STATUS_LINE,
    HttpToolsProtocol,
    RequestResponseCycle,
)

from ferrymq.clock import fired_early
from ferrymq.frontend.http import HttpRequest, headers_of
from ferrymq.frontend.transport_limits import OVER_CLIENT_CAP

if TYPE_CHECKING:
    from ferrymq.frontend.asgi import Gateway
    from ferrymq.protocol.responses import HttpResponse


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

    __slots__ = ("_loop", "_out", "_transport", "is_closing")

    def __init__(self, transport: asyncio.Transport) -> None:
        self._transport = transport
        self._loop = asyncio.get_running_loop()
        self._out: list[bytes] = []
        # Asked at least twice per request: bound here rather than found by ``__getattr__`` after a miss.
        self.is_closing = transport.is_closing

    def write(self, data: bytes) -> None:
        if not self._out:
            self._loop.call_soon(self._flush)
        self._out.append(data)

    def _flush(self) -> None:
        out, self._out = self._out, []
        if out and not self._transport.is_closing():
            self._transport.write(out[0] if len(out) == 1 else b"".join(out))

    def write_now(self, data: bytes) -> None:
        """``data`` at once when nothing is gathered (else after what is, in order): for a writer that already
        made a response one piece, and has nothing to gain from waiting for the turn's end."""
        if self._out:
            self._out.append(data)
        elif not self._transport.is_closing():
            self._transport.write(data)

    def close(self) -> None:
        self._flush()
        self._transport.close()

    def __getattr__(self, name: str) -> Any:
        return getattr(self._transport, name)


class _NoEvent:
    """The event of a :class:`DirectCycle`: set by uvicorn as it sets a cycle's, awaited by nobody."""

    __slots__ = ()

    def set(self) -> None:
        pass

    def clear(self) -> None:
        pass

    def is_set(self) -> bool:
        return False


class DirectCycle(RequestResponseCycle):
    """uvicorn's cycle for a request answered directly: the state that uvicorn's protocol (body, flow control,
    keep-alive, pipelining, a lost connection, the graceful stop) and the cycle's own ``send`` (uvicorn's 500)
    read, without what only the ASGI way uses: its receive event (nobody awaits it: the app's ``receive`` is
    never called), and its scope, built only should ``send`` need it. The state a cycle starts with is given
    here as class attributes, so a request sets only what is its own. The path is as sent (percent-encoded, as
    the signature covers it), the method POST."""

    disconnected = False
    waiting_for_100_continue = False  # never: such a request does not expect 100-continue
    more_body = True
    response_started = False
    response_complete = False
    chunked_encoding: bool | None = None
    expected_content_length = 0
    message_event = _NoEvent()  # type: ignore[assignment]

    def __init__(self, protocol: HttpToolsProtocol, path: str, query_string: str,
                 raw_headers: list[tuple[bytes, bytes]], headers: dict[str, str], http_version: str, *,
                 keep_alive: bool) -> None:
        self.protocol = protocol
        self.transport = protocol.transport
        self.flow = protocol.flow
        self.logger = protocol.logger
        self.access_logger = protocol.access_logger
        self.access_log = protocol.access_log
        self.default_headers = protocol.server_state.default_headers
        self.on_response = protocol.on_response_complete
        self.keep_alive = keep_alive
        self.body = bytearray()
        self.path = path
        self.query_string = query_string
        self.raw_headers = raw_headers
        self.headers = headers
        self.http_version = http_version

    @property  # type: ignore[override]
    def scope(self) -> Any:
        """The ASGI scope uvicorn would have made, for its ``send`` (which reads the method, and for its access
        log the client, path and HTTP version)."""
        protocol = self.protocol
        return {"type": "http", "http_version": self.http_version, "server": protocol.server,
                "client": protocol.client, "scheme": protocol.scheme,
                "root_path": "", "headers": self.raw_headers, "method": "POST", "path": unquote(self.path),
                "raw_path": self.path.encode("ascii"), "query_string": self.query_string.encode("latin-1")}


def _answered() -> None:
    """A cycle's ``on_response`` once its answer is made (as uvicorn's cycle sets it): nothing more to do."""


def guarded_protocol(header_timeout: float, max_per_client: int,
                     gateway: Gateway | None = None) -> type[HttpToolsProtocol]:
    """A protocol class for ``uvicorn.Config(http=...)`` whose connections share one per-client count; with
    ``gateway``, the requests it can answer from their whole body are answered without ASGI."""
    connections = ClientConnections(max_per_client)

    class GuardedHttpToolsProtocol(HttpToolsProtocol):
        _header_timer: asyncio.TimerHandle | None = None
        # When the headers being awaited must be complete (loop time); None while none are awaited.
        _header_deadline: float | None = None
        _client_address: str | None = None
        _over_cap = False
        _body_left = 0
        # The cycle of a request answered directly whose body is still being read: started once it is whole.
        _deferred: DirectCycle | None = None
        # Set while such a body is awaited beyond the bytes that came with its headers: the body timeout.
        _body_timer: asyncio.TimerHandle | None = None
        # When the connection went idle after its last answer (loop time); None while a request is under way.
        _idle_since: float | None = None

        def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
            super().connection_made(transport)
            self.transport = CoalescingTransport(transport)  # type: ignore[assignment]
            if self.client is not None:
                self._client_address = self.client[0]
                self._over_cap = not connections.opened(self._client_address)
            self._await_headers()

        def connection_lost(self, exc: Exception | None) -> None:
            self._disarm_header_timer()
            if self.timeout_keep_alive_task is not None:
                self.timeout_keep_alive_task.cancel()
                self.timeout_keep_alive_task = None
            self._deferred = None
            if self._body_timer is not None:
                self._body_timer.cancel()
                self._body_timer = None
            if self._client_address is not None:
                connections.closed(self._client_address)
                self._client_address = None
            super().connection_lost(exc)

        def on_message_begin(self) -> None:
            # uvicorn's, but for its scope: a request answered directly never reads one, so it is made only for a
            # request that goes the ASGI way (``_start_scope``).
            self.url = b""
            self.expect_100_continue = False
            self.headers = []
            if self._header_deadline is None:
                self._await_headers()

        def _start_scope(self) -> None:
            """The scope uvicorn's ``on_message_begin`` makes, which its ``on_headers_complete`` completes."""
            scope: Any = {
                "type": "http",
                "asgi": {"version": self.asgi_version, "spec_version": "2.3"},
                "http_version": "1.1",
                "server": self.server,
                "client": self.client,
                "scheme": self.scheme,
                "root_path": self.root_path,
                "headers": self.headers,
                "state": self.app_state.copy(),
            }
            if self._over_cap:
                scope["extensions"] = {OVER_CLIENT_CAP: True}
            self.scope = scope

        def on_headers_complete(self) -> None:
            self._header_deadline = None
            headers = self._direct_headers()
            if headers is not None and self._start_direct(headers):
                self._body_left = 0
                return
            self._start_scope()
            super().on_headers_complete()
            # A request without an upgrade header is none (``_get_upgrade``).
            self._body_left = 0 if headers is not None or self._get_upgrade() is None \
                else _content_length(self.headers)

        def _start_direct(self, headers: dict[str, str]) -> bool:
            """What uvicorn's ``on_headers_complete`` does for a request that may be answered directly (a POST
            without an upgrade), with a :class:`DirectCycle` and no ASGI task: False, having done nothing, where
            it would not start the ASGI app's task at once (a request pipelined behind one under way, its
            concurrency limit reached), where the app it would start is not the front end's own (wrapped in
            middleware), for a root path, and for a path that is not ASCII (uvicorn refuses it) or that
            ``Gateway.serves_read`` does not take."""
            assert gateway is not None
            existing = self.cycle
            if (existing is not None and not existing.response_complete) or self.limit_concurrency is not None \
                    or self.app is not gateway.app or self.root_path:
                return False
            parsed = httptools.parse_url(self.url)
            raw_path = parsed.path
            if not raw_path or not raw_path.isascii():
                return False
            path = raw_path.decode("ascii")
            if not gateway.serves_read(path):
                return False
            http_version = self.parser.get_http_version()
            self.cycle = self._deferred = DirectCycle(
                self, path, (parsed.query or b"").decode("latin-1"), self.headers, headers, http_version,
                keep_alive=http_version != "1.0" and self.parser.should_keep_alive(),
            )
            return True

        def _direct_headers(self) -> dict[str, str] | None:
            """The headers just parsed as the pipeline reads them (``headers_of``), where their request can be
            answered without ASGI, its path aside; None where it cannot: the pipeline's headers are what the checks
            read, so the raw ones are walked once."""
            if gateway is None or self._over_cap or self.expect_100_continue or self.parser.get_method() != b"POST":
                return None
            headers = headers_of(self.headers)
            # A second length would be joined to the first by a comma, no longer digits (llhttp refuses it anyway).
            length = headers.get("content-length")
            if length is None or not length.isdigit() or int(length) > gateway.direct_limit \
                    or "transfer-encoding" in headers or "upgrade" in headers:
                return None
            return headers

        def on_body(self, body: bytes) -> None:
            cycle = self._deferred
            if cycle is None:
                super().on_body(body)
                return
            # uvicorn's, for a request answered directly: it asks for no upgrade, its answer comes once its body
            # is whole, and its cycle's event is awaited by nobody.
            cycle.body += body
            if len(cycle.body) > HIGH_WATER_LIMIT:
                self.flow.pause_reading()

        def on_message_complete(self) -> None:
            if self._body_left > 0:
                return  # an upgrade request's body is still to come, raw (see data_received)
            cycle = self._deferred
            if cycle is None:
                super().on_message_complete()
                return
            cycle.more_body = False
            self._deferred = None
            if self._body_timer is not None:
                self._body_timer.cancel()
                self._body_timer = None
            task = self.loop.create_task(self._answer_directly(cycle))
            task.add_done_callback(self.tasks.discard)
            self.tasks.add(task)

        async def _answer_directly(self, cycle: DirectCycle) -> None:
            """What ``cycle.run_asgi`` does for the ASGI app, for a request read whole: the answer, or uvicorn's
            500 (and its log line) should the front end raise."""
            assert gateway is not None
            try:
                response = await gateway.answer_read(self._request_of(cycle, bytes(cycle.body)))
                if cycle.flow.write_paused and not cycle.disconnected:
                    await cycle.flow.drain()
                if not cycle.disconnected:
                    self._write_response(cycle, response)
            except BaseException as exc:
                self.logger.error("Exception in ASGI application\n", exc_info=exc)
                if not cycle.response_started:
                    await cycle.send_500_response()
                else:
                    self.transport.close()
            finally:
                cycle.on_response = _answered

        def _request_of(self, cycle: DirectCycle, body: bytes) -> HttpRequest:
            client = self.client
            return HttpRequest("POST", cycle.path, cycle.query_string, cycle.headers, body,
                               self.scheme or "http", client[0] if client else None)

        def _write_response(self, cycle: DirectCycle, response: HttpResponse) -> None:
            """The answer in one write, as uvicorn's cycle writes an ASGI app's start and body messages."""
            body = response.body
            content = [STATUS_LINE[response.status]]
            for name, value in self.server_state.default_headers:
                content += (name, b": ", value, b"\r\n")
            for text_name, text_value in response.headers:
                value = text_value.encode("latin-1")
                if HEADER_VALUE_RE.search(value):
                    cycle.response_started = True
                    raise RuntimeError("Invalid HTTP header value.")
                content += (text_name.encode("latin-1").lower(), b": ", value, b"\r\n")
            content += (b"content-length: ", str(len(body)).encode(), b"\r\n")
            if not cycle.keep_alive:
                content.append(b"connection: close\r\n")
            content += (b"\r\n", body)
            cycle.response_started = True
            cycle.waiting_for_100_continue = False
            self.transport.write_now(b"".join(content))  # type: ignore[attr-defined]
            cycle.response_complete = True
            cycle.message_event.set()
            if not cycle.keep_alive:
                self.transport.close()
            cycle.on_response()

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
            if self._deferred is not None and self._body_timer is None and gateway is not None:
                # Its body is still to come (clients often send it apart from the headers): it must arrive within
                # the body timeout, as the ASGI app would have it.
                self._body_timer = self.loop.call_later(gateway.body_timeout, self._body_too_slow)

        def _body_too_slow(self) -> None:
            """The ASGI app's answer to a body that did not arrive in time, written as it writes it (the
            connection then closes: what is left of the body is never read)."""
            assert gateway is not None
            self._body_timer = None
            cycle, self._deferred = self._deferred, None
            if cycle is None or cycle.disconnected or cycle.response_complete:
                return
            cycle.keep_alive = False
            self._write_response(cycle, gateway.answer_unread(self._request_of(cycle, b"")))
            cycle.on_response = _answered

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
            if fired_early(self.loop, deadline):
                self._header_timer = self.loop.call_at(deadline, self._headers_due)
            else:
                self._headers_too_slow()

        # uvicorn's keep-alive timeout, with one timer per connection instead of one made after each answer and
        # cancelled by the next request's first bytes: the timer stays, and on firing looks at how long the
        # connection has been idle (as the header timer does).

        def _unset_keepalive_if_required(self) -> None:
            self._idle_since = None

        def on_response_complete(self) -> None:
            # uvicorn's, but for the timer.
            self.server_state.total_requests += 1
            if self.transport.is_closing():
                return
            self._idle_since = None
            self.flow.resume_reading()
            if self.pipeline:
                cycle, app = self.pipeline.pop()
                self._start_asgi_task(cycle, app)
            else:
                self._idle_since = self.loop.time()
                if self.timeout_keep_alive_task is None:
                    self.timeout_keep_alive_task = self.loop.call_later(self.timeout_keep_alive, self._idle_due)

        def _idle_due(self) -> None:
            self.timeout_keep_alive_task = None
            since = self._idle_since
            if since is None:
                return  # a request is under way: its answer starts the clock again
            deadline = since + self.timeout_keep_alive
            if fired_early(self.loop, deadline):
                self.timeout_keep_alive_task = self.loop.call_at(deadline, self._idle_due)
            else:
                self.timeout_keep_alive_handler()

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
