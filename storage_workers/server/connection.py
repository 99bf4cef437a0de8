"""The worker RPC's transport: one coroutine per client connection, reading frames and queuing replies.

Requests are read in chunks and handed to ``dispatch`` synchronously, in arrival order; replies are queued
on the :class:`Connection` and go out in one write per event-loop turn, however many became ready in it.
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

READ_CHUNK = 256 * 1024
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


async def serve_connection(
    reader: asyncio.StreamReader,
    writer: asyncio.StreamWriter,
    dispatch: Dispatch,
    registry: set[Connection],
    auth: PeerAuth | None = None,
) -> None:
    """Serve one accepted connection until the client closes it or sends something that is not a frame."""
    sock = writer.get_extra_info("socket")
    if sock is not None:
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    if auth is not None and not await auth.verify_client(reader, writer):
        log.info("refused a worker RPC connection from %s: no cluster secret", writer.get_extra_info("peername"))
        # abort: nothing queued may go out after a failed proof.
        writer.transport.abort()
        return
    transport = writer.transport
    conn = Connection(transport, asyncio.get_running_loop())
    registry.add(conn)
    decoder = FrameDecoder()
    try:
        while True:
            data = await reader.read(READ_CHUNK)
            if not data:
                break
            for request_id, op, payload in decoder.feed(data):
                dispatch(conn, request_id, op, payload)
            if transport.get_write_buffer_size() > _WRITE_HIGH_WATER:
                await writer.drain()
    except (OSError, FrameError) as exc:
        log.debug("connection closed: %s", exc)
    finally:
        conn.closed = True
        conn.cancel_tasks()
        registry.discard(conn)
        writer.close()
