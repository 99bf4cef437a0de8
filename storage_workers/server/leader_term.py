"""One leadership term of a partition replica: from the claim of an epoch until the replica steps down.

A term owns everything that only a leader runs: the replication stream (appends under the term's epoch,
FETCH and OFFSET_FOR_EPOCH for followers, the commit tracker that gates replies), the request handlers,
long polls, dead-letter hand-overs, move tasks, the periodic state sweep and the pending-drop sweeper.
Ending the term stops all of it before anything else may touch the engine: requests and parked long polls
are answered NotLeader (nothing was done), replies still waiting for the high watermark ServiceUnavailable
(whether their records survive is the next leader's to say, so their outcome is unknown, as a timeout's),
and hand-overs and move tasks are cancelled, to be resumed by whoever leads next.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Coroutine, Iterable
from typing import TYPE_CHECKING, Any

from ferrymq.clock import Clock
from ferrymq.errors import NotLeader, ServiceUnavailable
from ferrymq.rpc import shapes
from ferrymq.rpc.codec import pack, pack_error
from ferrymq.rpc.framing import STATUS_ERROR, STATUS_OK, Op, encode_frame
from ferrymq.storage.drops import PendingDropStore, PendingDropSweeper
from ferrymq.storage.engine import Engine
from ferrymq.storage.engine.records import Record
from ferrymq.storage.handover import DeadLetterForwarder
from ferrymq.storage.log import records as codec
from ferrymq.storage.log.bodies import BodyStore
from ferrymq.storage.log.writer import LogWriter
from ferrymq.storage.move_tasks import MoveTaskRunner
from ferrymq.storage.peers import Peers
from ferrymq.storage.replication import LeaderRole, LeaderStream
from ferrymq.storage.replication.base_copies import BaseCopies
from ferrymq.storage.server.connection import Connection
from ferrymq.storage.server.handlers import DEFERRED, Handler, Handlers
from ferrymq.storage.server.long_poll import LongPolls
from ferrymq.storage.server.maintenance import every

if TYPE_CHECKING:
    from ferrymq.storage.server.config import WorkerConfig

log = logging.getLogger(__name__)

DRAIN_SECONDS = 1.0
"""How long a term handed over waits for what it appended to commit (:meth:`LeaderTerm.drain`): the replica it
hands to is caught up, so this is a few fetches; a follower gone meanwhile must not hold the hand-over."""


class LeaderTerm:
    def __init__(
        self,
        partition: int,
        role: LeaderRole,
        *,
        config: WorkerConfig,
        engine: Engine,
        wal: LogWriter,
        clock: Clock,
        peers: Peers,
        fail: Callable[[Connection, int, BaseException], None],
        on_diverged: Callable[[], None],
        bodies: BodyStore,
    ) -> None:
        """``on_diverged`` is told when the engine applied a record the log refused (the term had ended):
        the replica's state then no longer matches its log and must be rebuilt from it.  ``bodies`` keeps the
        engine's message bodies in ``wal``: it is told the offset of each record appended."""
        self.partition = partition
        self.epoch = role.epoch
        self.config = config
        self.engine = engine
        # Local deadlines only (lag, the answer window): the monotonic clock, which no wall-clock step moves.
        self._now_ms = lambda: int(clock.monotonic() * 1000)
        self.stream = LeaderStream(partition, config.worker_id, role, wal, now_ms=self._now_ms)
        self.long_polls = LongPolls(engine, clock)
        self.forwarder = DeadLetterForwarder(engine, peers)
        self.mover = MoveTaskRunner(
            engine, peers, clock, hold_seconds=config.transfer_hold_seconds, on_delivered=self.long_polls.wake
        )
        self._fail = fail
        self._on_diverged = on_diverged
        self._bodies = bodies
        self.handlers: dict[int, Handler] = Handlers(
            engine=engine,
            partition=partition,
            long_polls=self.long_polls,
            forwarder=self.forwarder,
            mover=self.mover,
            reply=self.reply,
            fail=fail,
        ).table()
        self.answers_until_ms = role.answers_until_ms
        """On the monotonic clock (ms), as ``LeaderRole.answers_until_ms``."""
        self.refusing: str | None = None
        """Why requests are refused before the term ends (:meth:`drain`), or None."""
        self.handlers = {op: self._leased(handler) for op, handler in self.handlers.items()}
        # Replication is fenced by epochs, not by the lease: a follower must still fetch what is to commit.
        self.handlers[Op.FETCH] = self._fetch
        self.handlers[Op.OFFSET_FOR_EPOCH] = self._offset_for_epoch
        self.handlers[Op.SNAPSHOT] = self._snapshot
        self.handlers[Op.COPY_BASE] = self._copy_base
        self._snapshots: dict[str, _StateCopy] = {}
        """Per follower of before COPY_BASE, the copy of the state it is being sent, chunk by chunk."""
        self.copies = BaseCopies(partition, wal)
        """The copies of the first segment followers too far behind are reading."""
        self._tasks: list[asyncio.Task[None]] = []
        self.ended = False
        engine.on_record = self._append

    def _leased(self, handler: Handler) -> Handler:
        """``handler``, refused NotLeader (nothing done) once the lease no longer lets this term answer."""

        def guarded(conn: Connection, request_id: int, args: Any) -> Any:
            until = self.answers_until_ms
            if until is not None and self._now_ms() >= until:
                raise NotLeader(
                    f"Storage worker {self.config.worker_id} holds no live lease on partition {self.partition}."
                )
            if self.refusing is not None:
                raise NotLeader(self.refusing)
            return handler(conn, request_id, args)

        return guarded

    async def drain(self, reason: str, timeout: float = DRAIN_SECONDS) -> bool:
        """Refuse every request from now on (NotLeader: nothing done) and wait up to ``timeout`` seconds for
        everything appended so far to be committed, so that the replies waiting for it are answered before the
        term ends, not left unknown (a hand-over, a stop: a receive whose records commit after an answer of
        ServiceUnavailable leaves its messages in flight, unseen, for their visibility timeout).  Returns whether
        all of it committed in time; :meth:`resume` answers requests again."""
        me = self.config.worker_id
        self.refusing = f"Storage worker {me} is handing partition {self.partition} over: {reason}."
        try:
            await asyncio.wait_for(self.wait_committed(), timeout)
        except (TimeoutError, NotLeader):
            return False
        return True

    def resume(self) -> None:
        """Answer requests again after :meth:`drain` (the hand-over did not happen)."""
        self.refusing = None

    def extend_lease(self, answers_until_ms: int) -> None:
        """The lease was renewed: answer until ``answers_until_ms`` (monotonic clock, ms)."""
        if self.answers_until_ms is not None:
            self.answers_until_ms = max(self.answers_until_ms, answers_until_ms)

    def _append(self, record: Record) -> None:
        try:
            offset = self.stream.append(record)
        except BaseException:
            # The engine applied the record before the log refused it.
            self._on_diverged()
            raise
        self._bodies.keyed(offset)

    # --- requests -------------------------------------------------------------------------------------

    def reply(self, conn: Connection, request_id: int, result: Any) -> None:
        """Answer once every record appended so far is committed."""
        frame = encode_frame(request_id, STATUS_OK, pack(result))
        self.stream.when_committed(self.stream.log.end_offset - 1, _send, (conn, request_id, frame))

    def _fetch(self, conn: Connection, request_id: int, args: Any) -> Any:
        if self.copies.active and args and isinstance(args[0], str):
            # A follower fetching from the log has installed (or given up) the copy it read.
            self.copies.fetched(args[0])
        task = self.stream.fetch(conn, request_id, args, self._fail)
        if task is not None:
            conn.start(task)
        return DEFERRED

    def _offset_for_epoch(self, conn: Connection, request_id: int, args: Any) -> Any:
        # Answered at once: the answer is about the log as it is, nothing waits for a commit.
        conn.write(encode_frame(request_id, STATUS_OK, pack(self.stream.offset_for_epoch(args))))
        return DEFERRED

    def _snapshot(self, conn: Connection, request_id: int, args: Any) -> Any:
        replica, epoch, chunk = shapes.SNAPSHOT.read(args)
        if not isinstance(replica, str) or type(epoch) is not int or type(chunk) is not int or chunk < 0:
            raise TypeError("a snapshot request is a replica id, an epoch and a chunk number")
        self.stream.check_follower(replica, epoch)
        if replica == self.stream.me:
            raise ValueError("a leader copies its state to its followers, not to itself")
        if chunk == 0:
            self._snapshots[replica] = _StateCopy.take(self.engine.snapshot(), self.stream.log)
        copy = self._snapshots.get(replica)
        if copy is None or chunk >= len(copy.chunks):
            raise ValueError(f"no chunk {chunk} of a state copy for {replica}")
        if chunk == len(copy.chunks) - 1:
            del self._snapshots[replica]
        answer = shapes.snapshot_answer(copy.offset, copy.epoch, copy.history, len(copy.chunks), copy.chunks[chunk])
        conn.write(encode_frame(request_id, STATUS_OK, pack(answer)))
        return DEFERRED

    def _copy_base(self, conn: Connection, request_id: int, args: Any) -> Any:
        replica, epoch, copy, position, max_bytes = shapes.COPY_BASE.read(args)
        if not isinstance(replica, str) or not all(type(n) is int for n in (epoch, copy, position, max_bytes)):
            raise TypeError("a base copy request is a replica id and four integers")
        self.stream.check_follower(replica, epoch)
        if replica == self.stream.me:
            raise ValueError("a leader copies its log to its followers, not to itself")
        conn.start(asyncio.get_running_loop().create_task(
            self._answer_copy(conn, request_id, replica, copy, position, max_bytes)
        ))
        return DEFERRED

    async def _answer_copy(
        self, conn: Connection, request_id: int, replica: str, copy: int, position: int, max_bytes: int
    ) -> None:
        try:
            answer = await self.copies.read(replica, copy, position, max_bytes)
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            self._fail(conn, request_id, exc)
            return
        conn.write(encode_frame(request_id, STATUS_OK, pack(shapes.COPY_BASE_ANSWER.build(*answer))))

    async def wait_committed(self) -> None:
        """Return once everything appended so far is committed."""
        fut: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self.stream.when_committed(self.stream.log.end_offset - 1, _resolve, fut)
        await fut

    # --- life cycle -------------------------------------------------------------------------------------

    def start(self) -> None:
        """Resume the partition's move tasks and start the periodic sweep."""
        for queue_id, handle in self.engine.active_move_tasks():
            log.info("partition %d: resuming move task %s of %s", self.partition, handle, queue_id)
            self.mover.launch(queue_id, handle)
        self._spawn(every("state sweep", self.config.sweep_interval_seconds, lambda: self.engine.sweep().more))

    def start_drops(self, drops: PendingDropStore) -> None:
        """Carry out the partition's pending queue drops now and periodically, for as long as the term lasts.

        Only the leader may: a drop cleared by a worker that does not serve the partition would never be
        made; a follower gets its leader's drops as records.  A drop is cleared from the catalog only once
        its record is committed, so no failover loses it."""
        sweeper = PendingDropSweeper(self.partition, drops, self.engine.drop_queue, self.wait_committed)
        self._spawn(sweeper.run(self.config.pending_drops_interval_seconds))

    def _spawn(self, work: Coroutine[Any, Any, None]) -> None:
        self._tasks.append(asyncio.get_running_loop().create_task(work))

    async def end(self, reason: str) -> None:
        """Step down: nothing of the term touches the engine after the first await."""
        if self.ended:
            return
        self.ended = True
        me = self.config.worker_id
        error = NotLeader(f"Storage worker {me} no longer leads partition {self.partition}: {reason}.")
        # Not NotLeader, which tells the front end that nothing was done: these requests' records were
        # appended and may yet be committed by the next leader.
        unknown = ServiceUnavailable(f"Storage worker {me} stepped down before the request was committed.")
        for waiter in self.stream.close(error):
            if isinstance(waiter, asyncio.Future):
                # A wait for the commit (a drain's, the drop sweeper's), not a reply: it ends with the term.
                if not waiter.done():
                    waiter.set_exception(error)
                continue
            conn, request_id, _ = waiter
            conn.write(encode_frame(request_id, STATUS_ERROR, pack_error(unknown)))
        self.long_polls.close(error)
        await self.close()

    async def close(self) -> None:
        """Stop the term's background work (the only part of ending it when the worker shuts down: what was
        appended still becomes durable and is answered when committed)."""
        # The term hooked itself into the engine when it began; what it appends ends with it.
        if self.engine.on_record == self._append:
            self.engine.on_record = None
        self.copies.close()
        for task in self._tasks:
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        await self.mover.close()
        await self.forwarder.close()


SNAPSHOT_CHUNK_BYTES = 4 * 1024 * 1024


class _StateCopy:
    """The engine's state as of the log's last record, as encoded records in chunks of about
    ``SNAPSHOT_CHUNK_BYTES``; taken at once, so later appends do not change it while it is sent."""

    def __init__(self, offset: int, epoch: int, history: list[list[int]], chunks: list[list[bytes]]) -> None:
        self.offset = offset
        self.epoch = epoch
        self.history = history
        self.chunks = chunks

    @classmethod
    def take(cls, records: Iterable[Record], wal: LogWriter) -> _StateCopy:
        chunks: list[list[bytes]] = [[]]
        size = 0
        for record in records:
            payload = codec.encode(record)
            if size and size + len(payload) > SNAPSHOT_CHUNK_BYTES:
                chunks.append([])
                size = 0
            chunks[-1].append(payload)
            size += len(payload)
        offset = wal.end_offset - 1
        return cls(offset, wal.epoch, [[e, f] for e, f in wal.epochs.entries], chunks)


def _send(arg: tuple[Connection, int, bytes]) -> None:
    arg[0].write(arg[2])


def _resolve(fut: asyncio.Future[None]) -> None:
    if not fut.done():
        fut.set_result(None)
