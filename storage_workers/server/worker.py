"""The storage worker: one RPC listener in front of the partition replicas it serves.

Each partition has its own :class:`~ferrymq.storage.server.replica.PartitionReplica` (log directory
``<data dir>/p<partition>/``, engine, compactor, long polls, hand-overs, move tasks).  Every request but PING
names its partition; the worker hands it to that replica's handler, or answers :class:`NotLeader` (and does
nothing) when it does not serve the partition.  PING reports the worker and every partition it serves.

Each request is handled synchronously, in arrival order: the engine decides, its records go to the log's
pending batch, and the reply is queued to go out once the replica's log is durable up to the request's last
record (nothing is acknowledged that a crash could take back).  Only a long poll that finds nothing waits,
in a task of its own (:mod:`.long_poll`).

Work that involves other partitions runs in background tasks of the replica: dead-letter redrive into a
queue of another partition (:mod:`ferrymq.storage.handover`) and message move tasks
(:mod:`ferrymq.storage.move_tasks`), which a restarted worker resumes.  A partition this worker serves too is
reached through the worker's own address, like any other (see :mod:`ferrymq.storage.peers`).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
from collections.abc import Iterable, Mapping
from typing import Any

from prometheus_client import Histogram

from ferrymq.clock import Clock, SystemClock
from ferrymq.errors import (
    InternalError,
    InvalidAction,
    InvalidParameterValue,
    NotLeader,
    ServiceUnavailable,
    SqsError,
)
from ferrymq.logs import REQUEST_ID
from ferrymq.rpc.client import WorkerClient
from ferrymq.rpc.codec import pack, pack_error, unpack
from ferrymq.rpc.framing import STATUS_ERROR, STATUS_OK, TRACED, FrameError, Op, encode_frame, split_trace
from ferrymq.storage.drops import PendingDropStore
from ferrymq.storage.log.body_cache import BodyCache
from ferrymq.storage.log.lock import locked
from ferrymq.storage.log.sync_place import SyncPlace
from ferrymq.storage.log.writer import LogFailed
from ferrymq.storage.peers import IsolatedPeers, ReplicaPeers, SharedPeers
from ferrymq.storage.server.config import WorkerConfig
from ferrymq.storage.server.connection import Connection, WorkerProtocol
from ferrymq.storage.server.handlers import DEFERRED, PARTITION_OPS
from ferrymq.storage.server.huge_pages import HugePages
from ferrymq.storage.server.layout import adopt_legacy_log, replica_dir
from ferrymq.storage.server.loop_lag import LoopLagMonitor
from ferrymq.storage.server.mapped_columns import MappedColumns
from ferrymq.storage.server.metrics import FSYNC_BUCKETS
from ferrymq.storage.server.replica import PartitionReplica

log = logging.getLogger(__name__)


class StorageWorker:
    def __init__(
        self,
        config: WorkerConfig,
        receipt_keys: Mapping[int, bytes] | None,
        clock: Clock | None = None,
        peers: SharedPeers | None = None,
    ) -> None:
        """``receipt_keys`` holds, for every partition in ``config.partitions``, the key that authenticates its
        receipt handles: the partition's own, the same on every worker that serves it and across restarts
        (see ``PartitionMap.receipt_key``). None: they are given with :meth:`use_receipt_keys` after
        :meth:`open`, so that the logs are recovered before the table they live in is read."""
        if receipt_keys is not None:
            self._check_keys(config.partitions, receipt_keys)
        self.config = config
        self.clock = clock or SystemClock()
        self.body_cache = BodyCache(config.body_cache_bytes)
        """Recent message bodies of every partition here (the rest are read back from the logs)."""
        self.peers: SharedPeers = peers if peers is not None else IsolatedPeers()
        self.requests = 0
        self.fsync_seconds = Histogram(
            "ferrymq_worker_fsync_seconds", "How long each group commit's fdatasync took.", buckets=FSYNC_BUCKETS,
            registry=None,
        )
        """Fed, where each log synced, how long each fdatasync took (``/metrics``)."""
        self.sync_place = SyncPlace(config.sync_on_loop_ms / 1000, calm_seconds=config.sync_calm_seconds)
        """Whether group commits are synced on the loop or in the logs' I/O threads (the logs share a disk)."""
        self.stopped = asyncio.Event()
        self.fatal: BaseException | None = None
        self.loop_lag = LoopLagMonitor(trace_after=config.stall_trace_ms / 1000)
        """How late the event loop wakes (metrics, ping): started with the listener."""
        self.loop_lag.fields["worker"] = config.worker_id
        self.huge_pages = HugePages.for_this_process()
        """Huge pages for the large arrays after a slow checkpoint fork (the process's, whichever partition forked)."""
        self.mapped_columns = MappedColumns()
        """Copies the checkpoint pages a load mapped into the worker's own memory (:mod:`.mapped_columns`)."""
        self.replicas: dict[int, PartitionReplica] = {
            partition: self._replica(partition, None if receipt_keys is None else receipt_keys[partition])
            for partition in config.partitions
        }
        self._lock = contextlib.ExitStack()
        self._opened = False
        self._server: asyncio.Server | None = None
        self._address: tuple[str, int] | None = None
        self._self_client: WorkerClient | None = None
        self._connections: set[Connection] = set()
        self._drops: PendingDropStore | None = None
        self._opening: dict[int, asyncio.Future[PartitionReplica]] = {}
        """Replicas being opened by :meth:`host`, so that a second call waits for the same one."""

    @staticmethod
    def _check_keys(partitions: Iterable[int], receipt_keys: Mapping[int, bytes]) -> None:
        missing = [p for p in partitions if p not in receipt_keys]
        if missing:
            raise ValueError(f"no receipt key for partitions {missing}")

    def use_receipt_keys(self, receipt_keys: Mapping[int, bytes]) -> None:
        """Give each replica its partition's receipt key (read once its log is recovered), before :meth:`start`."""
        self._check_keys(self.replicas, receipt_keys)
        for partition, replica in self.replicas.items():
            replica.use_receipt_key(receipt_keys[partition])

    def _replica(self, partition: int, receipt_key: bytes | None) -> PartitionReplica:
        return PartitionReplica(
            partition,
            self.config,
            receipt_key,
            self.clock,
            ReplicaPeers(self.peers, partition, self._local_client),
            fail=self._fail,
            on_fatal=self._on_log_failure,
            body_cache=self.body_cache,
            on_sync=self.fsync_seconds.observe,
            sync_place=self.sync_place,
            on_forked=self.huge_pages.after_fork,
            on_loaded=self.mapped_columns.start,
        )

    async def host(self, partition: int, receipt_key: bytes) -> PartitionReplica:
        """Open a replica of ``partition`` on a running worker (a replica set it was just added to); it stands by
        until its controller gives it a role.  A log already in its directory is replayed off the event loop,
        and the replica is published only once open."""
        replica = self.replicas.get(partition)
        if replica is not None:
            return replica
        opening = self._opening.get(partition)
        if opening is None:
            opening = self._opening[partition] = asyncio.ensure_future(self._open_hosted(partition, receipt_key))
            opening.add_done_callback(lambda _: self._opening.pop(partition, None))
        return await asyncio.shield(opening)

    async def _open_hosted(self, partition: int, receipt_key: bytes) -> PartitionReplica:
        replica = self._replica(partition, receipt_key)
        await replica.open_off_loop()
        replica.drops = self._drops
        self.replicas[partition] = replica
        return replica

    # --- life cycle --------------------------------------------------------------------------------

    def open(self) -> None:
        """Lock the data directory, adopt a single-partition layout, and open every replica."""
        directory = self.config.data_dir
        directory.mkdir(parents=True, exist_ok=True)
        self._lock.enter_context(locked(directory))
        # The single-partition layout kept its segments here; they belong to the partition it was started for.
        if self.config.partitions:
            adopt_legacy_log(directory, replica_dir(directory, self.config.partitions[0]))
        self._opened = True
        for replica in self.replicas.values():
            replica.open()

    async def start(self, *, static_roles: bool = True) -> tuple[str, int]:
        """Listen; returns the host and port bound.  With ``static_roles`` each replica takes the role the
        configuration gives it; otherwise every replica stands by until a controller assigns its role."""
        if not self._opened:
            self.open()
        self._check_keys(self.replicas, {p: r.receipt_key for p, r in self.replicas.items() if r.receipt_key})
        self._server = await asyncio.get_running_loop().create_server(
            lambda: WorkerProtocol(self._dispatch, self._connections, self.config.peer_auth),
            self.config.host,
            self.config.port,
            reuse_address=True,
        )
        sockname = self._server.sockets[0].getsockname()
        self._address = (self.config.host, int(sockname[1]))
        self.loop_lag.start()
        self.mapped_columns.start()
        for replica in self.replicas.values():
            replica.vouched.resume()
        if static_roles:
            for replica in self.replicas.values():
                await replica.take_static_role()
        return self._address

    @property
    def address(self) -> tuple[str, int] | None:
        """Where the worker listens, once started."""
        return self._address

    def run_pending_drops(self, store: PendingDropStore) -> None:
        """Let every leadership term carry out its partition's pending queue drops (see
        ``LeaderTerm.start_drops``), the terms running now included."""
        self._drops = store
        for replica in self.replicas.values():
            replica.drops = store
            if replica.term is not None:
                replica.term.start_drops(store)

    def _local_client(self, partition: int) -> WorkerClient | None:
        """A client for this worker itself when it serves ``partition`` and listens; None otherwise."""
        if partition not in self.replicas or self._address is None:
            return None
        if self._self_client is None:
            self._self_client = WorkerClient(*self._address, connect_timeout=5.0, auth=self.config.peer_auth)
        return self._self_client

    async def close(self) -> None:
        """Stop accepting, let what was accepted become durable and be answered, then close everything."""
        if self._server is not None:
            self._server.close()
        await self.loop_lag.stop()
        await self.mapped_columns.stop()
        for conn in list(self._connections):
            with contextlib.suppress(Exception):
                conn.transport.pause_reading()
            conn.cancel_tasks()
        for replica in self.replicas.values():
            await replica.close()
        for conn in list(self._connections):
            conn.flush()
            conn.closed = True
            conn.transport.close()
        if self._server is not None:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._server.wait_closed(), 5)
        if self._self_client is not None:
            await self._self_client.close()
        await self.peers.close()
        self._lock.close()

    def _on_log_failure(self, exc: BaseException) -> None:
        self.fatal = exc
        self.stopped.set()

    def status(self) -> dict[str, Any]:
        """What ``ping`` reports: the worker's identity and each served partition's state and log."""
        return {
            "worker_id": self.config.worker_id,
            "pid": os.getpid(),
            "loop_lag_worst_ms": round(self.loop_lag.worst * 1000),
            "stalls": [stall.as_dict() for stall in self.loop_lag.stalls],
            "partitions": {str(partition): replica.status() for partition, replica in self.replicas.items()},
        }

    # --- requests ----------------------------------------------------------------------------------

    def _dispatch(self, conn: Connection, request_id: int, op: int, payload: bytes) -> None:
        self.requests += 1
        if not op & TRACED:
            self._handle(conn, request_id, op, payload)
            return
        try:
            trace, args = split_trace(payload)
        except FrameError as exc:
            self._fail(conn, request_id, ValueError(str(exc)), op & ~TRACED)
            return
        # Long polls and hand-overs started while handling it inherit the id, so their lines name it too.
        token = REQUEST_ID.set(trace)
        try:
            self._handle(conn, request_id, op & ~TRACED, args)
        finally:
            REQUEST_ID.reset(token)

    def _handle(self, conn: Connection, request_id: int, op: int, payload: bytes | memoryview) -> None:
        replica: PartitionReplica | None = None
        try:
            if op not in PARTITION_OPS:
                if op != Op.PING:
                    raise InvalidAction(f"Unknown worker operation {op}.")
                conn.write(encode_frame(request_id, STATUS_OK, pack(self.status())))
                return
            args = unpack(payload)
            if not isinstance(args, list) or not args or type(args[0]) is not int:
                raise TypeError("a request must start with its partition")
            if log.isEnabledFor(logging.DEBUG):
                log.debug("%s request for partition %d", _op_name(op), args[0])
            replica = self.replicas.get(args[0])
            if replica is None:
                raise NotLeader(partition=args[0], worker=self.config.worker_id)
            result = replica.handlers[op](conn, request_id, args[1:])
        except Exception as exc:
            self._fail(conn, request_id, exc, op)
        else:
            if result is not DEFERRED:
                replica.reply(conn, request_id, result)

    def _fail(self, conn: Connection, request_id: int, exc: BaseException, op: int | None = None) -> None:
        """Answer with the SQS error ``exc`` stands for; a failed log is an outage, a bad request the caller's."""
        if isinstance(exc, SqsError):
            error: SqsError = exc
            if log.isEnabledFor(logging.DEBUG):
                log.debug("%s request answered %s: %s", _op_name(op), error.code, error.message)
        elif isinstance(exc, LogFailed):
            error = ServiceUnavailable()
        elif isinstance(exc, (ValueError, TypeError)):
            log.warning("malformed %s request: %s", op, exc)
            error = InvalidParameterValue(f"Malformed worker request: {exc}")
        else:
            log.error("request %s failed", op, exc_info=exc)
            error = InternalError()
        conn.write(encode_frame(request_id, STATUS_ERROR, pack_error(error)))


def _op_name(op: int | None) -> str:
    try:
        return Op(op).name
    except ValueError:
        return f"operation {op}"
