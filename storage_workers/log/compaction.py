"""Compaction: sealed segments replaced by one base segment holding only the live state they add up to.

An always-busy queue writes SENT, RECEIVED and DELETED records forever while its live state stays small, so
the log is compacted when it is much larger than the live state, and also, however small it is, once the
bytes of deleted, purged and expired messages are most of what was written since the last compaction: their
bodies must not stay readable on disk for long (see :class:`Compactor`).  Either way:

1. the sealed segments ``[first .. last]`` (the active segment keeps taking appends) are read and folded into
   the state they describe, by replaying them into a fresh engine, in a thread, off the event loop;
2. that state is written as snapshot frames (records ``SEQUENCE``, ``RESTORED``, ...) to ``<last>.seg.tmp``
   with the ``BASE`` flag, and fsynced.  Its header names the offset and epoch of the last record folded
   (the snapshot is the state as of that offset) and starts the log at the offset after it; an ``EPOCHS``
   frame keeps the epoch history up to there, whose records are gone;
3. the file is renamed over segment ``last`` (atomic) and the directory fsynced: from here on recovery
   starts at ``last`` and ignores everything before it;
4. segments ``first .. last-1`` are deleted.

A crash before 3 leaves a ``.tmp`` that recovery deletes; a crash between 3 and 4 leaves obsolete segments
that recovery deletes.  Either way the log replays to the same state.

A failed compaction (a full disk, a damaged sealed segment) changes nothing, and the worker keeps serving
from the log as it is.  Since each attempt re-reads every sealed segment, the next one waits: 1 s after the
first failure, doubling up to 5 min.  A streak of failures is reported once at ERROR with its cause (again
only if the cause changes), the retries at DEBUG, and the first success after it at INFO.
"""

from __future__ import annotations

import asyncio
import logging
import threading
from array import array
from collections.abc import Awaitable, Callable, Collection, Iterable, Iterator
from itertools import chain
from pathlib import Path
from typing import NamedTuple

from ferrymq.clock import Clock, SystemClock
from ferrymq.storage.engine.fold import LeftOutMismatch, Removals
from ferrymq.storage.engine.records import DROPPED, RESTORED, SEQUENCE, Record
from ferrymq.storage.log import records as codec
from ferrymq.storage.log.base import write_base
from ferrymq.storage.log.body_refs import records_without_bodies, resolve_bodies
from ferrymq.storage.log.format import BASE, VERSION, CorruptSegment
from ferrymq.storage.log.reading import SealedSegments
from ferrymq.storage.log.removals import removals_in
from ferrymq.storage.log.segments import SegmentInfo, fsync_dir, segment_path
from ferrymq.storage.log.writer import LogWriter

log = logging.getLogger(__name__)

Fold = Callable[[Iterator[Record], Removals], Iterable[Record]]
"""Turns a log's records into records that rebuild the same state from nothing, told what they remove
(:mod:`.removals`)."""


class CompactionCancelled(Exception):
    pass


def compact_segments(
    directory: Path,
    indexes: list[int],
    fold: Fold,
    cancelled: threading.Event | None = None,
    *,
    keep_queues: Collection[str] | None = None,
    placed: list[Placement] | None = None,
    after: AfterBase | None = None,
) -> SegmentInfo:
    """Replace the sealed segments ``indexes`` (consecutive, starting at the base) by one base segment.

    The fold sees the records with their bodies left on disk (:mod:`.body_refs`).  ``keep_queues``: the
    queues the worker still has; the state of any other queue (dropped, or forgotten once idle) is left
    out, since whatever the log holds after these segments can only re-create such a queue from nothing.
    ``placed``, when given, receives where the new base keeps each message (:class:`Placement`), for a state
    that reads bodies from the log to find them once the folded segments are gone.  ``after`` is called once
    the base is in place, in this thread, with the base and ``placed``.
    """
    last = indexes[-1]
    removals = removals_in(directory, indexes, cancelled)
    if removals is None:
        raise CompactionCancelled()

    def folding(told: Removals) -> tuple[SealedSegments, Iterator[Record]]:
        sealed = SealedSegments(directory, indexes)
        return sealed, iter(fold(_watch(records_without_bodies(sealed), cancelled), told))

    try:
        sealed, folded = folding(removals)
    except LeftOutMismatch as exc:
        log.warning("%s: %s; folding segments %d..%d again with every message replayed", directory, exc,
                    indexes[0], last)
        sealed, folded = folding(Removals())
    first = next(folded, None)
    if not sealed.finished:
        # The header and the snapshot frames name the offset the state is as of, known once every record
        # was read: a fold that yields earlier would have its state written under a later offset's name.
        raise RuntimeError("compaction's fold yielded records before it read every record")
    snapshot: Iterable[Record] = chain([first], folded) if first is not None else ()
    if keep_queues is not None:
        snapshot = (r for r in snapshot if r[0] in (SEQUENCE, DROPPED) or r[1] in keep_queues)
    offset, epoch = sealed.last_offset, sealed.last_epoch
    records = _watch(resolve_bodies(snapshot, directory), cancelled)
    if placed is None:
        size = write_base(directory, last, (codec.encode(r) for r in records), offset, epoch, sealed.history)
    else:
        lengths: list[int] = []
        seqs: list[array[int] | None] = []
        positions: list[int] = []
        size = write_base(directory, last, _noting(records, lengths, seqs), offset, epoch, sealed.history, positions)
        placed.extend(
            Placement(position, length, held)
            for position, length, held in zip(positions, lengths, seqs, strict=True)
            if held is not None
        )
    for index in indexes[:-1]:
        segment_path(directory, index).unlink()
    fsync_dir(directory)
    base = SegmentInfo(last, size, BASE, VERSION, offset + 1, offset + 1)
    if after is not None:
        after(base, placed or [])
    return base


