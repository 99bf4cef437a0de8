"""The worker RPC's transport: one protocol object per client connection, decoding frames and queuing replies.

Requests are decoded as the bytes arrive (:class:`WorkerProtocol`, a plain ``asyncio.Protocol``: no stream
reader, and no task woken per read) and handed to ``dispatch`` synchronously, in arrival order; replies are
queued on the :class:`Connection` and go out in one write per event-loop turn, however many became ready in it.
With a :class:`~ferrymq.rpc.peer_auth.PeerAuth`, nothing is read as a request until the client has passed its
handshake; a client that does not is disconnected without an answer.
"""

from __future__ import annotations

import asyncio
import logging
import socket
from collections.abc import Callable
from typing import Any, Protocol

from ferrymq.rpc.framing import FrameDecoder, FrameError
from ferrymq.rpc.peer_auth import PeerAuth

log = logging.getLogger(__name__)

_WRITE_HIGH_WATER = 8 * 1024 * 1024

Dispatch = Callable[["Connection", int, int, bytes], None]
"""``dispatch(connection, request_id, op, payload)``: handle one request; the reply goes to the connection."""


class Cancellable(Protocol):
    """Work held on behalf of a connection: a task, or a parked request that drops itself when cancelled."""

    def cancel(self) -> Any: ...


class Connection:
    """One client connection: replies are queued and written once per event-loop turn."""

    __slots__ = ("closed", "loop", "out", "scheduled", "tasks", "transport")

    def __init__(self, transport: asyncio.WriteTransport, loop: asyncio.AbstractEventLoop) -> None:
        self.transport = transport
        self.loop = loop
        self.out: list[bytes] = []
        self.scheduled = False
        self.closed = False
        self.tasks: set[Cancellable] = set()
        """Long polls and parked fetches waiting on behalf of this connection: cancelled when it closes."""

    def write(self, frame: bytes) -> None:
        if self.closed:
            return
        self.out.append(frame)
        if not self.scheduled:
            self.scheduled = True
            self.loop.call_soon(self.flush)

    def flush(self) -> None:
        self.scheduled = False
        out, self.out = self.out, []
        if out and not self.closed:
            self.transport.write(out[0] if len(out) == 1 else b"".join(out))

    def start(self, task: asyncio.Task[None]) -> None:
        """Tie ``task`` to this connection: it is cancelled when the connection goes."""
        self.tasks.add(task)
        task.add_done_callback(self.tasks.discard)

    def hold(self, waiter: Cancellable) -> None:
        """Tie ``waiter`` to this connection until :meth:`release`: it is cancelled if the connection goes first."""
        self.tasks.add(waiter)

    def release(self, waiter: Cancellable) -> None:
        self.tasks.discard(waiter)

    def cancel_tasks(self) -> None:
        for task in list(self.tasks):
            task.cancel()


class WorkerProtocol(asyncio.Protocol):
    """One accepted connection: frames are decoded as the bytes arrive and handed to ``dispatch`` in the same
    callback (no stream reader, no task step per read).  With ``auth``, the handshake runs first, in a task fed
    by :meth:`data_received`; bytes that follow the client's proof are kept and read as frames once it passed.

    While more than ``_WRITE_HIGH_WATER`` bytes of replies wait to be sent, nothing more is read: a client
    that stops reading its answers stops being served."""

    def __init__(self, dispatch: Dispatch, registry: set[Connection], auth: PeerAuth | None = None) -> None:
        self._dispatch = dispatch
        self._registry = registry
        self._auth = auth
        self._conn: Connection | None = None
        self._transport: asyncio.Transport | None = None
        self._decoder = FrameDecoder()
        self._handshake: _HandshakeReader | None = None
        self._reading_paused = False
        self._verifying: asyncio.Task[None] | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self._transport = transport  # type: ignore[assignment]  # uvloop's transports are not asyncio's classes
        sock = transport.get_extra_info("socket")
        if sock is not None:
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        if self._auth is None:
            self._serve()
            return
        self._handshake = _HandshakeReader()
        self._verifying = asyncio.get_running_loop().create_task(self._verify(self._auth, self._handshake))

    async def _verify(self, auth: PeerAuth, reader: _HandshakeReader) -> None:
        transport = self._transport
        assert transport is not None
        if not await auth.verify_client(reader, transport):  # type: ignore[arg-type]
            log.info("refused a worker RPC connection from %s: no cluster secret", transport.get_extra_info("peername"))
            # abort: nothing queued may go out after a failed proof.
            transport.abort()
            return
        if transport.is_closing():
            return
        self._handshake = None
        self._serve()
        if reader.buffer:
            self.data_received(bytes(reader.buffer))

    def _serve(self) -> None:
        assert self._transport is not None
        self._conn = Connection(self._transport, asyncio.get_running_loop())
        self._registry.add(self._conn)

    def data_received(self, data: bytes) -> None:
        conn = self._conn
        if conn is None:
            if self._handshake is not None:
                self._handshake.feed(data)
            return
        try:
            frames = self._decoder.feed(data)
        except FrameError as exc:
            log.debug("connection closed: %s", exc)
            self._end()
            return
        dispatch = self._dispatch
        for request_id, op, payload in frames:
            dispatch(conn, request_id, op, payload)
        transport = conn.transport
        if transport.get_write_buffer_size() > _WRITE_HIGH_WATER and not self._reading_paused:
            self._reading_paused = True
            transport.pause_reading()  # type: ignore[attr-defined]

    def pause_writing(self) -> None:
        pass

    def resume_writing(self) -> None:
        if self._reading_paused and self._conn is not None and not self._conn.closed:
            self._reading_paused = False
            self._conn.transport.resume_reading()  # type: ignore[attr-defined]

    def eof_received(self) -> bool:
        """The client closed its side: no more replies go to it (the transport then closes)."""
        if self._handshake is not None:
            self._handshake.feed_eof()
        self._end()
        return False

    def connection_lost(self, exc: Exception | None) -> None:
        if exc is not None:
            log.debug("connection closed: %s", exc)
        if self._handshake is not None:
            self._handshake.feed_eof()
        self._end()

    def _end(self) -> None:
        """What leaving the connection takes: its waiting work cancelled, the transport closed (what was
        queued for it still goes out)."""
        conn, self._conn = self._conn, None
        if conn is not None:
            conn.closed = True
            conn.cancel_tasks()
            self._registry.discard(conn)
        if self._transport is not None:
            self._transport.close()


class _HandshakeReader:
    """``readexactly`` over the bytes a connection received before its handshake passed, for
    :meth:`PeerAuth.verify_client`; what the handshake did not read stays in ``buffer``."""

    __slots__ = ("buffer", "eof", "waiter")

    def __init__(self) -> None:
        self.buffer = bytearray()
        self.eof = False
        self.waiter: asyncio.Future[None] | None = None

    def feed(self, data: bytes) -> None:
        self.buffer += data
        self._wake()

    def feed_eof(self) -> None:
        self.eof = True
        self._wake()

    def _wake(self) -> None:
        waiter, self.waiter = self.waiter, None
        if waiter is not None and not waiter.done():
            waiter.set_result(None)

    async def readexactly(self, n: int) -> bytes:
        while len(self.buffer) < n:
            if self.eof:
                raise asyncio.IncompleteReadError(bytes(self.buffer), n)
            self.waiter = asyncio.get_running_loop().create_future()
            await self.waiter
        data = bytes(self.buffer[:n])
        del self.buffer[:n]
        return data
