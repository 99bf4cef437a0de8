"""The storage worker: recovers its log into the engine, serves the worker RPC, registers in the partition map.

Requests are read from each connection in chunks and handled synchronously, in arrival order: the engine
decides, its records go to the log's pending batch, and the response is queued to go out once the log is
durable up to the request's last record (every response waits for the durable log to reach the end as it
stood when the request was handled, so nothing is acknowledged that a crash could take back).  Only a long
poll that finds nothing waits in a task of its own; it is woken by sends, deletes and visibility changes on
its queue and by the engine's next timer.  Responses that become ready in the same event-loop turn go out in
one write per connection.

Work that involves other workers runs in background tasks: dead-letter redrive into a queue another worker
leads (:mod:`.handover`) and message move tasks (:mod:`.move_tasks`), which a restarted worker resumes.
"""

from __future__ import annotations

import asyncio
import contextlib
import fcntl
import logging
import os
import signal
import socket
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TextIO

from ferrymq.aws.partitions import PartitionMap
from ferrymq.clock import Clock, SystemClock
from ferrymq.errors import InternalError, InvalidAction, InvalidParameterValue, ServiceUnavailable, SqsError
from ferrymq.orphan_watch import wait_until_orphaned
from ferrymq.rpc.codec import REDRIVE_FIELDS, pack, pack_error, unpack
from ferrymq.rpc.framing import STATUS_ERROR, STATUS_OK, FrameDecoder, FrameError, Op, encode_frame
from ferrymq.settings import Settings
from storage_workers.engine import Engine, Redrive
from storage_workers.engine.engine import TRANSFER_HOLD_SECONDS
from storage_workers.handover import DeadLetterForwarder
from storage_workers.log.compaction import Compactor
from storage_workers.log.segments import recover
from storage_workers.log.writer import DEFAULT_SEGMENT_BYTES, LogFailed, LogWriter
from storage_workers.move_tasks import MoveTaskRunner
from storage_workers.peers import ClusterPeers, IsolatedPeers, Peers, QueueTarget

log = logging.getLogger(__name__)

READY_LINE = "FERRYMQ_WORKER_READY"
_READ_CHUNK = 256 * 1024
_WRITE_HIGH_WATER = 8 * 1024 * 1024
_MAX_WAIT_SECONDS = 20.0
_MAX_VISIBILITY = 43200
_DEFERRED = object()


@dataclass(frozen=True)
class WorkerConfig:
    data_dir: Path
    host: str = "127.0.0.1"
    port: int = 0
    worker_id: str = "worker-1"
    partition: int = 0
    group_commit_max_batch: int = 1024
    segment_bytes: int = DEFAULT_SEGMENT_BYTES
    compact_min_bytes: int = 128 * 1024 * 1024
    compact_ratio: float = 4.0
    register: bool = True
    transfer_hold_seconds: int = TRANSFER_HOLD_SECONDS

    @classmethod
    def from_settings(cls, settings: Settings, **overrides: Any) -> WorkerConfig:
        worker_id = overrides.pop("worker_id", None) or settings.worker_id
        data_dir = overrides.pop("data_dir", None) or settings.data_dir / "workers" / worker_id
        values: dict[str, Any] = {
            "data_dir": Path(data_dir),
            "host": settings.worker_host,
            "port": settings.worker_port,
            "worker_id": worker_id,
            "group_commit_max_batch": settings.group_commit_max_batch,
        }
        values.update({k: v for k, v in overrides.items() if v is not None})
        return cls(**values)


class _Peer:
    """One client connection: responses are queued and written once per event-loop turn."""

    __slots__ = ("closed", "loop", "out", "scheduled", "tasks", "transport")

    def __init__(self, transport: asyncio.WriteTransport, loop: asyncio.AbstractEventLoop) -> None:
        self.transport = transport
        self.loop = loop
        self.out: list[bytes] = []
        self.scheduled = False
        self.closed = False
        self.tasks: set[asyncio.Task[None]] = set()

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


@dataclass
class _Stats:
    requests: int = 0
    connections: int = 0


