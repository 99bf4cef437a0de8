"""The follower side of one partition's replication stream: a loop that pulls the leader's records, appends
them to this replica's log and applies them to its state.

Before its first fetch from a leader the follower reconciles its log with the leader's by epoch
(OFFSET_FOR_EPOCH, the rules of :func:`ferrymq.replication_rules.truncation_point`): what it holds from
epochs the leader does not share is cut, and its state is rebuilt from what is left (the replica's
``truncate``), so a deposed leader's unreplicated tail never reaches another replica.

Each FETCH asks from this log's end and carries how far its fsync has come, which the leader counts as the
acknowledgement.  A replica whose damaged copy was set aside reports 0 instead until a leader has heard it
once: a leader whose term began before the replica left the in-sync set still counts it in sync, and must
drop it and add it back once caught up (``LeaderStream._lost_copy``).

Fetches are pipelined while records come faster than one per fetch: the next one goes as soon as a batch is
appended, without waiting for that batch's fsync; if the leader has nothing new meanwhile, the loop waits for
its own fsync and then reports it with a fetch that waits at the leader for new records.  When a fetch brings
a single record (a client sending one message at a time), the pipelined fetch would only come back empty,
costing both sides a round trip per record: the loop then waits for its fsync first and reports it in the
fetch that waits, until a fetch brings several records again.  A restarted follower simply reconciles and
fetches from its recovered log's end.

A leader that cannot be reached, or that refuses the epoch, is reported through ``on_trouble`` (the worker's
controller then reads the partition's coordination item again) and tried again after a pause.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from pathlib import Path
from typing import Protocol

from ferrymq.errors import InvalidAction, ServiceUnavailable, SnapshotNeeded, SqsError
from ferrymq.replication_rules import AskAbout, EpochEnd, first_question, truncation_point
from ferrymq.rpc.client import WorkerClient
from ferrymq.rpc.peer_auth import PeerAuth
from ferrymq.storage.engine.records import Record
from ferrymq.storage.log import records as codec
from ferrymq.storage.log.base_copy import COPY_CHUNK_BYTES, BaseReceiver
from ferrymq.storage.log.format import CorruptSegment
from ferrymq.storage.log.writer import LogWriter
from ferrymq.storage.replication.roles import FollowerRole

log = logging.getLogger(__name__)


APPLY_TURN_SECONDS = 0.02
"""How long a follower applies fetched records before letting the loop turn (the rest follow in the next turn)."""

LOST_COPY_OFFSET = 0
"""The durable offset a follower reports once after its damaged copy was set aside (see ``LeaderStream``)."""


class FollowerHost(Protocol):
    """What the follower needs of the replica it runs in; ``log`` may change after ``truncate``.  A host may
    also say ``lost_copy`` (its copy was set aside: report it to the leader) and be told
    ``lost_copy_reported()``."""

    @property
    def log(self) -> LogWriter | None: ...

    @property
    def directory(self) -> Path:
        """The partition's log directory (where a copy is staged)."""
        ...

    def apply(self, record: Record) -> None: ...

    async def truncate(self, end_offset: int) -> None:
        """Cut the log so that ``end_offset`` is its end, and rebuild the state from what is left."""
        ...

    async def install(self, offset: int, epoch: int, history: list[tuple[int, int]], payloads: list[bytes]) -> None:
        """Replace the log by the leader's state as of ``offset`` (appended in ``epoch``), and rebuild from it."""
        ...

    async def install_base(self, staged: Path) -> None:
        """Replace the log by the checked copy of the leader's first segment at ``staged``, and rebuild."""
        ...


