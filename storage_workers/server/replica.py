"""One partition as a worker serves it: its log directory, engine, compactor, long polls, dead-letter
forwarder, move-task runner, pending-drop sweeper and receipt key.

A :class:`PartitionReplica` is opened (its log replayed into its engine), started (move tasks resumed,
sweeps running) and closed by its :class:`~storage_workers.server.worker.StorageWorker`, which owns the one
RPC listener and routes each request to the replica of the partition it names.

Its role is static (``WorkerConfig.role``).  A leader answers requests; every reply waits until the
request's last record is committed (:mod:`storage_workers.replication.commit`: with ``acks=leader``, durable
in this log), and it answers its followers' FETCH (:mod:`storage_workers.replication.leader`).  A follower
answers every request with NotLeader and runs its fetch loop (:mod:`storage_workers.replication.follower`),
applying what it appends to its state; it runs no sweeps, move tasks or drops, which would emit records.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable, Coroutine
from typing import Any

from ferrymq.clock import Clock
from ferrymq.errors import NotLeader
from ferrymq.rpc.codec import pack
from ferrymq.rpc.framing import STATUS_OK, Op, encode_frame
from storage_workers.drops import PendingDropStore, PendingDropSweeper
from storage_workers.engine import Engine
from storage_workers.handover import DeadLetterForwarder
from storage_workers.log.compaction import Compactor
from storage_workers.log.lock import locked
from storage_workers.log.recovery import recover
from storage_workers.log.writer import LogWriter
from storage_workers.move_tasks import MoveTaskRunner
from storage_workers.peers import Peers
from storage_workers.replication import Follower, FollowerRole, LeaderStream
from storage_workers.server.config import WorkerConfig
from storage_workers.server.connection import Connection
from storage_workers.server.handlers import DEFERRED, PARTITION_OPS, Handler, Handlers
from storage_workers.server.layout import replica_dir
from storage_workers.server.long_poll import LongPolls
from storage_workers.server.maintenance import every, fold

log = logging.getLogger(__name__)



class PartitionReplica:
    def __init__(
        self,
        partition: int,
        config: WorkerConfig,
        receipt_key: bytes,
        clock: Clock,
        peers: Peers,
        *,
        fail: Callable[[Connection, int, BaseException], None],
        on_fatal: Callable[[BaseException], None],
    ) -> None:
        """``receipt_key`` authenticates the partition's receipt handles (see ``PartitionMap.receipt_key``);
        ``fail`` answers a request with an error; ``on_fatal`` is told when the log fails for good."""
        self.partition = partition
        self.config = config
        self.directory = replica_dir(config.data_dir, partition)
        self.engine = Engine(clock, receipt_key)
        self.engine.transfer_hold_seconds = config.transfer_hold_seconds
        self.peers = peers
        self.long_polls = LongPolls(self.engine, clock)
        self.forwarder = DeadLetterForwarder(self.engine, peers)
        self.mover = MoveTaskRunner(
            self.engine,
            peers,
            clock,
            hold_seconds=config.transfer_hold_seconds,
            on_delivered=self.long_polls.wake,
        )
        self.epoch = 0
        """The partition map's epoch, once registered."""
        self.log: LogWriter | None = None
        self.compactor: Compactor | None = None
        self.role = config.role(partition)
        self.stream: LeaderStream | None = None
        """The leader side of replication, once open (leaders only)."""
        self.follower: Follower | None = None
        """The fetch loop, once open (followers only)."""
        self.handlers: dict[int, Handler]
        if isinstance(self.role, FollowerRole):
            self.handlers = dict.fromkeys(PARTITION_OPS, self._not_leader)
        else:
            self.handlers = Handlers(
                engine=self.engine,
                partition=partition,
                long_polls=self.long_polls,
                forwarder=self.forwarder,
                mover=self.mover,
                reply=self.reply,
                fail=fail,
            ).table()
            self.handlers[Op.FETCH] = self._fetch
        self._fail = fail
        self._on_fatal = on_fatal
        self._lock = contextlib.ExitStack()
        self._background: list[asyncio.Task[None]] = []

    def open(self) -> None:
        """Lock the partition's log directory, replay its log into the engine and get ready to append."""
        directory = self.directory
        directory.mkdir(parents=True, exist_ok=True)
        self._lock.enter_context(locked(directory))
        recovered = recover(directory, self.engine.apply)
        self.log = wal = LogWriter(
            directory,
            recovered,
            segment_bytes=self.config.segment_bytes,
            max_batch=self.config.group_commit_max_batch,
            on_fatal=self._on_fatal,
        )
        # The configured epoch (0 by default) until epochs are claimed and kept beside the log (elections): the
        # partition map's epoch is not used, as one rebuilt under a kept log could start lower than the log's.
        role = self.role
        if isinstance(role, FollowerRole):
            self.follower = Follower(self.partition, self.config.worker_id, role, wal, self.engine.apply)
        else:
            self.stream = LeaderStream(self.partition, self.config.worker_id, role, wal)
            self.engine.on_record = self.stream.append
        self.compactor = Compactor(
            wal,
            fold,
            lambda: self.engine.live_bytes,
            min_bytes=self.config.compact_min_bytes,
            ratio=self.config.compact_ratio,
            live_queues=lambda: self.engine.queues.keys(),
        )
        wal.on_commit = self._committed
        log.info(
            "partition %d: recovered %d queues, %d messages from %d segments in %s",
            self.partition,
            len(self.engine.queues),
            sum(len(q.msgs) for q in self.engine.queues.values()),
            len(recovered.segments),
            directory,
        )

    def _committed(self) -> None:
        assert self.compactor is not None
        self.compactor.check()
        if self.stream is not None:
            self.stream.committed()

    def _not_leader(self, conn: Connection, request_id: int, args: Any) -> Any:
        raise NotLeader(f"Storage worker {self.config.worker_id} follows partition {self.partition}.")

    def _fetch(self, conn: Connection, request_id: int, args: Any) -> Any:
        assert self.stream is not None
        task = self.stream.fetch(conn, request_id, args, self._fail)
        if task is not None:
            conn.start(task)
        return DEFERRED

    def start(self) -> None:
        """Leader: resume the partition's move tasks and start its periodic sweep; follower: start fetching
        (on the running loop)."""
        if self.follower is not None:
            self._spawn(self.follower.run())
            return
        for queue_id, handle in self.engine.active_move_tasks():
            log.info("partition %d: resuming move task %s of %s", self.partition, handle, queue_id)
            self.mover.launch(queue_id, handle)
        self._spawn(every("state sweep", self.config.sweep_interval_seconds, self.engine.sweep))

    def run_pending_drops(self, store: PendingDropStore) -> None:
        """Carry out the partition's pending queue drops now and periodically.

        Only the partition's leader may: a worker that does not serve the partition would clear drops that
        the one serving it never made.  Called after recovery, as a drop of an id not yet replayed is lost.
        A follower does nothing: its leader's drops reach it as records.
        """
        assert self.log is not None
        if self.follower is not None:
            return
        sweeper = PendingDropSweeper(self.partition, store, self.engine.drop_queue, self.log.flush)
        self._spawn(sweeper.run(self.config.pending_drops_interval_seconds))

    def _spawn(self, work: Coroutine[Any, Any, None]) -> None:
        self._background.append(asyncio.get_running_loop().create_task(work))

    def reply(self, conn: Connection, request_id: int, result: Any) -> None:
        """Answer once every record appended so far is committed."""
        frame = encode_frame(request_id, STATUS_OK, pack(result))
        assert self.log is not None and self.stream is not None
        self.stream.when_committed(self.log.end_offset - 1, conn.write, frame)

    async def close(self) -> None:
        """Stop the background work, let what was appended become durable (and be answered), release the
        directory."""
        for task in self._background:
            task.cancel()
        await asyncio.gather(*self._background, return_exceptions=True)
        await self.mover.close()
        if self.follower is not None:
            await self.follower.close()
        await self.forwarder.close()
        if self.compactor is not None:
            await self.compactor.close()
        if self.log is not None:
            await self.log.close()
        self._lock.close()

    def status(self) -> dict[str, Any]:
        """The partition's part of ``ping``: size of the state and of the log."""
        assert self.log is not None
        return {
            "epoch": self.epoch,
            "role": "follower" if self.follower is not None else "leader",
            "end_offset": self.log.end_offset,
            "high_watermark": self.stream.tracker.high_watermark if self.stream is not None else None,
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
