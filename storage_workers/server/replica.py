"""One partition as a worker holds it: its log directory, engine, compactor and receipt key, and the role it
plays now.

A :class:`PartitionReplica` is opened (its log replayed into its engine) and closed by its
:class:`~ferrymq.storage.server.worker.StorageWorker`, which owns the one RPC listener and routes each request
to the replica of the partition it names.  In between it plays one role at a time:

- **leader** (:meth:`lead`): a :class:`~ferrymq.storage.server.leader_term.LeaderTerm` answers requests, and
  every reply waits until the request's last record is committed (:mod:`ferrymq.storage.replication.commit`);
- **follower** (:meth:`follow`): every request is answered NotLeader while a
  :class:`~ferrymq.storage.replication.Follower` pulls the leader's records into the log and the engine, so the
  engine is a hot standby: taking over is starting a term on it, no replay;
- **standing by** (:meth:`stand_by`): no role, every request answered NotLeader.

Roles come from the worker's controller (:mod:`ferrymq.storage.replication.controller`), which follows the
partition's coordination item, or are static (``WorkerConfig.role``) for a worker outside any cluster.
The engine's state always equals a replay of the log: a follower that cuts a diverged tail (or a term that
ended with a record the log refused) rebuilds it by recovery.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable, Coroutine
from dataclasses import replace
from pathlib import Path
from typing import Any

from ferrymq.clock import Clock
from ferrymq.errors import NotLeader
from ferrymq.storage.drops import PendingDropStore
from ferrymq.storage.engine import Engine
from ferrymq.storage.engine.records import Record
from ferrymq.storage.engine.state import PartitionState
from ferrymq.storage.log import mapped_chunks
from ferrymq.storage.log.base import adopt_base, install_snapshot
from ferrymq.storage.log.bodies import BodyStore
from ferrymq.storage.log.body_cache import BodyCache
from ferrymq.storage.log.checkpoint import (
    Checkpoint,
    CheckpointUnusable,
    checkpoint_of_base,
    fill_crcs,
    read_checkpoint,
    segment_files,
    write_checkpoint,
)
from ferrymq.storage.log.compaction import Compactor, Placement
from ferrymq.storage.log.epochs import EpochHistory
from ferrymq.storage.log.format import VERSION as LOG_VERSION
from ferrymq.storage.log.format import CorruptSegment
from ferrymq.storage.log.lock import locked
from ferrymq.storage.log.recovery import Checkpointed, RecoveredLog, recover
from ferrymq.storage.log.segments import SegmentInfo, crc_of, discard_checkpoint, segment_path
from ferrymq.storage.log.sync_place import SyncPlace
from ferrymq.storage.log.writer import LogWriter
from ferrymq.storage.peers import Peers
from ferrymq.storage.replication import Follower, FollowerRole, LeaderRole
from ferrymq.storage.server.background import CPU_SHARE, in_background
from ferrymq.storage.server.config import WorkerConfig
from ferrymq.storage.server.connection import Connection
from ferrymq.storage.server.damage import LOST_COPY_MARK, Damage, mark_lost_copy, quarantine
from ferrymq.storage.server.handlers import PARTITION_OPS, Handler
from ferrymq.storage.server.layout import replica_dir
from ferrymq.storage.server.leader_term import LeaderTerm
from ferrymq.storage.server.loop_lag import ThreadAccount
from ferrymq.storage.server.maintenance import StateFold
from ferrymq.storage.server.running_checkpoint import CheckpointFork, discard_leftovers
from ferrymq.storage.server.vouched_segments import VouchedSegments

log = logging.getLogger(__name__)


class PartitionReplica:
    def __init__(
        self,
        partition: int,
        config: WorkerConfig,
        receipt_key: bytes | None,
        clock: Clock,
        peers: Peers,
        *,
        fail: Callable[[Connection, int, BaseException], None],
        on_fatal: Callable[[BaseException], None],
        body_cache: BodyCache | None = None,
        on_sync: Callable[[float], None] | None = None,
        sync_place: SyncPlace | None = None,
        on_forked: Callable[[float], None] | None = None,
        on_loaded: Callable[[], None] | None = None,
    ) -> None:
        """``receipt_key`` authenticates the partition's receipt handles (see ``PartitionMap.receipt_key``; None:
        not read yet, given with :meth:`use_receipt_key` before the replica serves);
        ``fail`` answers a request with an error; ``on_fatal`` is told when the log fails for good;
        ``body_cache`` keeps recent message bodies (the worker's, shared by its partitions; else one of the
        replica's own, ``config.body_cache_bytes``); ``on_sync`` is given to every log the replica opens
        (``LogWriter.on_sync``: the worker's fsync latency metric), and ``sync_place`` too (where their commits are
        synced: the worker's, :mod:`..log.sync_place`); ``on_forked`` is told how long each fork of a
        checkpoint taken while serving held the loop (the worker's huge pages); ``on_loaded`` is called each time
        the replica serves from a state it recovered, which may hold a checkpoint's mapped pages (the worker's
        :mod:`.mapped_columns`)."""
        self.partition = partition
        self.config = config
        self.directory = replica_dir(config.data_dir, partition)
        self.receipt_key = receipt_key
        self._on_loaded = on_loaded
        self.clock = clock
        self.peers = peers
        self.body_cache = body_cache if body_cache is not None else BodyCache(config.body_cache_bytes)
        self.engine, self.bodies = self._new_engine()
        """The state, and where it keeps message bodies (the log: replaced with the engine, by recovery)."""
        self.log: LogWriter | None = None
        self.compactor: Compactor | None = None
        self.term: LeaderTerm | None = None
        """The leadership term, while this replica leads."""
        self.follower: Follower | None = None
        """The fetch loop, while this replica follows."""
        self.following: tuple[tuple[str, int], int] | None = None
        """The leader address and epoch followed."""
        self.drops: PendingDropStore | None = None
        """The catalog's pending drops, carried out by each term (None: a worker outside any catalog)."""
        self.handlers: dict[int, Handler] = self._standing_by
        self.diverged = False
        """The engine applied a record its log refused: rebuild before following."""
        self.role_changes = 0
        self.damage: Damage | None = None
        """The damage found in the log at open, and what became of it (:mod:`.damage`)."""
        self._on_sync = on_sync
        self._sync_place = sync_place
        self._fail = fail
        self._on_fatal = on_fatal
        self._lock = contextlib.ExitStack()
        self._follow_task: asyncio.Task[None] | None = None
        self._rebuild_task: asyncio.Task[None] | None = None
        self._changing = asyncio.Lock()
        self._lost_copy_marked: bool | None = None
        """Whether the lost-copy mark is in the log directory; None until read."""
        self.checkpoints = CheckpointFork(
            partition, self.directory, config.checkpoint_bytes, config.checkpoint_max_bytes, on_forked,
            config.checkpoint_records, on_may_take=self._checkpoint_while_serving,
        )
        """Checkpoints taken while serving (:mod:`.running_checkpoint`)."""
        self._crcs: dict[tuple[int, int, int], int] = {}
        """CRC-32 of sealed segments by ``(index, inode, size)``, computed once per file for checkpoints."""
        self._crc_task: asyncio.Task[None] | None = None
        self._freeing: asyncio.Task[None] | None = None
        """Frees the rows of purged and dropped queues a step at a time (``PartitionState.free_unowned``)."""
        self.vouched = VouchedSegments(partition, self.directory)
        """Sealed segments a start took on its checkpoint's word, checked after it (:mod:`.vouched_segments`)."""

    def use_receipt_key(self, receipt_key: bytes) -> None:
        self.receipt_key = receipt_key
        self.engine.use_receipt_key(receipt_key)

    @property
    def _standing_by(self) -> dict[int, Handler]:
        return dict.fromkeys(PARTITION_OPS, self._not_leader)

    def _new_engine(self, partition: PartitionState | None = None) -> tuple[Engine, BodyStore]:
        engine = Engine(self.clock, self.receipt_key, partition=partition)
        engine.transfer_hold_seconds = self.config.transfer_hold_seconds
        return engine, BodyStore(
            engine.partition.table, self.directory, self.body_cache, caching=lambda: self.term is not None
        )

    def _recover(self) -> tuple[Engine, BodyStore, RecoveredLog]:
        """A new state recovered from the log: from the checkpoint and the records after it where there is a
        usable one (:mod:`~ferrymq.storage.log.checkpoint`), else from the whole log."""
        checkpoint = self._checkpoint()
        if checkpoint is not None:
            try:
                return self._replay(checkpoint)
            except CorruptSegment:
                raise
            except Exception as exc:
                # The log is the source of truth: a checkpoint it does not follow from is dropped, not trusted.
                log.error("partition %d: the checkpoint as of offset %d does not fit the log (%s); replaying the "
                          "whole log", self.partition, checkpoint.offset, exc)
                discard_checkpoint(self.directory)
        return self._replay(None)

    def _replay(self, checkpoint: Checkpoint | None) -> tuple[Engine, BodyStore, RecoveredLog]:
        engine, bodies = self._new_engine(checkpoint.state if checkpoint is not None else None)
        bodies.recovering = True
        try:
            unplaced = checkpoint.unplaced if checkpoint is not None else []
            if checkpoint is not None:
                bodies.adopt(checkpoint.files, unplaced)
            recovered = recover(
                self.directory,
                engine.apply,
                located=bodies.located,
                skip_through=checkpoint.offset if checkpoint is not None else 0,
                passed=bodies.passed if unplaced else None,
                passed_from=unplaced[0][0] - 1 if unplaced else 0,
                known=(
                    Checkpointed(checkpoint.known(), checkpoint.history, checkpoint.last_epoch, check_sealed=False)
                    if checkpoint is not None and checkpoint.extents
                    else None
                ),
            )
            if checkpoint is not None and (recovered.end_offset <= checkpoint.offset or not bodies.all_placed):
                raise ValueError("the log no longer holds every record the checkpoint does (a crash lost the last)")
        except BaseException:
            bodies.close()
            raise
        finally:
            bodies.recovering = False
        bodies.applied_through = recovered.end_offset - 1
        return engine, bodies, recovered

    def _checkpoint(self) -> Checkpoint | None:
        # The load's time as the kernel counts it: at a start, three workers and the rest of the stack share the
        # cores, and a load that took long while waiting for a CPU is not a slow load.
        with ThreadAccount() as account:
            wall, (cpu, waited, _), read = time.monotonic(), account.read(), account.bytes_read()
            try:
                checkpoint = read_checkpoint(self.directory)
            except CheckpointUnusable as exc:
                log.warning("partition %d: %s; replaying the whole log", self.partition, exc)
                return None
            now_cpu, now_waited, _ = account.read()
            loaded = (f"loaded in {time.monotonic() - wall:.2f} s: {now_cpu - cpu:.2f} s on a CPU, "
                      f"{now_waited - waited:.2f} s waiting for one, {(account.bytes_read() - read) / 1e6:.1f} MB "
                      "read from disk")
        if checkpoint is None:
            return None
        if not checkpoint.matches(self.directory):
            log.info("partition %d: the checkpoint as of offset %d names segments the log no longer has as they "
                     "were; replaying the whole log", self.partition, checkpoint.offset)
            return None
        log.info("partition %d: starting from the checkpoint as of offset %d (%d messages; a base and %d deltas, "
                 "%s), then the log after it", self.partition, checkpoint.offset, checkpoint.state.table.live,
                 checkpoint.deltas, loaded)
        return checkpoint

    def _state_as_logged(self, *, serving: bool) -> Checkpoint | None:
        """The state as of the log's last record, as a checkpoint, when it is exactly that (nothing refused,
        nothing applied past the log) and the log is of today's format; else None.  ``serving``: records not yet
        durable may be in it (listed, for recovery to place their messages); else the log is flushed and every
        message placed."""
        wal = self.log
        if wal is None or wal.failed is not None or self.diverged or self.refusing or self.vouched.doubted:
            return None
        offset = wal.end_offset - 1
        files = self.bodies.files(unplaced_ok=serving)
        if (
            offset < 1
            or self.bodies.applied_through != offset
            or files is None
            or any(s.version != LOG_VERSION for s in wal.segments)
        ):
            return None
        found = segment_files(self.directory, [s.index for s in wal.segments])
        if serving:
            # Only what is durable counts: a crash may cut the bytes of a batch being written.
            found = [(index, inode, s.size) for (index, inode, _), s in zip(found, wal.segments, strict=True)]
        unplaced = self.bodies.unplaced() if serving else []
        extents = [
            (s.index, s.size, s.flags, s.version, s.first_offset, s.end_offset, self._crcs.get(key))
            for s, key in zip(wal.segments, found, strict=True)
        ]
        return Checkpoint(
            offset, found, files, self.engine.partition, unplaced, extents, wal.epochs.entries, wal.epoch
        )

    def _sealed_crcs_known(self, wal: LogWriter) -> bool:
        """Whether the CRC-32 of every sealed segment is known (a checkpoint vouches for them by it); if not,
        have them computed in a thread, once per file, for a later checkpoint."""
        if self._crc_task is not None and not self._crc_task.done():
            return False
        sealed = segment_files(self.directory, [s.index for s in wal.sealed_segments()])
        missing = [key for key in sealed if key not in self._crcs]
        if missing:
            self._crc_task = asyncio.get_running_loop().create_task(self._compute_crcs(missing, set(sealed)))
        return not missing

    async def _compute_crcs(self, keys: list[tuple[int, int, int]], current: set[tuple[int, int, int]]) -> None:
        for key in keys:
            index, _, size = key
            try:
                crc = await in_background(crc_of, segment_path(self.directory, index), size, cpu_share=CPU_SHARE)
            except OSError:
                return
            if crc is not None:
                self._crcs[key] = crc
        # Files compacted away or cut since are forgotten.
        self._crcs = {key: crc for key, crc in self._crcs.items() if key in current}

    def _checkpoint_while_serving(self) -> None:
        wal = self.log
        if wal is None or not self.checkpoints.due(wal) or (self.compactor is not None and self.compactor.running):
            return
        if not self._sealed_crcs_known(wal):
            return
        checkpoint = self._state_as_logged(serving=True)
        if checkpoint is not None:
            try:
                self.checkpoints.take(wal, checkpoint)
            except OSError as exc:
                log.warning("partition %d: no checkpoint taken (%s)", self.partition, exc)

    async def _write_checkpoint(self) -> None:
        """At stop, the state as of the log's last record (:meth:`_state_as_logged`)."""
        checkpoint = self._state_as_logged(serving=False)
        if checkpoint is None:
            return
        offset = checkpoint.offset

        def write() -> int:
            fill_crcs(self.directory, checkpoint)
            return write_checkpoint(self.directory, checkpoint)

        try:
            size = await asyncio.to_thread(write)
        except (OSError, CheckpointUnusable) as exc:
            log.warning("partition %d: no checkpoint written (%s); the next start replays the whole log",
                        self.partition, exc)
            return
        log.info("partition %d: checkpoint as of offset %d written (%d bytes)", self.partition, offset, size)

    def _checkpoint_base(
        self, folding: StateFold, base: SegmentInfo, placed: list[Placement], keep: frozenset[str] | None
    ) -> None:
        """In compaction's thread: the state the new base holds, as a checkpoint, so that a start after a crash
        replays only the log after the base (a failure here costs that, never the compaction)."""
        state, folding.state = folding.state, None
        if state is None or self.vouched.doubted:
            return
        try:
            size = checkpoint_of_base(self.directory, state, base, placed, keep)
        except Exception as exc:
            log.warning("partition %d: no checkpoint written with the new base (%s)", self.partition, exc)
            return
        if size is not None:
            log.info("partition %d: checkpoint as of offset %d written with the new base (%d bytes)",
                     self.partition, base.first_offset - 1, size)

    def _publish(self, engine: Engine, bodies: BodyStore) -> None:
        """Serve from a state recovery completed (the previous one's files are let go)."""
        self.bodies.close()
        self.engine, self.bodies = engine, bodies
        engine.partition.free_in_steps = True
        self._free_unowned_soon()
        # From here only the loop writes the table: what its load mapped may be copied (``engine.columns``).
        mapped_chunks.settle(engine.partition.table.column_views())
        if self._on_loaded is not None:
            self._on_loaded()

    # --- the log and the state ------------------------------------------------------------------------

    def open(self) -> None:
        """Lock the partition's log directory, replay its log into the engine and get ready to append (at
        start, before the worker serves anything).  A damaged log leaves the replica refusing (see
        :mod:`.damage`)."""
        self._lock_directory()
        try:
            engine, bodies, recovered = self._recover()
        except CorruptSegment as exc:
            self._found_damage(exc)
            return
        self._publish(engine, bodies)
        self._use(recovered)

    async def open_off_loop(self) -> None:
        """:meth:`open` for a running worker: the replay, which may take seconds for a large log, runs in a
        thread while the event loop goes on serving the other partitions."""
        self._lock_directory()
        try:
            engine, bodies, recovered = await asyncio.to_thread(self._recover)
        except CorruptSegment as exc:
            self._found_damage(exc)
            return
        except BaseException:
            # A replica that failed to open is dropped: it must not keep the directory locked against the next try.
            self._lock.close()
            raise
        self._publish(engine, bodies)
        self._use(recovered)

    # --- damage ---------------------------------------------------------------------------------------------

    async def _vouched_segment_damaged(self, exc: CorruptSegment) -> None:
        """A sealed segment's bytes changed since the checkpoint that vouched for them (:mod:`.vouched_segments`):
        no checkpoint names this log any more, and the worker stops so that its next start finds the damage."""
        log.error("partition %d: damaged log: %s", self.partition, exc)
        await self.checkpoints.close()
        await asyncio.to_thread(discard_checkpoint, self.directory)
        self._on_fatal(exc)

    @property
    def refusing(self) -> bool:
        """The log was found damaged and no copy replaced it: no role may be played (``damage`` says why)."""
        return self.damage is not None and self.log is None

    def _found_damage(self, exc: CorruptSegment) -> None:
        self.damage = Damage.of(exc, self.clock.now())
        self.handlers = dict.fromkeys(PARTITION_OPS, self._refuse_damaged)
        log.error("partition %d: damaged log: %s", self.partition, exc)

    def refuse(self, why: str) -> None:
        """Keep refusing the damaged copy, left where it is: no intact replica can replace it."""
        assert self.damage is not None
        self.damage = replace(self.damage, refused=why)
        log.error(
            "partition %d: the damaged log stays as it is and the partition is refused on this worker: %s (%s)",
            self.partition, why, self.damage.detail,
        )

    async def set_aside(self) -> None:
        """Move the damaged log directory aside (kept for inspection) and start over with an empty log, which
        the controller has follow the leader like a new replica."""
        assert self.damage is not None and self.log is None
        target = await asyncio.to_thread(quarantine, self.directory, self.clock.now())
        self._lock.close()
        self._lock = contextlib.ExitStack()
        self.damage = replace(self.damage, set_aside=str(target))
        where = f"{self.damage.segment} at byte {self.damage.byte}" if self.damage.segment else self.damage.detail
        log.warning(
            "partition %d: damaged log (%s) set aside at %s; catching up from the leader with an empty log",
            self.partition, where, target,
        )
        self.handlers = self._standing_by
        self._lost_copy_marked = None
        await self.open_off_loop()
        await asyncio.to_thread(mark_lost_copy, self.directory)
        self._lost_copy_marked = True

    @property
    def lost_copy(self) -> bool:
        """This replica's copy was set aside and no leader has heard so yet (the follower tells the next one)."""
        # Asked before every fetch: the mark is read from disk once, then known from what this replica does to it.
        marked = self._lost_copy_marked
        if marked is None:
            marked = self._lost_copy_marked = (self.directory / LOST_COPY_MARK).exists()
        return marked

    def lost_copy_reported(self) -> None:
        (self.directory / LOST_COPY_MARK).unlink(missing_ok=True)
        self._lost_copy_marked = False

    def _refuse_damaged(self, conn: Connection, request_id: int, args: Any) -> Any:
        raise NotLeader(
            f"Partition {self.partition}'s log on storage worker {self.config.worker_id} is damaged; it is refused."
        )

    def _lock_directory(self) -> None:
        self.directory.mkdir(parents=True, exist_ok=True)
        self._lock.enter_context(locked(self.directory))
        discard_leftovers(self.directory)

    def _use(self, recovered: RecoveredLog) -> None:
        self.log = wal = LogWriter(
            self.directory,
            recovered,
            segment_bytes=self.config.segment_bytes,
            max_batch=self.config.group_commit_max_batch,
            on_fatal=self._on_fatal,
            on_placed=self.bodies.placed,
            on_commit=self._committed,
            on_sync=self._on_sync,
            sync_place=self._sync_place,
        )
        folding = StateFold()
        self.compactor = Compactor(
            wal,
            folding,
            lambda: self.engine.live_bytes,
            min_bytes=self.config.compact_min_bytes,
            ratio=self.config.compact_ratio,
            live_queues=lambda: self.engine.queues.keys(),
            relocate=self.bodies.relocate,
            after_base=lambda base, placed, keep: self._checkpoint_base(folding, base, placed, keep),
            held=lambda: self.term is not None and self.term.copies.active,
        )
        # Until checked, a sealed segment's CRC-32 is what the checkpoint says, and later checkpoints say the same.
        self._crcs.update(self.vouched.claims(recovered.unchecked))
        self.vouched.check(wal, recovered.unchecked, self._vouched_segment_damaged)
        log.info(
            "partition %d: recovered %d queues, %d messages from %d segments (offsets up to %d) in %s",
            self.partition,
            len(self.engine.queues),
            sum(len(q.msgs) for q in self.engine.queues.values()),
            len(recovered.segments),
            recovered.end_offset,
            self.directory,
        )

    async def _rebuild(self) -> None:
        """Replay the log into a new engine (after a cut, or a refused record)."""
        if self.compactor is not None:
            await self.compactor.close()
        if self.log is not None:
            await self.log.close()
        # Filled in a thread and published only when complete: status and metrics read the engine's queues
        # on the loop meanwhile, and must never see a dictionary that another thread is growing.
        engine, bodies, recovered = await asyncio.to_thread(self._recover)
        self._publish(engine, bodies)
        self._use(recovered)
        self.diverged = False

    def apply(self, record: Record) -> None:
        """Apply a record the follower appended (the follower's host)."""
        self.engine.apply(record)
        assert self.log is not None
        self.bodies.keyed(self.log.end_offset - 1)

    async def truncate(self, end_offset: int) -> None:
        """Cut the log so that ``end_offset`` is its end and rebuild the state (the follower's host).

        The work runs in a task of its own that a cancelled follower does not interrupt (a log closed
        halfway through a rebuild would be no log at all); whoever ends the role waits for it."""
        assert self.log is not None
        wal = self.log

        async def cut_and_rebuild() -> None:
            await wal.truncate_after(end_offset - 1)
            await self._rebuild()

        await self._shielded(cut_and_rebuild())

    async def install(self, offset: int, epoch: int, history: list[tuple[int, int]], payloads: list[bytes]) -> None:
        """Replace the log by a copy of the leader's state as of ``offset`` and rebuild (the follower's host)."""
        await self._replace_log(
            lambda: install_snapshot(self.directory, payloads, offset, epoch, EpochHistory(history))
        )

    async def install_base(self, staged: Path) -> None:
        """Replace the log by the checked copy of the leader's first segment at ``staged`` and rebuild (the
        follower's host)."""
        await self._replace_log(lambda: adopt_base(self.directory, staged))

    async def _replace_log(self, swap: Callable[[], None]) -> None:
        async def replace_and_rebuild() -> None:
            if self.compactor is not None:
                await self.compactor.close()
            if self.log is not None:
                await self.log.close()
            self.log = None
            await asyncio.to_thread(swap)
            await self._rebuild()

        await self._shielded(replace_and_rebuild())

    async def _shielded(self, work: Coroutine[Any, Any, None]) -> None:
        self._rebuild_task = task = asyncio.get_running_loop().create_task(work)
        await asyncio.shield(task)

    def _free_unowned_soon(self) -> None:
        if self._freeing is not None or not self.engine.partition.unowned:
            return
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            return  # opened before the loop runs: the first commit starts it
        self._freeing = loop.create_task(self._free_unowned())

    async def _free_unowned(self) -> None:
        try:
            # The engine is read each step: a rebuild may replace it, backlog and all.
            while self.engine.partition.free_unowned():
                await asyncio.sleep(0)
        finally:
            self._freeing = None

    def _committed(self) -> None:
        assert self.compactor is not None
        self._free_unowned_soon()
        self.compactor.check()
        self._checkpoint_while_serving()
        if self.term is not None:
            self.term.stream.committed()

    # --- roles ----------------------------------------------------------------------------------------------

    @property
    def leading_epoch(self) -> int | None:
        return self.term.epoch if self.term is not None else None

    async def lead(self, role: LeaderRole) -> None:
        """Lead in ``role.epoch`` from this replica's state as it is (a follower's is current: no replay)."""
        async with self._changing:
            await self._end_role(f"it leads epoch {role.epoch} now")
            if self.diverged:
                await self._rebuild()
            assert self.log is not None
            self.term = term = LeaderTerm(
                self.partition,
                role,
                config=self.config,
                engine=self.engine,
                wal=self.log,
                clock=self.clock,
                peers=self.peers,
                fail=self._fail,
                on_diverged=self._mark_diverged,
                bodies=self.bodies,
            )
            self.handlers = term.handlers
            self.role_changes += 1
            term.start()
            if self.drops is not None:
                term.start_drops(self.drops)
            log.info(
                "partition %d: leading in epoch %d (replicas %s, in sync %s, acks %s) from offset %d",
                self.partition,
                role.epoch,
                ",".join(term.stream.tracker.replicas),
                ",".join(sorted(term.stream.tracker.isr)),
                term.stream.tracker.acks.value,
                self.log.end_offset,
            )

    async def follow(self, role: FollowerRole, *, on_trouble: Callable[[], None] = lambda: None) -> None:
        """Follow the leader at ``role.leader`` in ``role.epoch`` (reconciling the log with it first)."""
        async with self._changing:
            await self._end_role(f"it follows {role.leader[0]}:{role.leader[1]} in epoch {role.epoch}")
            if self.diverged:
                await self._rebuild()
            self.follower = follower = Follower(
                self.partition, self.config.worker_id, role, self, on_trouble=on_trouble, auth=self.config.peer_auth
            )
            self.following = (role.leader, role.epoch)
            self.role_changes += 1
            self._follow_task = asyncio.get_running_loop().create_task(follower.run())
            log.info(
                "partition %d: following %s:%d in epoch %d", self.partition, role.leader[0], role.leader[1], role.epoch
            )

    async def stand_by(self, reason: str) -> None:
        """Play no role: answer every request NotLeader."""
        async with self._changing:
            if self.term is not None or self.follower is not None:
                await self._end_role(reason)
                self.role_changes += 1
                log.info("partition %d: standing by: %s", self.partition, reason)

    def _mark_diverged(self) -> None:
        self.diverged = True

    async def _end_role(self, reason: str) -> None:
        self.handlers = self._standing_by
        term, self.term = self.term, None
        if term is not None:
            await term.end(reason)
        await self._stop_following()

    async def _stop_following(self) -> None:
        """Stop the fetch loop, if any, and wait for a cut or a state copy it started (it is never interrupted)."""
        follower, self.follower = self.follower, None
        self.following = None
        task, self._follow_task = self._follow_task, None
        if task is not None:
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)
        if follower is not None:
            await follower.close()
        rebuild, self._rebuild_task = self._rebuild_task, None
        if rebuild is not None:
            await asyncio.gather(rebuild, return_exceptions=True)

    async def take_static_role(self) -> None:
        """Take the role ``WorkerConfig.role`` gives (a worker outside any cluster); none while refusing."""
        if self.refusing:
            return
        role = self.config.role(self.partition)
        await (self.follow(role) if isinstance(role, FollowerRole) else self.lead(role))

    def _not_leader(self, conn: Connection, request_id: int, args: Any) -> Any:
        raise NotLeader(f"Storage worker {self.config.worker_id} does not lead partition {self.partition}.")

    def reply(self, conn: Connection, request_id: int, result: Any) -> None:
        """Answer once every record appended so far is committed."""
        term = self.term
        if term is None:
            self._fail(conn, request_id, NotLeader(f"Partition {self.partition} changed hands."))
        else:
            term.reply(conn, request_id, result)

    async def close(self) -> None:
        """Stop the role's work, let what was appended become durable (and be answered), release the
        directory."""
        term = self.term
        if term is not None:
            await term.close()
        await self._stop_following()
        if self.compactor is not None:
            await self.compactor.close()
        await self.checkpoints.close()
        await self.vouched.close()
        for task in (self._crc_task, self._freeing):
            if task is not None:
                task.cancel()
                await asyncio.gather(task, return_exceptions=True)
        if self.log is not None:
            await self.log.close()
            await self._write_checkpoint()
        self.bodies.close()
        self._lock.close()

    def status(self) -> dict[str, Any]:
        """The partition's part of ``ping``: role, replication positions, size of the state and of the log."""
        damage = self.damage.as_dict() if self.damage is not None else None
        if self.refusing:
            return {"role": "refused", "damage": damage, "role_changes": self.role_changes}
        if self.log is None:
            return {"role": "follower", "rebuilding": True, "role_changes": self.role_changes}
        term = self.term
        tracker = term.stream.tracker if term is not None else None
        follower = self.follower
        role = "leader" if term is not None else "follower" if follower is not None else "standby"
        return {
            "role": role,
            "epoch": term.epoch if term is not None else self.following[1] if self.following else None,
            "leader": list(self.following[0]) if self.following else None,
            "end_offset": self.log.end_offset,
            "durable_offset": self.log.durable_offset,
            "high_watermark": tracker.high_watermark if tracker is not None else None,
            "isr": sorted(tracker.isr) if tracker is not None else None,
            "acks": tracker.acks.value if tracker is not None else None,
            "followers": dict(tracker.acked) if tracker is not None else None,
            "waiting_replies": tracker.waiting if tracker is not None else 0,
            "fetches": follower.fetches if follower is not None else 0,
            "role_changes": self.role_changes,
            "damage": damage,
            "queues": len(self.engine.queues),
            "messages": sum(len(q.msgs) for q in self.engine.queues.values()),
            "log_bytes": self.log.total_bytes,
            "log_segments": len(self.log.segments),
            "log_batches": self.log.batches,
            "compactions": self.compactor.runs if self.compactor else 0,
            "compaction": self.compactor.status() if self.compactor else None,
            "dead_letter_handovers": (
                {
                    "in_flight": term.forwarder.in_flight,
                    "deferred": term.forwarder.deferred,
                    "forwarded": term.forwarder.forwarded,
                }
                if term is not None
                else None
            ),
        }
