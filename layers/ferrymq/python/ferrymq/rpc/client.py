"""``WorkerClient``: one persistent, pipelined connection from the front end to one storage worker.

Any number of coroutines may call it at once: each request gets an id, goes out in the next write (requests
made in the same event-loop turn share one ``send``), and waits on a future that the connection's reader
resolves when the response with that id arrives, in whatever order the worker answers.  Plain sends to one
queue made in the same turn go as one SEND (:mod:`.send_groups`).

Every request has a deadline (``request_timeout``, plus the wait of a long poll).  A worker that misses one
is hung rather than dead (a dead one closes the connection), so the request fails with :class:`WorkerTimeout`
and the connection is dropped with every request still on it: the next call connects afresh.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import math
import socket
from collections.abc import Awaitable, Callable
from typing import Any, TypeGuard

from ferrymq.clock import fired_early
from ferrymq.errors import InternalError, ServiceUnavailable
from ferrymq.logs import REQUEST_ID
from ferrymq.rpc import shapes
from ferrymq.rpc.codec import pack, unpack, unpack_error
from ferrymq.rpc.framing import (
    MAX_TRACE,
    STATUS_OK,
    FrameDecoder,
    FrameError,
    Op,
    encode_frame,
    encode_traced_frame,
)
from ferrymq.rpc.peer_auth import PeerAuth, PeerAuthFailed
from ferrymq.rpc.send_groups import MAX_IN_FLIGHT, SendGroup, bodies_size

_READ_CHUNK = 256 * 1024
_WRITE_HIGH_WATER = 4 * 1024 * 1024

DEFAULT_REQUEST_TIMEOUT = 5.0


class WorkerTimeout(ServiceUnavailable):
    """A storage worker did not answer a request before its deadline."""


class WorkerUnreachable(ServiceUnavailable):
    """No connection to the storage worker could be made: the request was never sent."""


class WorkerConnectionLost(ServiceUnavailable):
    """The connection to the storage worker was lost with the request on it: its outcome is unknown."""


class _Connection:
    """One TCP connection and the requests outstanding on it; dead for good once lost."""

    __slots__ = ("_deferred", "_flush_scheduled", "_loop", "_next_id", "_out", "_pending", "_reader_task", "_timer",
                 "_timer_at", "lost", "where", "writer")

    @property
    def loop(self) -> asyncio.AbstractEventLoop:
        """The event loop the connection runs on."""
        return self._loop

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, where: str) -> None:
        self._loop = asyncio.get_running_loop()
        self.writer = writer
        self.where = where
        self.lost = False
        # Each outstanding request's future (or the send group its answer goes to), its deadline (loop time) and
        # its timeout.
        self._pending: dict[int, tuple[asyncio.Future[tuple[int, bytes]] | SendGroup, float, float]] = {}
        # One timer for the connection, not one made and cancelled per request: it is due at the earliest deadline
        # it was armed for (``_timer_at``), and on firing looks at the deadlines then pending.
        self._timer: asyncio.TimerHandle | None = None
        self._timer_at = math.inf
        self._next_id = 0
        self._out: list[bytes | Callable[[], bytes]] = []
        self._deferred = False
        """Whether ``_out`` holds a frame to build when written (``request_built``)."""
        self._flush_scheduled = False
        self._reader_task = self._loop.create_task(self._read_loop(reader))

    def request(self, op: int, payload: bytes, timeout: float) -> asyncio.Future[tuple[int, bytes]]:
        return self._request(op, payload, timeout)

    def request_built(self, op: int, build: Callable[[], bytes], timeout: float, answer_to: SendGroup) -> None:
        """A request whose payload ``build`` makes when its frame is written, later in this turn: until then,
        what it holds may still grow (:mod:`.send_groups`). Its answer, or failure, goes to ``answer_to`` (which
        takes a future's ``set_result`` and ``set_exception``) as it comes, without a future in between."""
        self._request(op, build, timeout, answer_to)

    def _request(self, op: int, payload: bytes | Callable[[], bytes], timeout: float,
                 answer_to: SendGroup | None = None) -> asyncio.Future[tuple[int, bytes]]:
        if self.lost:
            raise WorkerConnectionLost(f"connection to storage worker {self.where} lost")
        request_id = self._next_id = (self._next_id + 1) & 0xFFFFFFFF
        fut: Any = self._loop.create_future() if answer_to is None else answer_to
        deadline = self._loop.time() + timeout
        self._pending[request_id] = (fut, deadline, timeout)
        if deadline < self._timer_at:
            self._arm(deadline)
        trace = REQUEST_ID.get()
        # The front end's request id, so the worker's log lines about this call name it (rpc/framing.py).
        traced = None if trace is None else trace.encode("ascii", "replace")[:MAX_TRACE]
        if type(payload) is bytes:
            self._out.append(_frame(request_id, op, traced, payload))
        else:
            self._deferred = True
            self._out.append(functools.partial(_built_frame, request_id, op, traced, payload))
        if not self._flush_scheduled:
            self._flush_scheduled = True
            self._loop.call_soon(self._flush)
        return fut

    def _flush(self) -> None:
        self._flush_scheduled = False
        out, self._out = self._out, []
        if self._deferred:
            self._deferred = False
            out = self._build(out)
        if not self.lost and out:
            self.writer.write(out[0] if len(out) == 1 else b"".join(out))  # type: ignore[arg-type]

    def _build(self, out: list[Any]) -> list[bytes]:
        """The frames of ``out``, the deferred ones built now; one that cannot be built fails its request alone."""
        frames = []
        for frame in out:
            if type(frame) is bytes:
                frames.append(frame)
                continue
            try:
                frames.append(frame())
            except Exception as exc:
                entry = self._pending.pop(frame.args[0], None)
                if entry is not None and not entry[0].done():
                    entry[0].set_exception(InternalError(f"The request could not be encoded: {exc}"))
        return frames

    async def drain_if_needed(self, timeout: float) -> None:
        """Wait for the write buffer to empty, at most ``timeout`` seconds: a worker that stopped reading
        would otherwise hold the writer here for good."""
        try:
            await asyncio.wait_for(self.writer.drain(), timeout)
        except TimeoutError:
            self._lose(f"connection to storage worker {self.where} dropped: it took no data for {timeout:g} s")
            raise WorkerTimeout(f"Storage worker {self.where} took no request for {timeout:g} s.") from None
        except (OSError, RuntimeError) as exc:
            self._lose(f"write failed: {exc}")

    def _arm(self, deadline: float) -> None:
        if self._timer is not None:
            self._timer.cancel()
        self._timer_at = deadline
        self._timer = self._loop.call_at(deadline, self._deadlines_due)

    def _deadlines_due(self) -> None:
        """The timer fired: the request with the earliest deadline fails if that deadline has passed (which drops
        the connection and every request on it), else the timer is armed again for it."""
        self._timer, self._timer_at = None, math.inf
        earliest, due = math.inf, None
        for request_id, (_, deadline, timeout) in self._pending.items():
            if deadline < earliest:
                earliest, due = deadline, (request_id, timeout)
        if due is None:
            return
        if fired_early(self._loop, earliest):
            self._arm(earliest)
        else:
            self._expire(*due)

    def _expire(self, request_id: int, timeout: float) -> None:
        entry = self._pending.pop(request_id, None)
        if entry is None:
            return
        fut = entry[0]
        if not fut.done():
            fut.set_exception(WorkerTimeout(f"Storage worker {self.where} did not answer within {timeout:g} s."))
        # Whatever else is queued on this socket waits behind the same silent worker.
        self._lose(f"connection to storage worker {self.where} dropped: a request went unanswered for {timeout:g} s")

    async def _read_loop(self, reader: asyncio.StreamReader) -> None:
        decoder = FrameDecoder()
        pending = self._pending
        reason = f"connection to storage worker {self.where} closed"
        try:
            while True:
                data = await reader.read(_READ_CHUNK)
                if not data:
                    break
                for request_id, status, payload in decoder.feed(data):
                    # A reply to a request whose deadline passed finds nothing here and is dropped.
                    entry = pending.pop(request_id, None)
                    if entry is not None:
                        fut = entry[0]
                        if not fut.done():
                            fut.set_result((status, payload))
        except (OSError, FrameError) as exc:
            reason = f"connection to storage worker {self.where} lost: {exc}"
        finally:
            self._lose(reason)

    def _lose(self, reason: str) -> None:
        if not self.lost:
            self.lost = True
            # abort, not close: close would first flush the write buffer, which a hung worker never takes.
            self.writer.transport.abort()
        if self._timer is not None:
            self._timer.cancel()
            self._timer, self._timer_at = None, math.inf
        pending, self._pending = self._pending, {}
        for fut, _, _ in pending.values():
            if not fut.done():
                fut.set_exception(WorkerConnectionLost(reason))

    async def close(self) -> None:
        self._lose("client closed")
        self._reader_task.cancel()
        with contextlib.suppress(asyncio.CancelledError, Exception):
            await self._reader_task
        with contextlib.suppress(OSError, RuntimeError):
            await self.writer.wait_closed()


def _frame(request_id: int, op: int, traced: bytes | None, payload: bytes) -> bytes:
    if traced is None:
        return encode_frame(request_id, op, payload)
    return encode_traced_frame(request_id, op, traced, payload)


def _built_frame(request_id: int, op: int, traced: bytes | None, build: Callable[[], bytes]) -> bytes:
    return _frame(request_id, op, traced, build())


class WorkerClient:
    """Talks to one storage worker at ``host:port`` (about any of the partitions it serves); reconnects on the
    next call after the connection drops, until :meth:`close`, after which every call raises
    ServiceUnavailable.  With ``auth``, every connection first passes the cluster-secret handshake."""

    def __init__(
        self,
        host: str,
        port: int,
        *,
        connect_timeout: float = 5.0,
        request_timeout: float = DEFAULT_REQUEST_TIMEOUT,
        auth: PeerAuth | None = None,
    ) -> None:
        self.host = host
        self.port = port
        self._auth = auth
        self._connect_timeout = connect_timeout
        self._request_timeout = request_timeout
        self._conn: _Connection | None = None
        self._connecting: asyncio.Future[_Connection] | None = None
        self._closed = False
        self._send_groups: dict[tuple[int, str, int], SendGroup] = {}
        """Per (partition, queue, retention), the group of plain sends whose SEND is not written yet."""
        self._in_flight: dict[tuple[int, str, int], list[int]] = {}
        """Per key with SENDs of groups written and not answered yet: how many, and how many messages the last
        group written held."""
        self._held: dict[tuple[int, str, int], SendGroup] = {}
        """Per key, the group held until a SEND in flight for the key is answered."""

    def __repr__(self) -> str:
        return f"WorkerClient({self.host!r}, {self.port})"

    # --- connection --------------------------------------------------------------------------------

    async def connect(self) -> None:
        await self._connection()

    @property
    def closed(self) -> bool:
        return self._closed

    async def close(self) -> None:
        # For good: a caller still holding this client after it was replaced must not reconnect to an
        # address nobody would close again.
        self._closed = True
        connecting, self._connecting = self._connecting, None
        if connecting is not None and not connecting.done():
            connecting.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await connecting
        held, self._held = self._held, {}
        for group in held.values():
            group.fail(WorkerUnreachable(f"The client for storage worker {self.host}:{self.port} is closed."))
        conn, self._conn = self._conn, None
        if conn is not None:
            await conn.close()

    async def _connection(self) -> _Connection:
        conn = self._conn
        if conn is not None and not conn.lost:
            return conn
        if self._closed:
            raise WorkerUnreachable(f"The client for storage worker {self.host}:{self.port} is closed.")
        if self._connecting is None:
            self._connecting = asyncio.ensure_future(self._open())
        connecting = self._connecting
        try:
            return await asyncio.shield(connecting)
        finally:
            if connecting.done() and self._connecting is connecting:
                self._connecting = None

    async def _open(self) -> _Connection:
        where = f"{self.host}:{self.port}"
        try:
            reader, writer = await asyncio.wait_for(
                asyncio.open_connection(self.host, self.port), self._connect_timeout
            )
        except (OSError, TimeoutError) as exc:
            raise WorkerUnreachable(f"Storage worker {where} cannot be reached: {exc or 'timed out'}") from None
        sock = writer.get_extra_info("socket")
        if sock is not None:
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        if self._auth is not None:
            try:
                await self._auth.prove_to_server(reader, writer, where)
            except PeerAuthFailed as exc:
                writer.transport.abort()
                raise WorkerUnreachable(exc.message) from None
        self._conn = conn = _Connection(reader, writer, where)
        return conn

    async def _ready_connection(self) -> _Connection:
        """The connection, made if there is none, once its write buffer is below the high-water mark."""
        conn = self._conn
        if conn is None or conn.lost:
            return await self._connection()
        if conn.writer.transport.get_write_buffer_size() > _WRITE_HIGH_WATER:
            await conn.drain_if_needed(self._request_timeout)
        return conn

    async def _call(self, op: int, args: Any, wait: float = 0.0) -> Any:
        """Send one request and wait for its answer, at most ``wait`` plus the request timeout seconds."""
        conn = await self._ready_connection()
        status, payload = await conn.request(op, pack(args), wait + self._request_timeout)
        if status == STATUS_OK:
            return unpack(payload)
        raise unpack_error(payload)

    # --- operations ---------------------------------------------------------------------------------
    # Every operation but ``ping`` names the partition it is about (the first element of the request); a
    # worker that does not serve it answers NotLeader and does nothing.

    async def ping(self) -> dict:
        """The worker's identity and, under ``"partitions"``, the status of every partition it serves."""
        return await self._call(Op.PING, [])

    async def send(
        self,
        partition: int,
        queue_id: str,
        messages: list[dict],
        *,
        retention_seconds: int,
        fifo: bool = False,
        resend: bool = False,
    ) -> list[dict]:
        """Store messages; each result is ``{"id", "sent_ts"}``, plus ``"seq"`` (FIFO) and ``"duplicate"`` (FIFO or
        handed-over messages).

        FIFO messages carry ``"group"`` and ``"dedup_id"``.  A message may carry ``"origin"`` (a map with
        ``shapes.ORIGIN_FIELDS``) when it is handed over from another queue.  FIFO and handed-over messages are
        stored idempotently by id: a resend within five minutes stores nothing and gets the original's result,
        with ``"duplicate": True``.  Plain messages of a standard queue are checked only when ``resend`` says
        this repeats a send whose outcome is unknown: those the worker stored within the resend horizon, by id,
        are not stored again.
        """
        if not fifo and not resend and all(m.get("origin") is None for m in messages):
            # Plain messages, sent with the others of this turn for the same queue (:mod:`.send_groups`); here,
            # not in a coroutine of its own, as most messages take this way.
            key = (partition, queue_id, retention_seconds)
            size = bodies_size(messages)
            group = self._send_groups.get(key)
            if group is not None and group.takes(messages, size):
                return await group.join(messages, size)
            return await self._send_group(key, messages, size)
        args, stored = shapes.send_request(partition, queue_id, messages, retention_seconds, fifo, resend)
        return shapes.read_send_answer(await self._call(Op.SEND, args), stored, fifo)

    def _send_group(self, key: tuple[int, str, int], messages: list[dict], size: int) -> Awaitable[list[dict]]:
        """Start the next group of plain sends for ``key`` with ``messages``: its SEND is built when written, and
        written at once unless ``MAX_IN_FLIGHT`` SENDs for the key are on their way (then when one is answered)."""
        full = self._held.pop(key, None)
        if full is not None:
            self._release(key, full)  # it takes no more: it goes now, past the limit
        conn = self._conn
        group = self._send_groups[key] = SendGroup(*key, loop=None if conn is None else conn.loop)
        mine = group.join(messages, size)
        flying = self._in_flight.get(key)
        if flying is not None and flying[0] >= MAX_IN_FLIGHT and flying[1] > 1:
            self._held[key] = group
            return mine
        if _writable(conn):
            # The connection is ready (what ``_ready_connection`` returns at once): no coroutine to wait in.
            try:
                self._request_group(conn, key, group)
            except BaseException as exc:
                self._unsent(key, group, exc, mine)
                raise
            return mine
        return self._send_group_when_ready(key, group, mine)

    def _request_group(self, conn: _Connection, key: tuple[int, str, int], group: SendGroup) -> None:
        conn.request_built(Op.SEND, functools.partial(self._close_group, key, group), self._request_timeout, group)
        flying = self._in_flight.get(key)
        if flying is None:
            self._in_flight[key] = [1, 1]
        else:
            flying[0] += 1
        group.on_done = functools.partial(self._answered, key)

    def _answered(self, key: tuple[int, str, int]) -> None:
        flying = self._in_flight[key]
        flying[0] -= 1
        if not flying[0]:
            del self._in_flight[key]
        held = self._held.pop(key, None)
        if held is not None:
            self._release(key, held)

    def _release(self, key: tuple[int, str, int], group: SendGroup) -> None:
        """Write a held group's SEND (its callers await their own futures)."""
        conn = self._conn
        if _writable(conn):
            try:
                self._request_group(conn, key, group)
            except BaseException as exc:
                self._unsent(key, group, exc)
            return
        task = asyncio.get_running_loop().create_task(self._send_group_when_ready(key, group, None))
        task.add_done_callback(_retrieve)

    async def _send_group_when_ready(self, key: tuple[int, str, int], group: SendGroup,
                                     mine: asyncio.Future[list[dict]] | None) -> list[dict]:
        try:
            conn = await self._ready_connection()
            self._request_group(conn, key, group)
        except BaseException as exc:
            self._unsent(key, group, exc, mine)
            raise
        return [] if mine is None else await mine

    def _unsent(self, key: tuple[int, str, int], group: SendGroup, exc: BaseException,
                mine: asyncio.Future[list[dict]] | None = None) -> None:
        if self._send_groups.get(key) is group:
            del self._send_groups[key]
        if mine is not None:
            mine.cancel()  # its caller raises ``exc`` itself
        # Never written: whoever joined may try again as if it had not been sent.
        group.fail(exc if isinstance(exc, ServiceUnavailable) else WorkerUnreachable(
            f"The request to storage worker {self.host}:{self.port} was not sent."))

    def _close_group(self, key: tuple[int, str, int], group: SendGroup) -> bytes:
        """The group's payload, once no send may join it any more."""
        if self._send_groups.get(key) is group:
            del self._send_groups[key]
        flying = self._in_flight.get(key)
        if flying is not None:
            flying[1] = len(group.messages)
        return group.payload()

    async def receive(
        self,
        partition: int,
        queue_id: str,
        *,
        max_messages: int,
        visibility_timeout: int,
        wait_seconds: float,
        retention_seconds: int,
        fifo: bool = False,
        attempt_id: str | None = None,
        redrive: dict | None = None,
        max_in_flight: int | None = None,
        priority_levels: int = 1,
    ) -> list[dict]:
        """Receive messages; FIFO queues' messages also carry ``"seq"``, ``"group"`` and ``"dedup_id"``.

        ``attempt_id`` is the ReceiveRequestAttemptId (FIFO); ``redrive`` the source queue's redrive policy as
        ``{"max_receive_count", "dlq_queue_id", "dlq_partition", "dlq_fifo", "source_arn",
        "dlq_retention_seconds"}``; with ``max_in_flight`` or more messages in flight a short poll raises
        :class:`~ferrymq.errors.OverLimit` and a long poll returns nothing.  ``priority_levels``: the queue's
        ``FerryMQPriorityLevels`` (``ferrymq.priorities``), which the worker serves levels by.
        """
        options: dict[str, Any] = {}
        if fifo:
            options["fifo"] = True
        if attempt_id is not None:
            options["attempt_id"] = attempt_id
        if redrive is not None:
            options["redrive"] = redrive
        if max_in_flight is not None:
            options["max_in_flight"] = max_in_flight
        if priority_levels > 1:
            options["priority_levels"] = priority_levels
        args = shapes.receive_request(
            partition, queue_id, max_messages, visibility_timeout, wait_seconds, retention_seconds, options or None
        )
        return shapes.read_received(await self._call(Op.RECEIVE, args, wait=wait_seconds))

    async def delete(self, partition: int, queue_id: str, receipts: list[str]) -> list[tuple[str, str] | None]:
        rows = await self._call(Op.DELETE, shapes.DELETE.request(partition, queue_id, receipts))
        return [None if row is None else shapes.read_item_result(row) for row in rows]

    async def change_visibility(
        self, partition: int, queue_id: str, entries: list[tuple[str, int]]
    ) -> list[tuple[str, str] | None]:
        rows = await self._call(Op.CHANGE_VISIBILITY, shapes.CHANGE_VISIBILITY.request(partition, queue_id, entries))
        return [None if row is None else shapes.read_item_result(row) for row in rows]

    async def purge(self, partition: int, queue_id: str) -> None:
        await self._call(Op.PURGE, shapes.PURGE.request(partition, queue_id))

    async def drop_queue(self, partition: int, queue_id: str) -> None:
        await self._call(Op.DROP_QUEUE, shapes.DROP_QUEUE.request(partition, queue_id))

    async def stats(self, partition: int, queue_id: str, *, retention_seconds: int) -> dict:
        row = await self._call(Op.STATS, shapes.STATS.request(partition, queue_id, retention_seconds, False))
        return dict(zip(shapes.STATS_ANSWER.fields, row, strict=True))

    async def depth(self, partition: int, queue_id: str, *, retention_seconds: int) -> dict:
        """:meth:`stats` and ``oldest_age_ms``, how long ago the oldest message held was sent (0: none)."""
        row = await self._call(Op.STATS, shapes.STATS.request(partition, queue_id, retention_seconds, True))
        return dict(zip(shapes.DEPTH_ANSWER.fields, row, strict=True))

    async def peek(self, partition: int, queue_id: str, *, max_messages: int, retention_seconds: int) -> list[dict]:
        """Up to ``max_messages`` visible messages, oldest first, as :meth:`receive` returns them but with
        ``"receipt"`` None: the worker changes nothing (nothing is received, no record is written)."""
        args = shapes.peek_request(partition, queue_id, max_messages, retention_seconds)
        return shapes.read_received(await self._call(Op.PEEK, args))

    async def start_move_task(self, partition: int, queue_id: str, task: dict) -> dict:
        """Start moving the messages of the dead-letter queue ``queue_id`` (this worker leads it).

        ``task`` is ``{"task_handle", "source_arn", "destination": {"queue_id", "partition", "fifo", "arn",
        "retention_seconds"} | None, "max_per_second": int | None, "started_ts": int}``; destination None
        sends each message back to the queue its ``DeadLetterQueueSourceArn`` names.  Returns the task as
        :meth:`list_move_tasks` shows it.  Raises InvalidParameterValue while another task of the queue runs.
        """
        return await self._call(Op.START_MOVE_TASK, shapes.START_MOVE_TASK.request(partition, queue_id, task))

    async def list_move_tasks(self, partition: int, queue_id: str) -> list[dict]:
        """The queue's last ten tasks, most recent first, each with the keys of ``shapes.MOVE_TASK_FIELDS``."""
        return await self._call(Op.LIST_MOVE_TASKS, shapes.LIST_MOVE_TASKS.request(partition, queue_id))

    async def cancel_move_task(self, partition: int, queue_id: str, task_handle: str) -> dict:
        """Ask a RUNNING task to stop; returns ``{"moved": int}``.  Raises ResourceNotFound for any other task."""
        return await self._call(Op.CANCEL_MOVE_TASK, shapes.CANCEL_MOVE_TASK.request(partition, queue_id, task_handle))

    # --- replication ---------------------------------------------------------------------------------

    async def fetch(
        self,
        partition: int,
        replica: str,
        epoch: int,
        from_offset: int,
        durable_offset: int,
        *,
        max_bytes: int,
        wait_ms: int,
    ) -> list[tuple[int, int, bytes]]:
        """A follower's pull from the partition's leader: the records from ``from_offset`` on as ``(epoch,
        offset, payload)``, at least one and about ``max_bytes`` at most, waiting up to ``wait_ms`` when
        there are none yet (then the answer may be empty).

        ``replica`` is the follower's worker id and ``durable_offset`` its acknowledgement: it holds
        everything below ``from_offset`` and has made everything below ``durable_offset`` durable.  Raises
        :class:`~ferrymq.errors.StaleEpoch` when ``epoch`` is older than the leader's, NotLeader when the worker
        does not lead the partition in ``epoch``.
        """
        rows = await self._call(
            Op.FETCH,
            shapes.FETCH.request(partition, replica, epoch, from_offset, durable_offset, max_bytes, wait_ms),
            wait=wait_ms / 1000,
        )
        return shapes.read_frames(rows)

    async def offset_for_epoch(self, partition: int, epoch: int, asked: int) -> tuple[int, int] | None:
        """A rejoining follower's question to the partition's leader in ``epoch``: ``(epoch, end offset)`` of
        the latest epoch of the leader's log not above ``asked``, None when the leader's log starts above
        it (only a snapshot can bring the follower along)."""
        answer = await self._call(Op.OFFSET_FOR_EPOCH, shapes.OFFSET_FOR_EPOCH.request(partition, epoch, asked))
        return shapes.read_epoch_end(answer)

    async def snapshot(
        self, partition: int, replica: str, epoch: int, chunk: int
    ) -> tuple[int, int, list[tuple[int, int]], int, list[bytes]]:
        """Chunk ``chunk`` of the state of the partition's leader in ``epoch``, for follower ``replica``:
        ``(offset, epoch, history, chunks, payloads)``, the state being as of ``offset`` (appended in
        ``epoch``, the epoch history up to it ``history``), in ``chunks`` chunks of encoded records.  Chunk 0
        makes the leader take a new copy of its state; later chunks come from that copy."""
        answer = await self._call(Op.SNAPSHOT, shapes.SNAPSHOT.request(partition, replica, epoch, chunk))
        return shapes.read_snapshot_answer(answer)

    async def copy_base(
        self, partition: int, replica: str, epoch: int, copy: int, position: int, max_bytes: int
    ) -> tuple[int, int, int, bytes]:
        """Bytes of the first segment of the partition's leader in ``epoch``, for follower ``replica``, from
        ``position`` and at most ``max_bytes`` of them: ``(copy, offset, size, data)``.  ``copy`` 0 starts a copy
        (the leader holds that file from then on); later reads name the copy its first answer gave.  The
        segment is a base holding the state as of ``offset``, ``size`` bytes long."""
        answer = await self._call(
            Op.COPY_BASE, shapes.COPY_BASE.request(partition, replica, epoch, copy, position, max_bytes)
        )
        return shapes.read_copy_base_answer(answer)


def _writable(conn: _Connection | None) -> TypeGuard[_Connection]:
    """Whether ``conn`` takes a request now: open, its write buffer below the high-water mark."""
    return conn is not None and not conn.lost and conn.writer.transport.get_write_buffer_size() <= _WRITE_HIGH_WATER


def _retrieve(task: asyncio.Task[Any]) -> None:
    """A released group's task: its failure reached the group's callers already."""
    if not task.cancelled():
        task.exception()