class Follower:
    def __init__(
        self,
        partition: int,
        me: str,
        role: FollowerRole,
        host: FollowerHost,
        *,
        on_trouble: Callable[[], None] = lambda: None,
        auth: PeerAuth | None = None,
    ) -> None:
        self.partition = partition
        self.me = me
        self.role = role
        self.host = host
        self.on_trouble = on_trouble
        # The leader lets its followers fetch only after the cluster-secret handshake, like any other client.
        self.client = WorkerClient(*role.leader, connect_timeout=max(role.retry_seconds, 1.0), auth=auth)
        self.fetches = 0
        """FETCH requests answered so far."""
        self.truncated_to: int | None = None
        """Where reconciliation cut the log, when it cut anything."""
        self.copies = 0
        """Copies of the leader's state installed (the leader had compacted away what this log lacked)."""
        self.copied_bytes = 0
        """Bytes of the leader's first segment copied into installed copies."""
        self.refused_copies = 0
        """Copies that did not check out (damaged on the way), thrown away before anything was replaced."""
        self.copy_memory = 0
        """The most bytes of a copy held in memory at once (the rest went straight to the staging file)."""
        self.failure: BaseException | None = None
        """What stopped the loop for good (a frame this log cannot take), if anything."""
        self._running = asyncio.Event()
        self._running.set()

    def pause(self) -> None:
        """Send no further FETCH until :meth:`resume` (one already sent is still appended when answered)."""
        self._running.clear()

    def resume(self) -> None:
        self._running.set()

    async def run(self) -> None:
        """Reconcile, then fetch, append and apply until cancelled, or until a frame cannot be appended."""
        await self._reconcile()
        pipelining = True
        while True:
            await self._running.wait()
            wal = self.host.log
            assert wal is not None
            end = wal.end_offset
            syncing = wal.durable_offset < end
            lost = getattr(self.host, "lost_copy", False)
            if syncing and not pipelining and not lost:
                await wal.wait_offset_durable(end - 1)
                continue
            try:
                frames = await self.client.fetch(
                    self.partition,
                    self.me,
                    self.role.epoch,
                    end,
                    # 0, which no log has: this replica lost what it acknowledged to a leader of before
                    LOST_COPY_OFFSET if lost else wal.durable_offset,
                    max_bytes=self.role.max_bytes,
                    wait_ms=0 if syncing or lost else self.role.wait_ms,
                )
                if lost:
                    self.host.lost_copy_reported()
            except SnapshotNeeded:
                try:
                    await self._copy_state()
                except SqsError as exc:
                    await self._trouble("state copy from", exc)
                continue
            except SqsError as exc:
                # Refusals too (a request this leader finds malformed is a bug, but one to report and retry
                # after a pause, not to end replication over).
                await self._trouble("fetch", exc)
                continue
            self.fetches += 1
            if not frames and syncing:
                # Nothing new while this log syncs: report the sync once it is done, and stop pipelining.
                pipelining = False
                await wal.wait_offset_durable(end - 1)
                continue
            if frames:
                pipelining = len(frames) > 1
            try:
                turn_ends = time.monotonic() + APPLY_TURN_SECONDS
                for epoch, offset, payload in frames:
                    # Decoded once, before the append: what is not a record is refused before it is stored.
                    record = codec.decode(payload)
                    wal.append_encoded(epoch, offset, payload)
                    self.host.apply(record)
                    if time.monotonic() > turn_ends:
                        # A fetch's bytes bound its records, not their work: a follower catching up through the
                        # deletes of a large backlog held its loop 186 ms applying one fetch. Each record is whole
                        # before the loop turns, so whatever runs meanwhile sees a state the log stands for.
                        await asyncio.sleep(0)
                        turn_ends = time.monotonic() + APPLY_TURN_SECONDS
            except Exception as exc:
                log.critical("partition %d: replication stopped: %s", self.partition, exc)
                self.failure = exc
                self.on_trouble()
                return

    async def _reconcile(self) -> None:
        """Cut what this log holds beyond the common ground with the leader's, asking until it is known."""
        while True:
            wal = self.host.log
            assert wal is not None
            history = wal.epochs.as_rules()
            question: AskAbout | None = first_question(history)
            try:
                while question is not None:
                    answer = await self.client.offset_for_epoch(self.partition, self.role.epoch, question.epoch)
                    verdict = truncation_point(
                        history, wal.end_offset, None if answer is None else EpochEnd(*answer)
                    )
                    if isinstance(verdict, AskAbout):
                        question = verdict
                        continue
                    if verdict.offset < wal.start_offset:
                        # What is common lies before this log's compacted base: only a copy helps.
                        await self._copy_state()
                    elif verdict.offset < wal.end_offset:
                        log.warning(
                            "partition %d: cutting the log from offset %d to %d, beyond what leader %s:%d holds",
                            self.partition,
                            verdict.offset,
                            wal.end_offset,
                            *self.role.leader,
                        )
                        await self.host.truncate(verdict.offset)
                        self.truncated_to = verdict.offset
                    break
            except SqsError as exc:
                await self._trouble("epoch question to", exc)
                continue
            return

    async def _copy_state(self) -> None:
        """Install a copy of the leader's first segment: its bytes go to a staging file as they arrive, each
        batch checked, and the log is replaced once the copy is whole.  A leader of before COPY_BASE sends
        its state as records instead (:meth:`_copy_records`)."""
        receiver: BaseReceiver | None = None
        copy = 0
        started = time.monotonic()
        try:
            while receiver is None or receiver.received < receiver.size:
                position = 0 if receiver is None else receiver.received
                try:
                    copy, offset, size, data = await self.client.copy_base(
                        self.partition, self.me, self.role.epoch, copy, position, COPY_CHUNK_BYTES
                    )
                except InvalidAction:
                    await self._copy_records()
                    return
                if receiver is None:
                    receiver = BaseReceiver(self.host.directory, offset, size)
                elif (offset, size) != (receiver.offset, receiver.size) or not data:
                    raise ServiceUnavailable(f"the leader's copy changed or ended early at byte {position}")
                await asyncio.to_thread(receiver.add, data)
            await asyncio.to_thread(receiver.finish)
        except BaseException as exc:
            if receiver is not None:
                receiver.discard()
            if isinstance(exc, CorruptSegment):
                self.refused_copies += 1
                raise ServiceUnavailable(f"the copy of the leader's first segment did not check out: {exc}") from None
            raise
        seconds = time.monotonic() - started
        log.warning(
            "partition %d: installing a copy of leader %s:%d's first segment: the state as of offset %d and "
            "records up to %d, %d bytes in %.2f s (%.1f MB/s)",
            self.partition, *self.role.leader, receiver.offset, receiver.end_offset - 1, receiver.size, seconds,
            receiver.size / 1e6 / max(seconds, 1e-6),
        )
        await self.host.install_base(receiver.path)
        self.copies += 1
        self.copied_bytes += receiver.size
        self.copy_memory = max(self.copy_memory, receiver.held_most)

    async def _copy_records(self) -> None:
        """Install a copy of the state of a leader of before COPY_BASE, which sends it as records in chunks."""
        payloads: list[bytes] = []
        chunk, chunks = 0, 1
        while chunk < chunks:
            offset, epoch, history, chunks, part = await self.client.snapshot(
                self.partition, self.me, self.role.epoch, chunk
            )
            payloads.extend(part)
            chunk += 1
        log.warning(
            "partition %d: installing a copy of leader %s:%d's state as of offset %d (%d records)",
            self.partition,
            *self.role.leader,
            offset,
            len(payloads),
        )
        await self.host.install(offset, epoch, history, payloads)
        self.copies += 1

    async def _trouble(self, what: str, exc: SqsError) -> None:
        level = logging.INFO if isinstance(exc, ServiceUnavailable) else logging.WARNING
        log.log(level, "partition %d: %s %s:%d failed: %s", self.partition, what, *self.role.leader, exc)
        self.on_trouble()
        await asyncio.sleep(self.role.retry_seconds)

    async def close(self) -> None:
        await self.client.close()
