"""The storage worker: recovers its log into the engine, serves the worker RPC, keeps itself tidy.

Each request is handled synchronously, in arrival order: the engine decides, its records go to the log's
pending batch, and the reply is queued to go out once the log is durable up to the request's last record
(every reply waits for the durable log to reach the end as it stood when the request was handled, so
nothing is acknowledged that a crash could take back).  Only a long poll that finds nothing waits, in a
task of its own (:mod:`.long_poll`).

Work that involves other workers runs in background tasks: dead-letter redrive into a queue another worker
leads (:mod:`storage_workers.handover`) and message move tasks (:mod:`storage_workers.move_tasks`), which a
restarted worker resumes.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
from collections.abc import Coroutine
from typing import Any

from ferrymq.clock import Clock, SystemClock
from ferrymq.errors import InternalError, InvalidAction, InvalidParameterValue, ServiceUnavailable, SqsError
from ferrymq.rpc.codec import pack, pack_error, unpack
from ferrymq.rpc.framing import STATUS_ERROR, STATUS_OK, encode_frame
from storage_workers.drops import PendingDropStore, PendingDropSweeper
from storage_workers.engine import Engine
from storage_workers.handover import DeadLetterForwarder
from storage_workers.log.compaction import Compactor
from storage_workers.log.lock import locked
from storage_workers.log.recovery import recover
from storage_workers.log.writer import LogFailed, LogWriter
from storage_workers.move_tasks import MoveTaskRunner
from storage_workers.peers import IsolatedPeers, Peers
from storage_workers.server.config import WorkerConfig
from storage_workers.server.connection import READ_CHUNK, Connection, serve_connection
from storage_workers.server.handlers import DEFERRED, Handlers
from storage_workers.server.long_poll import LongPolls
from storage_workers.server.maintenance import every, fold

log = logging.getLogger(__name__)


class StorageWorker:
    def __init__(
        self, config: WorkerConfig, receipt_key: bytes, clock: Clock | None = None, peers: Peers | None = None
    ) -> None:
        """``receipt_key`` authenticates the partition's receipt handles: the partition's own, the same on
        every worker that serves it and across restarts (see ``PartitionMap.receipt_key``)."""
        self.config = config
        self.clock = clock or SystemClock()
        self.engine = Engine(self.clock, receipt_key)
        self.engine.transfer_hold_seconds = config.transfer_hold_seconds
        self.peers: Peers = peers if peers is not None else IsolatedPeers(config.partition)
        self.long_polls = LongPolls(self.engine, self.clock)
        self.forwarder = DeadLetterForwarder(self.engine, self.peers)
        self.mover = MoveTaskRunner(
            self.engine,
            self.peers,
            self.clock,
            hold_seconds=config.transfer_hold_seconds,
            on_delivered=self.long_polls.wake,
        )
        self.log: LogWriter | None = None
        self.compactor: Compactor | None = None
        self.epoch = 0
        self.requests = 0
        self.stopped = asyncio.Event()
        self.fatal: BaseException | None = None
        self._lock = contextlib.ExitStack()
        self._server: asyncio.Server | None = None
        self._connections: set[Connection] = set()
        self._handlers = Handlers(
            engine=self.engine,
            partition=config.partition,
            long_polls=self.long_polls,
            forwarder=self.forwarder,
            mover=self.mover,
            reply=self._reply,
            fail=self._fail,
            status=self.status,
        ).table()
        self._background: list[asyncio.Task[None]] = []

    # --- life cycle --------------------------------------------------------------------------------

    def open(self) -> None:
        """Lock the data directory, replay the log into the engine and get ready to append."""
        directory = self.config.data_dir
        directory.mkdir(parents=True, exist_ok=True)
        self._lock.enter_context(locked(directory))
        recovered = recover(directory, self.engine.apply)
        self.log = wal = LogWriter(
            directory,
            recovered,
            segment_bytes=self.config.segment_bytes,
            max_batch=self.config.group_commit_max_batch,
            on_fatal=self._on_log_failure,
        )
        # Epoch 0 until epochs are fenced and kept beside the log (replication): the partition map's epoch is
        # not yet, and one rebuilt under a kept log would start lower than the log's, which it refuses.
        self.engine.on_record = lambda record: wal.append(record, 0)
        self.compactor = Compactor(
            self.log,
            fold,
            lambda: self.engine.live_bytes,
            min_bytes=self.config.compact_min_bytes,
            ratio=self.config.compact_ratio,
            live_queues=lambda: self.engine.queues.keys(),
        )
        self.log.on_commit = self.compactor.check
        log.info(
            "recovered %d queues, %d messages from %d segments in %s",
            len(self.engine.queues),
            sum(len(q.msgs) for q in self.engine.queues.values()),
            len(recovered.segments),
            directory,
        )

    async def start(self) -> tuple[str, int]:
        """Listen; returns the host and port bound."""
        if self.log is None:
            self.open()
        self._server = await asyncio.start_server(
            self._serve, self.config.host, self.config.port, limit=READ_CHUNK, reuse_address=True
        )
        sockname = self._server.sockets[0].getsockname()
        for queue_id, handle in self.engine.active_move_tasks():
            log.info("resuming move task %s of %s", handle, queue_id)
            self.mover.launch(queue_id, handle)
        self._spawn(every("state sweep", self.config.sweep_interval_seconds, self.engine.sweep))
        return self.config.host, int(sockname[1])

    def run_pending_drops(self, store: PendingDropStore) -> None:
        """Carry out the partition's pending queue drops now and periodically.

        Only the partition's leader may: a worker that does not serve the partition would clear drops that
        the one serving it never made.  Called after recovery, as a drop of an id not yet replayed is lost.
        """
        assert self.log is not None
        sweeper = PendingDropSweeper(self.config.partition, store, self.engine.drop_queue, self.log.flush)
        self._spawn(sweeper.run(self.config.pending_drops_interval_seconds))

    def _spawn(self, work: Coroutine[Any, Any, None]) -> None:
        self._background.append(asyncio.get_running_loop().create_task(work))

    async def close(self) -> None:
        """Stop accepting, let what was accepted become durable and be answered, then close everything."""
        if self._server is not None:
            self._server.close()
        for conn in list(self._connections):
            with contextlib.suppress(Exception):
                conn.transport.pause_reading()
            conn.cancel_tasks()
        for task in self._background:
            task.cancel()
        await asyncio.gather(*self._background, return_exceptions=True)
        await self.mover.close()
        await self.forwarder.close()
        if self.compactor is not None:
            await self.compactor.close()
        if self.log is not None:
            await self.log.close()
        for conn in list(self._connections):
            conn.flush()
            conn.closed = True
            conn.transport.close()
        if self._server is not None:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._server.wait_closed(), 5)
        await self.peers.close()
        self._lock.close()

    def _on_log_failure(self, exc: BaseException) -> None:
        self.fatal = exc
        self.stopped.set()

    def status(self) -> dict[str, Any]:
        """What ``ping`` reports: identity, size of the state and of the log."""
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
            "compaction": self.compactor.status() if self.compactor else None,
            "dead_letter_handovers": {
                "in_flight": self.forwarder.in_flight,
                "deferred": self.forwarder.deferred,
                "forwarded": self.forwarder.forwarded,
            },
        }

    # --- requests ----------------------------------------------------------------------------------

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await serve_connection(reader, writer, self._dispatch, self._connections)

    def _dispatch(self, conn: Connection, request_id: int, op: int, payload: bytes) -> None:
        self.requests += 1
        handler = self._handlers.get(op)
        try:
            if handler is None:
                raise InvalidAction(f"Unknown worker operation {op}.")
            result = handler(conn, request_id, unpack(payload))
        except Exception as exc:
            self._fail(conn, request_id, exc, op)
        else:
            if result is not DEFERRED:
                self._reply(conn, request_id, result)

    def _reply(self, conn: Connection, request_id: int, result: Any) -> None:
        """Answer once the log is durable up to its current end."""
        frame = encode_frame(request_id, STATUS_OK, pack(result))
        wal = self.log
        assert wal is not None
        wal.when_durable(wal.end, conn.write, frame)

    def _fail(self, conn: Connection, request_id: int, exc: BaseException, op: int | None = None) -> None:
        """Answer with the SQS error ``exc`` stands for; a failed log is an outage, a bad request the caller's."""
        if isinstance(exc, SqsError):
            error: SqsError = exc
        elif isinstance(exc, LogFailed):
            error = ServiceUnavailable()
        elif isinstance(exc, (ValueError, TypeError)):
            log.warning("malformed %s request: %s", op, exc)
            error = InvalidParameterValue(f"Malformed worker request: {exc}")
        else:
            log.error("request %s failed", op, exc_info=exc)
            error = InternalError()
        conn.write(encode_frame(request_id, STATUS_ERROR, pack_error(error)))