class Placement(NamedTuple):
    """A record of a new base that holds messages: where its payload lies and, item by item, whose it is."""

    position: int
    length: int
    seqs: array[int]


def _noting(records: Iterable[Record], lengths: list[int], seqs: list[array[int] | None]) -> Iterator[bytes]:
    """``records`` encoded, noting each payload's length and the messages it holds."""
    for record in records:
        payload = codec.encode(record)
        lengths.append(len(payload))
        seqs.append(array("q", [item[0] for item in record[2]]) if record[0] == RESTORED else None)
        yield payload


def _watch(records: Iterable[Record], cancelled: threading.Event | None) -> Iterator[Record]:
    for n, record in enumerate(records):
        if cancelled is not None and n % 1024 == 0 and cancelled.is_set():
            raise CompactionCancelled()
        yield record


AfterBase = Callable[[SegmentInfo, list[Placement]], None]
"""Told, in compaction's thread, of the new base once it is in place, and where it keeps each message."""
BaseWritten = Callable[[SegmentInfo, list[Placement], frozenset[str] | None], None]
""":data:`AfterBase`, told the queues kept as well."""
Relocate = Callable[[list[int], int, list[Placement]], Awaitable[None]]
"""``(folded segment indexes, the new base's index, where the base keeps each message)``."""

FIRST_RETRY_SECONDS = 1.0
MAX_RETRY_SECONDS = 300.0