@dataclass(frozen=True, slots=True)
class _ReceiveOptions:
    attempt_id: str | None = None
    redrive: Redrive | None = None
    dlq: QueueTarget | None = None
    max_in_flight: int | None = None


_PLAIN_RECEIVE = _ReceiveOptions()


class StorageWorker:
    def __init__(self, config: WorkerConfig, clock: Clock | None = None, peers: Peers | None = None) -> None:
        self.config = config
        self.clock = clock or SystemClock()
        self.engine = Engine(self.clock)
        self.engine.transfer_hold_seconds = config.transfer_hold_seconds
        self.peers: Peers = peers if peers is not None else IsolatedPeers(config.partition)
        self.forwarder = DeadLetterForwarder(self.engine, self.peers)
        self.mover = MoveTaskRunner(
            self.engine,
            self.peers,
            self.clock,
            hold_seconds=config.transfer_hold_seconds,
            on_delivered=self._wake,
        )
        self.log: LogWriter | None = None
        self.compactor: Compactor | None = None
        self.epoch = 0
        self.stats = _Stats()
        self.stopped = asyncio.Event()
        self.fatal: BaseException | None = None
        self._lock_fd: int | None = None
        self._server: asyncio.Server | None = None
        self._peers: set[_Peer] = set()
        self._waiters: dict[str, set[asyncio.Future[None]]] = {}
        self._handlers: dict[int, Callable[[_Peer, int, Any], Any]] = {
            Op.PING: self._ping,
            Op.SEND: self._send,
            Op.RECEIVE: self._receive,
            Op.DELETE: self._delete,
            Op.CHANGE_VISIBILITY: self._change_visibility,
            Op.PURGE: self._purge,
            Op.DROP_QUEUE: self._drop_queue,
            Op.STATS: self._stats,
            Op.START_MOVE_TASK: self._start_move_task,
            Op.LIST_MOVE_TASKS: self._list_move_tasks,
            Op.CANCEL_MOVE_TASK: self._cancel_move_task,
        }

    # --- life cycle --------------------------------------------------------------------------------

    def open(self) -> None:
        """Lock the data directory, replay the log into the engine and get ready to append."""
        directory = self.config.data_dir
        directory.mkdir(parents=True, exist_ok=True)
        self._lock_fd = os.open(directory / "LOCK", os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(self._lock_fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(self._lock_fd)
            self._lock_fd = None
            raise RuntimeError(f"{directory} is in use by another storage worker") from None
        segments = recover(directory, self.engine.apply)
        self.log = LogWriter(
            directory,
            segments,
            segment_bytes=self.config.segment_bytes,
            max_batch=self.config.group_commit_max_batch,
            on_fatal=self._on_log_failure,
        )
        self.engine.on_record = self.log.append
        self.compactor = Compactor(
            self.log,
            _fold,
            lambda: self.engine.live_bytes,
            min_bytes=self.config.compact_min_bytes,
            ratio=self.config.compact_ratio,
        )
        self.log.on_commit = self.compactor.check
        log.info(
            "recovered %d queues, %d messages from %d segments in %s",
            len(self.engine.queues),
            sum(len(q.msgs) for q in self.engine.queues.values()),
            len(segments),
            directory,
        )

    async def start(self) -> tuple[str, int]:
        """Listen; returns the host and port bound."""
        if self.log is None:
            self.open()
        self._server = await asyncio.start_server(
            self._serve, self.config.host, self.config.port, limit=_READ_CHUNK, reuse_address=True
        )
        sockname = self._server.sockets[0].getsockname()
        for queue_id, handle in self.engine.active_move_tasks():
            log.info("resuming move task %s of %s", handle, queue_id)
            self.mover.launch(queue_id, handle)
        return self.config.host, int(sockname[1])

    async def close(self) -> None:
        """Stop accepting, let what was accepted become durable and be answered, then close everything."""
        if self._server is not None:
            self._server.close()
        for peer in list(self._peers):
            with contextlib.suppress(Exception):
                peer.transport.pause_reading()
            for task in list(peer.tasks):
                task.cancel()
        await self.mover.close()
        await self.forwarder.close()
        if self.compactor is not None:
            await self.compactor.close()
        if self.log is not None:
            await self.log.close()
        for peer in list(self._peers):
            peer.flush()
            peer.closed = True
            peer.transport.close()
        if self._server is not None:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._server.wait_closed(), 5)
        await self.peers.close()
        if self._lock_fd is not None:
            os.close(self._lock_fd)
            self._lock_fd = None

    def _on_log_failure(self, exc: BaseException) -> None:
        self.fatal = exc
        self.stopped.set()

    # --- connections -------------------------------------------------------------------------------

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        sock = writer.get_extra_info("socket")
        if sock is not None:
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        transport = writer.transport
        peer = _Peer(transport, asyncio.get_running_loop())
        self._peers.add(peer)
        self.stats.connections += 1
        decoder = FrameDecoder()
        dispatch = self._dispatch
        try:
            while True:
                data = await reader.read(_READ_CHUNK)
                if not data:
                    break
                for request_id, op, payload in decoder.feed(data):
                    dispatch(peer, request_id, op, payload)
                if transport.get_write_buffer_size() > _WRITE_HIGH_WATER:
                    await writer.drain()
        except (OSError, FrameError) as exc:
            log.debug("connection closed: %s", exc)
        finally:
            peer.closed = True
            for task in list(peer.tasks):
                task.cancel()
            self._peers.discard(peer)
            writer.close()

    def _dispatch(self, peer: _Peer, request_id: int, op: int, payload: bytes) -> None:
        self.stats.requests += 1
        handler = self._handlers.get(op)
        try:
            if handler is None:
                raise InvalidAction(f"Unknown worker operation {op}.")
            result = handler(peer, request_id, unpack(payload))
        except SqsError as exc:
            peer.write(encode_frame(request_id, STATUS_ERROR, pack_error(exc)))
        except LogFailed:
            peer.write(encode_frame(request_id, STATUS_ERROR, pack_error(ServiceUnavailable())))
        except (ValueError, TypeError) as exc:
            log.warning("malformed %s request: %s", op, exc)
            error = InvalidParameterValue(f"Malformed worker request: {exc}")
            peer.write(encode_frame(request_id, STATUS_ERROR, pack_error(error)))
        except Exception:
            log.exception("request %s failed", op)
            peer.write(encode_frame(request_id, STATUS_ERROR, pack_error(InternalError())))
        else:
            if result is not _DEFERRED:
                self._reply(peer, request_id, result)

    def _reply(self, peer: _Peer, request_id: int, result: Any) -> None:
        """Answer once the log is durable up to its current end."""
        frame = encode_frame(request_id, STATUS_OK, pack(result))
        wal = self.log
        assert wal is not None
        wal.when_durable(wal.end, peer.write, frame)

    # --- operations --------------------------------------------------------------------------------

    def _ping(self, peer: _Peer, request_id: int, args: Any) -> dict:
        assert self.log is not None
        return {
            "worker_id": self.config.worker_id,
            "partition": self.config.partition,
            "epoch": self.epoch,
            "pid": os.getpid(),
            "queues": len(self.engine.queues),
            "messages": sum(len(q.msgs) for q in self.engine.queues.values()),
            "log_bytes": self.log.total_bytes,
            "log_segments": len(self.log.segments),
            "log_batches": self.log.batches,
            "compactions": self.compactor.runs if self.compactor else 0,
        }

    def _send(self, peer: _Peer, request_id: int, args: Any) -> list:
        queue_id, messages, retention = args[0], args[1], args[2]
        fifo = bool(args[3]) if len(args) > 3 else False
        if _check_send(queue_id, messages, retention, fifo):
            sent_ts = self.engine.send(queue_id, messages, retention)
            self._wake(queue_id)
            return [[m[0], sent_ts] for m in messages]
        incoming = [(*m[:7], *m[7:9], _origin(m[9])) if len(m) > 7 else (*m, None, None, None) for m in messages]
        results = self.engine.store(queue_id, incoming, retention, fifo=fifo)
        self._wake(queue_id)
        return [[message_id, sent_ts, f"{seq:020d}", duplicate] for message_id, sent_ts, seq, duplicate in results]

    def _receive(self, peer: _Peer, request_id: int, args: Any) -> Any:
        queue_id, max_messages, visibility, wait, retention = args[:5]
        _check_str(queue_id)
        options = self._receive_options(args[5]) if len(args) > 5 and args[5] else _PLAIN_RECEIVE
        n = min(max(int(max_messages), 1), 10)
        visibility = min(max(int(visibility), 0), _MAX_VISIBILITY)
        retention = int(retention)
        wait = min(float(wait), _MAX_WAIT_SECONDS)
        found = self._poll(queue_id, n, visibility, retention, options, short_poll=not wait > 0)
        if found or not wait > 0:
            return found
        task = asyncio.get_running_loop().create_task(
            self._long_poll(peer, request_id, queue_id, n, visibility, retention, wait, options)
        )
        peer.tasks.add(task)
        task.add_done_callback(peer.tasks.discard)
        return _DEFERRED

    def _receive_options(self, options: Any) -> _ReceiveOptions:
        if not isinstance(options, dict):
            raise TypeError("receive options must be a map")
        attempt_id = options.get("attempt_id")
        if attempt_id is not None and not isinstance(attempt_id, str):
            raise TypeError("attempt_id must be a string")
        max_in_flight = options.get("max_in_flight")
        if max_in_flight is not None:
            max_in_flight = int(max_in_flight)
        redrive = options.get("redrive")
        if redrive is None:
            return _ReceiveOptions(attempt_id if options.get("fifo") else None, None, None, max_in_flight)
        if not isinstance(redrive, dict) or set(REDRIVE_FIELDS) - set(redrive):
            raise ValueError(f"redrive needs {', '.join(REDRIVE_FIELDS)}")
        dlq = QueueTarget(
            str(redrive["dlq_queue_id"]),
            int(redrive["dlq_partition"]),
            bool(redrive["dlq_fifo"]),
            int(redrive["dlq_retention_seconds"]),
            str(redrive["source_arn"]),
        )
        policy = Redrive(
            max(int(redrive["max_receive_count"]), 1),
            dlq.queue_id,
            dlq.fifo,
            str(redrive["source_arn"]),
            dlq.partition == self.config.partition,
        )
        return _ReceiveOptions(attempt_id if options.get("fifo") else None, policy, dlq, max_in_flight)

    def _poll(
        self, queue_id: str, n: int, visibility: int, retention: int, options: _ReceiveOptions, *, short_poll: bool
    ) -> list:
        if options is _PLAIN_RECEIVE:
            return self.engine.receive(queue_id, n, visibility, retention)
        polled = self.engine.poll(
            queue_id,
            n,
            visibility,
            retention,
            attempt_id=options.attempt_id,
            redrive=options.redrive,
            max_in_flight=options.max_in_flight,
            short_poll=short_poll,
        )
        if options.redrive is not None and options.dlq is not None:
            if polled.dead_letters:
                self.forwarder.submit(queue_id, options.dlq, polled.dead_letters)
            elif options.redrive.local:
                self._wake(options.dlq.queue_id)
        return polled.rows

    async def _long_poll(
        self,
        peer: _Peer,
        request_id: int,
        queue_id: str,
        n: int,
        visibility: int,
        retention: int,
        wait: float,
        options: _ReceiveOptions,
    ) -> None:
        loop = asyncio.get_running_loop()
        deadline = loop.time() + wait
        found: list = []
        try:
            while True:
                remaining = deadline - loop.time()
                if remaining <= 0:
                    break
                timeout = remaining
                due = self.engine.next_change(queue_id, options.max_in_flight)
                if due is not None:
                    timeout = min(timeout, max(due - self.clock.now(), 0.0) + 0.001)
                fut: asyncio.Future[None] = loop.create_future()
                waiters = self._waiters.get(queue_id)
                if waiters is None:
                    waiters = self._waiters[queue_id] = set()
                waiters.add(fut)
                timer = loop.call_later(timeout, _resolve, fut)
                try:
                    await fut
                finally:
                    timer.cancel()
                    waiters.discard(fut)
                    if not waiters and self._waiters.get(queue_id) is waiters:
                        del self._waiters[queue_id]
                found = self._poll(queue_id, n, visibility, retention, options, short_poll=False)
                if found:
                    break
        except asyncio.CancelledError:
            raise
        except LogFailed:
            peer.write(encode_frame(request_id, STATUS_ERROR, pack_error(ServiceUnavailable())))
            return
        except Exception:
            log.exception("long poll failed")
            peer.write(encode_frame(request_id, STATUS_ERROR, pack_error(InternalError())))
            return
        self._reply(peer, request_id, found)

    def _wake(self, queue_id: str) -> None:
        """Let long polls on the queue look again (something may have become visible, or a timer moved)."""
        waiters = self._waiters.pop(queue_id, None)
        if waiters:
            for fut in waiters:
                _resolve(fut)

    def _delete(self, peer: _Peer, request_id: int, args: Any) -> list:
        queue_id, handles = args
        _check_str(queue_id)
        if not isinstance(handles, list):
            raise TypeError("receipts must be a list")
        results = self.engine.delete(queue_id, handles)
        # A delete may unlock a FIFO group or bring a queue back under its in-flight limit.
        self._wake(queue_id)
        return results

    def _change_visibility(self, peer: _Peer, request_id: int, args: Any) -> list:
        queue_id, entries = args
        _check_str(queue_id)
        checked = []
        for handle, timeout in entries:
            checked.append((handle, min(max(int(timeout), 0), _MAX_VISIBILITY)))
        results = self.engine.change_visibility(queue_id, checked)
        if any(r is None for r in results):
            self._wake(queue_id)
        return results

    def _purge(self, peer: _Peer, request_id: int, args: Any) -> None:
        (queue_id,) = args
        _check_str(queue_id)
        self.engine.purge(queue_id)

    def _drop_queue(self, peer: _Peer, request_id: int, args: Any) -> None:
        (queue_id,) = args
        _check_str(queue_id)
        self.engine.drop_queue(queue_id)

    def _stats(self, peer: _Peer, request_id: int, args: Any) -> tuple[int, int, int]:
        queue_id, retention = args
        _check_str(queue_id)
        return self.engine.stats(queue_id, int(retention))

    def _start_move_task(self, peer: _Peer, request_id: int, args: Any) -> dict:
        queue_id, task = args
        _check_str(queue_id)
        _check_move_task(task)
        started = self.engine.start_move_task(queue_id, task)
        if started["status"] == "RUNNING":
            self.mover.launch(queue_id, started["task_handle"])
        return started

    def _list_move_tasks(self, peer: _Peer, request_id: int, args: Any) -> list[dict]:
        (queue_id,) = args
        _check_str(queue_id)
        return self.engine.list_move_tasks(queue_id)

    def _cancel_move_task(self, peer: _Peer, request_id: int, args: Any) -> dict:
        queue_id, handle = args
        _check_str(queue_id)
        _check_str(handle)
        moved = self.engine.cancel_move_task(queue_id, handle)
        self.mover.poke(queue_id, handle)
        return {"moved": moved}


def _resolve(fut: asyncio.Future[None]) -> None:
    if not fut.done():
        fut.set_result(None)


def _check_str(value: Any) -> None:
    if not isinstance(value, str):
        raise TypeError("queue id must be a string")


def _check_send(queue_id: Any, messages: Any, retention: Any, fifo: bool) -> bool:
    """Whether these are plain messages of a standard queue.

    The front end has validated the messages; this only keeps a broken request out of the log.
    """
    _check_str(queue_id)
    if not isinstance(messages, list) or not isinstance(retention, int):
        raise TypeError("messages must be a list and retention an integer")
    plain = not fifo
    for m in messages:
        if not (
            isinstance(m, list)
            and len(m) in (7, 10)
            and isinstance(m[0], str)
            and isinstance(m[1], str)
            and isinstance(m[2], dict)
            and isinstance(m[3], str)
            and (m[4] is None or isinstance(m[4], str))
            and isinstance(m[5], int)
            and 0 <= m[5] <= 900
            and isinstance(m[6], dict)
        ):
            raise ValueError("malformed message")
        for value in m[2].values():
            if not isinstance(value, dict):
                raise ValueError("malformed message attribute")
        if len(m) == 10:
            plain = False
            if not (m[7] is None or isinstance(m[7], str)) or not (m[8] is None or isinstance(m[8], str)):
                raise ValueError("malformed message group or deduplication id")
            if m[9] is not None and not isinstance(m[9], dict):
                raise ValueError("malformed message origin")
        if fifo and (len(m) != 10 or not isinstance(m[7], str)):
            raise ValueError("a FIFO message needs a group")
    return plain


def _origin(origin: dict | None) -> tuple[int | None, int, int] | None:
    if origin is None:
        return None
    sent_ts = origin.get("sent_ts")
    return (
        int(sent_ts) if sent_ts is not None else None,
        int(origin.get("receive_count") or 0),
        int(origin.get("first_receive_ts") or 0),
    )


def _check_move_task(task: Any) -> None:
    if not isinstance(task, dict) or not isinstance(task.get("task_handle"), str):
        raise ValueError("a move task needs a task_handle")
    if not isinstance(task.get("source_arn"), str):
        raise ValueError("a move task needs a source_arn")
    destination = task.get("destination")
    if destination is not None:
        if not isinstance(destination, dict):
            raise ValueError("a move task destination must be a map")
        missing = {"queue_id", "partition", "fifo", "arn", "retention_seconds"} - set(destination)
        if missing:
            raise ValueError(f"a move task destination needs {', '.join(sorted(missing))}")
    rate = task.get("max_per_second")
    if rate is not None and (not isinstance(rate, int) or rate < 1):
        raise ValueError("max_per_second must be a positive integer")


def _fold(records: Any) -> Any:
    """Compaction's fold: replay into a fresh engine, then snapshot it."""
    return Engine.replay(SystemClock(), records).snapshot()


async def _stop_when_orphaned(worker: StorageWorker, parent_pid: int) -> None:
    if await wait_until_orphaned(parent_pid, worker.stopped.is_set):
        log.info("parent process %d is gone; stopping", parent_pid)
        worker.stopped.set()


async def run_worker(
    config: WorkerConfig, settings: Settings, *, out: TextIO | None = None, parent_pid: int | None = None
) -> int:
    """Run a worker until SIGTERM or SIGINT, or until ``parent_pid`` is no longer its parent; returns the
    process exit status."""
    out = out if out is not None else sys.stdout
    worker = StorageWorker(config, peers=ClusterPeers.from_settings(settings, config.partition))
    try:
        worker.open()
        host, port = await worker.start()
    except Exception as exc:
        log.error("storage worker could not start: %s", exc)
        await worker.close()
        return 1
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, worker.stopped.set)
    if config.register:
        try:
            partition_map = PartitionMap.from_settings(settings)
            worker.epoch = await asyncio.to_thread(
                partition_map.register, config.partition, config.worker_id, host, port
            )
        except SqsError as exc:
            # Outages come with the generic message clients see; the botocore failure behind one says what broke.
            log.error("could not register in the partition map: %s", exc.__cause__ or exc.message)
            await worker.close()
            return 1
    log.info(
        "worker %s serves partition %d at %s:%d (epoch %d)",
        config.worker_id,
        config.partition,
        host,
        port,
        worker.epoch,
    )
    if not worker.stopped.is_set():
        print(f"{READY_LINE} {host} {port}", file=out, flush=True)
    watch = asyncio.create_task(_stop_when_orphaned(worker, parent_pid)) if parent_pid is not None else None
    await worker.stopped.wait()
    if watch is not None:
        watch.cancel()
    await worker.close()
    if worker.fatal is not None:
        log.critical("stopped after a log failure: %s", worker.fatal)
        return 1
    return 0
