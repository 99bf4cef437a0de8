"""Group commit: many appends, one write and one ``fdatasync`` (in an I/O thread, :mod:`.io_thread`, or on the
event loop while the disk is quick, :mod:`.sync_place`), then all of them acknowledged.

``append`` is synchronous and cheap: it gives the record the log's next offset, encodes it into the pending
batch and returns that offset.  While one batch is being written and synced in the I/O thread, the event
loop keeps accepting requests and appending (while it is synced on the loop, they wait in the sockets); when
the sync returns, the next batch (everything appended meanwhile) goes at once, and the callbacks of everything
now durable run in order.  Each batch is written with its commit frame (:mod:`.format`) in one write, which is
what lets recovery tell a torn last batch from damage.

Two ways to wait: by byte position (``end``, ``when_durable``: positions count record bytes appended since
the writer was opened, only order events and never leave the process) and by offset (``end_offset``,
``when_offset_durable``: what replication will wait on, "durable up to offset N").

Segments roll when the active one passes ``segment_bytes`` (or when compaction asks), always at a batch
boundary, so a frame never spans two files and a sealed segment is entirely durable before the next one
exists.  The writer never appends to a version 1 segment: on a log that ends with one, it starts a new one.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import logging
import os
import time
from collections import deque
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ferrymq.replication_rules import EpochEnd
from ferrymq.storage.engine.records import Record
from ferrymq.storage.log import records as codec
from ferrymq.storage.log.epochs import EpochHistory
from ferrymq.storage.log.format import BASE, RECORD, VERSION, encode_commit, encode_frame
from ferrymq.storage.log.io_thread import IoThread
from ferrymq.storage.log.reading import LogReader, OffsetCompacted, SegmentIndexes
from ferrymq.storage.log.recovery import RecoveredLog
from ferrymq.storage.log.segments import SegmentInfo, create_segment, list_segments, open_for_append, write_all
from ferrymq.storage.log.sync_place import SyncPlace
from ferrymq.storage.log.truncation import cut_after

log = logging.getLogger(__name__)

DEFAULT_SEGMENT_BYTES = 64 * 1024 * 1024


Placed = Callable[[int, int, list[tuple[bytes, int, int]]], None]


class LogFailed(Exception):
    """A write or sync failed: what the log holds on disk is no longer known, so nothing more is acknowledged."""


class OffsetMismatch(ValueError):
    """A replicated record's offset is not the one the log's end calls for."""


class LogWriter:
    def __init__(
        self,
        directory: Path,
        recovered: RecoveredLog | None = None,
        *,
        segment_bytes: int = DEFAULT_SEGMENT_BYTES,
        max_batch: int = 1024,
        on_fatal: Callable[[BaseException], None] | None = None,
        on_placed: Placed | None = None,
        on_commit: Callable[[], None] | None = None,
        on_sync: Callable[[float], None] | None = None,
        sync_place: SyncPlace | None = None,
    ) -> None:
        """Continue the log in ``directory`` that :func:`~.recovery.recover` returned, or start one in an
        empty directory (``recovered`` None).  ``on_placed`` is told, on the event loop, where each batch
        lies once it is durable (``(segment index, position of its first frame, [(frame, epoch, offset)])``):
        from then on its records can be read back from the file.  ``on_commit`` is called on the event loop after
        each batch is durable; ``on_sync`` is told, where the sync ran, how many seconds each fdatasync took.
        ``sync_place`` decides whether a batch's write and sync run on the event loop or in the I/O thread
        (:mod:`.sync_place`; None: always the thread)."""
        if recovered is None:
            directory.mkdir(parents=True, exist_ok=True)
            if list_segments(directory):
                raise ValueError(f"{directory} holds a log: recover it and pass what recovery returned")
            recovered = RecoveredLog([], EpochHistory(), 0)
        self.directory = directory
        self.segment_bytes = segment_bytes
        self.max_batch = max(1, max_batch)
        self.on_fatal = on_fatal
        self.on_placed = on_placed
        self.on_commit = on_commit
        self.on_sync = on_sync
        self.sync_place = sync_place
        self.segment_lock = asyncio.Lock()
        """Held while sealed segments are rewritten (compaction) or cut (truncation): never both at once."""
        self.epochs = recovered.epochs.copy()
        """Epoch history of the records appended so far."""
        self._next_offset = recovered.end_offset
        self._durable_offset = self._next_offset
        self.segments: list[SegmentInfo] = list(recovered.segments)
        if not self.segments:
            self._fd = create_segment(directory, 1, 1, BASE)
            self.segments.append(SegmentInfo(1, os.fstat(self._fd).st_size, BASE))
        elif self.segments[-1].version != VERSION:
            # Frames of two formats never share a segment: the log goes on in a segment of today's.
            self._fd = self._new_segment(self.segments[-1].index + 1)
        else:
            self._fd = open_for_append(directory, self.segments[-1].index)
        # Touched only by the commit in flight (in the I/O thread or on the loop) once running:
        self._io_index = self.segments[-1].index
        self._io_size = self.segments[-1].size
        self._roll_requested = False

        self._loop: asyncio.AbstractEventLoop | None = None
        self._io = IoThread("ferrymq-log")
        self._in_flight = (0, 0, 0)
        """The batch being synced: the position it makes durable, its bytes on disk and the next offset."""
        self._in_flight_frames: tuple[int, int, list[tuple[bytes, int, int]]] = (0, 0, [])
        """The batch being synced: its segment, where in it the batch starts, and its frames."""
        self._pending: list[tuple[bytes, int, int]] = []
        """Frames not yet in a batch being synced, with their epoch and offset."""
        self._end = 0
        self._handed = 0
        self._durable = 0
        self._committing = False
        self._scheduled = False
        self._truncating = False
        self._waiters: deque[tuple[int, Callable[[Any], None], Any]] = deque()
        self._offset_waiters: deque[tuple[int, Callable[[Any], None], Any]] = deque()
        self.failed: BaseException | None = None
        self.closed = False
        self.batches = 0
        """Batches written and synced so far (each one fdatasync)."""
        self.rewrites = 0
        """Times segments were cut or replaced (truncation, compaction): a checkpoint taken before names files
        that may no longer hold what it was taken from."""
        self.indexes = SegmentIndexes()
        """Where batches start in each segment, noted by the readers of :meth:`read_from` as they walk."""

    def _new_segment(self, index: int) -> int:
        fd = create_segment(self.directory, index, self._next_offset)
        size = os.fstat(fd).st_size
        self.segments.append(SegmentInfo(index, size, 0, VERSION, self._next_offset, self._next_offset))
        return fd

    # --- positions and offsets ------------------------------------------------------------------------

    @property
    def end(self) -> int:
        """Position just past the last record appended."""
        return self._end

    @property
    def durable(self) -> int:
        """Position up to which everything is on disk."""
        return self._durable

    @property
    def end_offset(self) -> int:
        """The offset after the last record appended: the next record's."""
        return self._next_offset

    @property
    def durable_offset(self) -> int:
        """The offset after the last durable record."""
        return self._durable_offset

    @property
    def start_offset(self) -> int:
        """The first offset whose record the log still holds; the state before it is the base's snapshot."""
        return self.segments[0].first_offset

    @property
    def epoch(self) -> int:
        """The epoch of the last record (what an append may not go below)."""
        return self.epochs.latest or 0

    def end_offset_for_epoch(self, epoch: int) -> EpochEnd | None:
        """This log's answer to a follower asking about ``epoch`` (see ``EpochHistory.end_offset_for``)."""
        return self.epochs.end_offset_for(epoch, self._next_offset)

    @property
    def total_bytes(self) -> int:
        """Size of the log on disk once the pending records are written (their commit frames aside)."""
        return sum(s.size for s in self.segments) + (self._end - self._handed)

    def sealed_segments(self) -> list[SegmentInfo]:
        return self.segments[:-1]

    # --- appending ---------------------------------------------------------------------------------

    def append(self, record: Record, epoch: int) -> int:
        """Append ``record`` under leader ``epoch`` at the next offset; returns that offset."""
        return self._append(epoch, self._next_offset, codec.encode(record))

    def append_replicated(self, epoch: int, offset: int, payload: bytes | memoryview) -> int:
        """Append a record a leader appended at ``offset`` under ``epoch`` (a follower's append); ``offset``
        must be the log's next, and ``payload`` an engine record's bytes."""
        if not codec.readable(payload):
            raise ValueError(f"replicated payload at offset {offset} is not a record")
        return self.append_encoded(epoch, offset, payload)

    def append_encoded(self, epoch: int, offset: int, payload: bytes | memoryview) -> int:
        """:meth:`append_replicated` of a payload the caller knows to be an engine record's bytes (it encoded
        the record, or decoded the payload already): decoding it once more would cost as much as the append."""
        if offset != self._next_offset:
            raise OffsetMismatch(
                f"replicated record at offset {offset}, but the log's next offset is {self._next_offset}"
            )
        return self._append(epoch, offset, bytes(payload))

    def _append(self, epoch: int, offset: int, payload: bytes) -> int:
        if self.failed is not None or self.closed:
            raise LogFailed("the log is closed" if self.failed is None else f"the log failed: {self.failed}")
        if self._truncating:
            raise LogFailed("the log is being truncated")
        frame = encode_frame(RECORD, epoch, offset, payload)
        # Refuses an epoch older than the last record's (EpochRegressed) before anything changes.
        self.epochs.observe(epoch, offset)
        self._next_offset = offset + 1
        self._pending.append((frame, epoch, offset))
        self._end += len(frame)
        if not self._scheduled and not self._committing:
            self._scheduled = True
            if self._loop is None:
                self._loop = asyncio.get_running_loop()
            self._loop.call_soon(self._start_commit)
        return offset

    def when_durable(self, position: int, callback: Callable[[Any], None], arg: Any) -> None:
        """Call ``callback(arg)`` once everything up to ``position`` is on disk (now, if it already is)."""
        if position <= self._durable:
            callback(arg)
        else:
            self._waiters.append((position, callback, arg))

    def when_offset_durable(self, offset: int, callback: Callable[[Any], None], arg: Any) -> None:
        """Call ``callback(arg)`` once the record at ``offset`` and all before it are on disk."""
        if offset < self._durable_offset:
            callback(arg)
        else:
            self._offset_waiters.append((offset, callback, arg))

    async def wait_durable(self, position: int | None = None) -> None:
        position = self._end if position is None else position
        if position <= self._durable:
            return
        await self._future(self._waiters, position)

    async def wait_offset_durable(self, offset: int) -> None:
        if offset < self._durable_offset:
            return
        await self._future(self._offset_waiters, offset)

    async def _future(self, waiters: deque[tuple[int, Callable[[Any], None], Any]], at: int) -> None:
        if self.failed is not None:
            raise LogFailed(str(self.failed))
        fut = asyncio.get_running_loop().create_future()
        waiters.append((at, _resolve, fut))
        await fut

    async def flush(self) -> None:
        """Wait until everything appended so far is durable."""
        await self.wait_durable(self._end)

    def request_roll(self) -> None:
        """Start a new segment after the next batch, so that everything before it can be compacted."""
        self._roll_requested = True

    # --- the commit cycle ------------------------------------------------------------------------------

    def _start_commit(self) -> None:
        self._scheduled = False
        if self._committing or not self._pending or self.failed is not None:
            return
        pending = self._pending
        if len(pending) > self.max_batch:
            batch, self._pending = pending[: self.max_batch], pending[self.max_batch :]
        else:
            batch, self._pending = pending, []
        data = batch[0][0] if len(batch) == 1 else b"".join(frame for frame, _, _ in batch)
        _, epoch, offset = batch[-1]
        written = data + encode_commit(data, epoch, offset)
        self._handed += len(data)
        self._committing = True
        assert self._loop is not None
        self._in_flight = (self._handed, len(written), offset + 1)
        active = self.segments[-1]
        self._in_flight_frames = (active.index, active.size, batch)
        place = self.sync_place
        if place is not None and place.on_loop() and not self._rolls_after(len(written)):
            # One callback later: the records' other readers (the leader's parked fetches, answered after the
            # turn that appended) are sent them first, so the followers' syncs run alongside this one.
            self._loop.call_soon(self._sync_on_loop, written, offset + 1)
        else:
            self._io.submit(self._loop, self._write_and_sync, (written, offset + 1), self._committed)

    def _rolls_after(self, size: int) -> bool:
        """Whether a batch of ``size`` bytes starts a new segment (a file made and its directory synced: left to
        the thread, unless a roll is asked for in the turn between)."""
        return self._roll_requested or self._io_size + size >= self.segment_bytes

    def _sync_on_loop(self, data: bytes, next_offset: int) -> None:
        try:
            rolled, exc = self._write_and_sync(data, next_offset, on_loop=True), None
        except Exception as error:  # what the thread would have handed back: the log fails
            rolled, exc = None, error
        self._committed(rolled, exc)

    def _write_and_sync(self, data: bytes, next_offset: int, *, on_loop: bool = False) -> SegmentInfo | None:
        """In the I/O thread (or on the loop, see :mod:`.sync_place`): append, sync, and roll to a new segment
        when due; returns the new segment."""
        write_all(self._fd, data)
        started = time.perf_counter()
        os.fdatasync(self._fd)
        took = time.perf_counter() - started
        if self.on_sync is not None:
            self.on_sync(took)
        if self.sync_place is not None:
            self.sync_place.observe(took, on_loop=on_loop)
        self._io_size += len(data)
        if self._io_size < self.segment_bytes and not self._roll_requested:
            return None
        self._roll_requested = False
        index = self._io_index + 1
        fd = create_segment(self.directory, index, next_offset)
        os.close(self._fd)
        self._fd, self._io_index = fd, index
        self._io_size = os.fstat(fd).st_size
        return SegmentInfo(index, self._io_size, 0, VERSION, next_offset, next_offset)

    def _committed(self, rolled: SegmentInfo | None, exc: BaseException | None) -> None:
        self._committing = False
        if exc is not None:
            self._fail(exc)
            return
        target, size, next_offset = self._in_flight
        self.batches += 1
        self.segments[-1].size += size
        self.segments[-1].end_offset = next_offset
        if rolled is not None:
            self.segments.append(rolled)
        self._durable = target
        self._durable_offset = next_offset
        if self.on_placed is not None:
            try:
                self.on_placed(*self._in_flight_frames)
            except Exception:
                # What was not placed stays readable where it was kept meanwhile; the log itself is fine.
                log.exception("noting where a batch lies failed")
        # The thread starts on the next batch while the callbacks below run; a sync on the loop waits until the
        # answers they write have gone out (a connection sends what it was given at the end of the turn).
        next_on_loop = self.sync_place is not None and self.sync_place.on_loop()
        if self._pending and not next_on_loop:
            self._start_commit()
        _fire(self._waiters, lambda position: position <= target)
        _fire(self._offset_waiters, lambda offset: offset < next_offset)
        if self.on_commit is not None:
            self.on_commit()
        if self._pending and next_on_loop:
            self._start_commit()

    def _fail(self, exc: BaseException) -> None:
        log.critical("log write failed; no further request can be acknowledged: %s", exc)
        self.failed = exc
        for waiters in (self._waiters, self._offset_waiters):
            for _, callback, arg in waiters:
                if callback is _resolve and not arg.done():
                    arg.set_exception(LogFailed(str(exc)))
            waiters.clear()
        if self.on_fatal is not None:
            self.on_fatal(exc)

    # --- replication: reading and truncating --------------------------------------------------------------

    def read_from(self, offset: int) -> LogReader:
        """The durable records from ``offset`` on, as ``(epoch, offset, payload bytes)``; raises
        :class:`~.reading.OffsetCompacted` when ``offset`` is before the log's start (send a snapshot)."""
        if offset > self._next_offset:
            raise ValueError(f"offset {offset} is past the end of the log (offset {self._next_offset})")
        segments = [dataclasses.replace(s) for s in self.segments]
        self.indexes.keep_only({s.index for s in segments})
        return LogReader(self.directory, segments, min(offset, segments[-1].end_offset), self.indexes)

    async def truncate_after(self, offset: int) -> None:
        """Cut every record after ``offset``, durably, across segments; the log goes on at ``offset + 1``.

        Waits for what was appended to be durable and for a running compaction to end; appending meanwhile
        fails.  The caller's state still holds the records cut: it rebuilds it by recovery.
        """
        if self.failed is not None or self.closed:
            raise LogFailed("the log is closed" if self.failed is None else f"the log failed: {self.failed}")
        if offset + 1 < self.start_offset:
            raise OffsetCompacted(f"offset {offset} is before the log's start ({self.start_offset}): compacted away")
        if offset + 1 >= self._next_offset:
            return
        self._truncating = True
        try:
            await self.flush()
            async with self.segment_lock:
                if offset + 1 < self.start_offset:
                    raise OffsetCompacted(f"offset {offset} was compacted away while the truncation waited")
                self.rewrites += 1
                self.segments = await self._io.call(self._cut, offset)
                # A cut in place keeps the file's inode: what was noted of its batches may no longer hold.
                self.indexes.clear()
        finally:
            self._truncating = False
        self._next_offset = self._durable_offset = offset + 1
        self.epochs.truncate_after(offset)

    def _cut(self, offset: int) -> list[SegmentInfo]:
        """In the I/O thread: cut the files, then go on appending to the segment that holds the cut."""
        kept = cut_after(self.directory, self.segments, offset)
        os.close(self._fd)
        last = kept[-1]
        if last.version != VERSION:
            self._fd = create_segment(self.directory, last.index + 1, offset + 1)
            kept.append(SegmentInfo(last.index + 1, os.fstat(self._fd).st_size, 0, VERSION, offset + 1, offset + 1))
        else:
            self._fd = open_for_append(self.directory, last.index)
        self._io_index, self._io_size = kept[-1].index, kept[-1].size
        return kept

    # --- after compaction and at the end ----------------------------------------------------------------

    def replace_sealed(self, indexes: list[int], base: SegmentInfo) -> None:
        """Record that sealed segments ``indexes`` were compacted into ``base`` (the last of them)."""
        self.rewrites += 1
        gone = set(indexes)
        kept = [s for s in self.segments if s.index not in gone]
        self.segments = sorted([*kept, base], key=lambda s: s.index)

    async def close(self) -> None:
        """Make everything appended durable, then close the file."""
        if self.closed:
            return
        if self.failed is None:
            with contextlib.suppress(LogFailed):
                await self.flush()
        self.closed = True
        await self._io.call(os.close, self._fd)
        self._io.shutdown()


def _fire(waiters: deque[tuple[int, Callable[[Any], None], Any]], due: Callable[[int], bool]) -> None:
    while waiters and due(waiters[0][0]):
        _, callback, arg = waiters.popleft()
        try:
            callback(arg)
        except Exception:
            log.exception("durability callback failed")


def _resolve(fut: asyncio.Future) -> None:
    if not fut.done():
        fut.set_result(None)