class Compactor:
    """Decides when to compact a writer's log and runs compaction in a thread, one at a time.

    The log is compacted once it is at least ``min_bytes`` and more than ``ratio`` times the live state
    (``live_bytes()``), or once the dead bytes (the log's size less the live state) are at least
    ``min_dead_bytes`` and ``dead_share`` of the log, counting only what was written after the base segment
    (a base holds live state only, so dead bytes are in what came after it; requiring them there keeps an
    estimate of the live state that runs low from compacting over and over).  Call :meth:`check` after each
    commit (``LogWriter.on_commit``).  After a failure the next attempt waits (see the module docstring);
    ``clock.monotonic()`` measures the wait.
    """

    def __init__(
        self,
        writer: LogWriter,
        fold: Fold,
        live_bytes: Callable[[], int],
        *,
        min_bytes: int = 128 * 1024 * 1024,
        ratio: float = 4.0,
        clock: Clock | None = None,
        first_retry: float = FIRST_RETRY_SECONDS,
        max_retry: float = MAX_RETRY_SECONDS,
        live_queues: Callable[[], Iterable[str]] | None = None,
        min_dead_bytes: int = 8 * 1024 * 1024,
        dead_share: float = 0.5,
        relocate: Relocate | None = None,
        after_base: BaseWritten | None = None,
        held: Callable[[], bool] | None = None,
    ) -> None:
        self.writer = writer
        self.held = held
        """Whether compaction must wait (a follower is copying the log's first segment, which a new base would
        make stale before the follower could fetch what follows it)."""
        self.relocate = relocate
        """Told, once the new base replaced the folded segments, where the base keeps each message: a state that
        reads bodies from the log moves its references there before the old files are let go."""
        self.after_base = after_base
        """Called in compaction's thread once a new base is in place, with where it keeps each message and the
        queues kept (a checkpoint of the state the base holds is written there)."""
        self.min_dead_bytes = min_dead_bytes
        self.dead_share = dead_share
        self.live_queues = live_queues
        """The queue ids the worker holds now: any other queue's state is left out of the new base."""
        self.fold = fold
        self.live_bytes = live_bytes
        self.min_bytes = min_bytes
        self.ratio = ratio
        self.clock: Clock = clock if clock is not None else SystemClock()
        self.first_retry = first_retry
        self.max_retry = max_retry
        self.runs = 0
        """Compactions that succeeded."""
        self.attempts = 0
        """Compactions started, failed ones included."""
        self.failures = 0
        """Consecutive failures, 0 once a compaction succeeds."""
        self.last_error: str | None = None
        """The cause of the last failure while ``failures`` > 0."""
        self.next_attempt: float | None = None
        """``clock.monotonic()`` time before which no compaction starts, while ``failures`` > 0."""
        self._task: asyncio.Task[None] | None = None
        self._cancelled = threading.Event()

    @property
    def running(self) -> bool:
        return self._task is not None and not self._task.done()

    def status(self) -> dict[str, object]:
        """Compaction's state as the worker reports it (``ping``)."""
        retry_in = None
        if self.next_attempt is not None:
            retry_in = round(max(0.0, self.next_attempt - self.clock.monotonic()), 3)
        return {
            "runs": self.runs,
            "running": self.running,
            "failures": self.failures,
            "last_error": self.last_error,
            "retry_in_seconds": retry_in,
        }

    def check(self) -> None:
        if self.running or self.writer.closed:
            return
        if self.next_attempt is not None and self.clock.monotonic() < self.next_attempt:
            return
        if not self.due() or (self.held is not None and self.held()):
            return
        sealed = self.writer.sealed_segments()
        if not sealed or (len(sealed) == 1 and sealed[0].is_base):
            # Everything worth dropping is in the active segment: seal it first.
            self.writer.request_roll()
            return
        self.attempts += 1
        # Read on the event loop, before the thread starts: the worker's state changes only here.
        keep = frozenset(self.live_queues()) if self.live_queues is not None else None
        self._task = asyncio.get_running_loop().create_task(self._run([s.index for s in sealed], keep))

    def due(self) -> bool:
        """Whether the log is large against its live state, or mostly dead bytes (see the class docstring)."""
        total = self.writer.total_bytes
        live = self.live_bytes()
        if total >= self.min_bytes and total >= self.ratio * live:
            return True
        dead = total - live
        segments = self.writer.segments
        since_base = total - (segments[0].size if segments and segments[0].is_base else 0)
        return dead >= self.min_dead_bytes and since_base >= self.min_dead_bytes and dead >= self.dead_share * total

    async def _run(self, indexes: list[int], keep: frozenset[str] | None) -> None:
        directory = self.writer.directory
        async with self.writer.segment_lock:
            if not set(indexes) <= {s.index for s in self.writer.sealed_segments()}:
                # A truncation cut the log since these segments were chosen: the next check chooses again.
                return
            placed: list[Placement] | None = [] if self.relocate or self.after_base else None
            after_base = self.after_base
            after = None if after_base is None else lambda base, where: after_base(base, where, keep)
            try:
                base = await asyncio.to_thread(
                    compact_segments, directory, indexes, self.fold, self._cancelled, keep_queues=keep, placed=placed,
                    after=after,
                )
            except CompactionCancelled:
                return
            except Exception as exc:
                self._failed(indexes, exc)
                return
            self.writer.replace_sealed(indexes, base)
            if self.relocate is not None and placed is not None:
                await self.relocate(indexes, base.index, placed)
        self.runs += 1
        if self.failures:
            log.info(
                "compaction works again after %d failed attempt(s); compacted segments %d..%d into %d bytes",
                self.failures,
                indexes[0],
                indexes[-1],
                base.size,
            )
        else:
            log.info("compacted segments %d..%d into %d bytes", indexes[0], indexes[-1], base.size)
        self.failures, self.last_error, self.next_attempt = 0, None, None

    def _failed(self, indexes: list[int], exc: Exception) -> None:
        cause = f"{type(exc).__name__}: {exc}"
        first = self.failures == 0 or cause != self.last_error
        self.failures += 1
        self.last_error = cause
        # The exponent stops growing long before a float would overflow: a streak can last days.
        wait = min(self.first_retry * 2.0 ** min(self.failures - 1, 64), self.max_retry)
        self.next_attempt = self.clock.monotonic() + wait
        if not first:
            log.debug("compaction failed again (%d in a row): %s; next attempt in %.0f s", self.failures, cause, wait)
            return
        log.error(
            "compaction of segments %d..%d failed: %s; the log keeps growing until it works, next attempt in "
            "%.0f s (backing off up to %.0f s)",
            indexes[0],
            indexes[-1],
            cause,
            wait,
            self.max_retry,
            # A full disk or a damaged segment is explained by its message; anything else is a bug whose
            # traceback is what it takes to fix it.
            exc_info=None if isinstance(exc, OSError | CorruptSegment) else exc,
        )

    async def close(self) -> None:
        """Abandon a running compaction (the log stays as it was) and wait for its thread to stop."""
        self._cancelled.set()
        if self._task is not None:
            await asyncio.gather(self._task, return_exceptions=True)
